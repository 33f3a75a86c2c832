"""The IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): a big-endian
magic number 0x00 0x00 <type> <ndims> (type 0x08 = unsigned byte), ndims uint32 sizes, then the
data, row-major. Files may be gzipped. Every defect (wrong magic, wrong type or rank, a file
shorter or longer than its header says, a label out of range) is a DataFileError."""
from __future__ import annotations

import math
import os
import struct

import numpy as np

from .files import DataFileError, chunks, open_file, read_exact, scatter

TYPES = {0x08: "unsigned byte", 0x09: "signed byte", 0x0B: "short", 0x0C: "int",
         0x0D: "float", 0x0E: "double"}
UBYTE = 0x08


def _header(f, path: str, ndim: int) -> tuple[int, ...]:
    magic = read_exact(f, 4, path, "the magic number")
    if magic[0] or magic[1]:
        raise DataFileError(path, f"wrong magic number 0x{magic.hex()}: not an IDX file (its "
                            "first two bytes must be zero)")
    if magic[2] != UBYTE:
        raise DataFileError(path, f"wrong magic number 0x{magic.hex()}: data type "
                            f"0x{magic[2]:02x} ({TYPES.get(magic[2], 'unknown')}), expected "
                            f"0x08 (unsigned byte)")
    if magic[3] != ndim:
        raise DataFileError(path, f"wrong magic number 0x{magic.hex()}: {magic[3]} dimensions, "
                            f"expected {ndim} ({'images' if ndim == 3 else 'labels'})")
    shape = struct.unpack(">" + "I" * ndim, read_exact(f, 4 * ndim, path, "the sizes"))
    if 0 in shape:
        raise DataFileError(path, f"has a zero size {shape}")
    return tuple(int(s) for s in shape)


def _gzipped(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def header(path: str, ndim: int) -> tuple[int, ...]:
    """The sizes an IDX file declares, checked against its length when it is not compressed
    (a gzipped file's length is checked when it is read)."""
    try:
        with open_file(path) as f:
            shape = _header(f, path, ndim)
        gz = _gzipped(path)
        size = os.path.getsize(path)
    except OSError as exc:
        raise DataFileError(path, f"cannot read ({exc})") from None
    if not gz:
        need = 4 + 4 * ndim + math.prod(shape)
        if size != need:
            raise DataFileError(path, f"{'truncated' if size < need else 'too long'}: its header "
                                f"says {shape} bytes of data ({need} in all), the file has "
                                f"{size}")
    return shape


def _at_end(f, path: str, shape: tuple[int, ...]) -> None:
    try:
        extra = f.read(1)
    except OSError as exc:
        raise DataFileError(path, f"cannot read ({exc})") from None
    if extra:
        raise DataFileError(path, f"too long: more bytes than its header's sizes {shape}")


def read_labels(path: str, n_classes: int) -> np.ndarray:
    """A 1-D IDX file of labels, each in 0..n_classes-1, as int64."""
    header(path, 1)
    with open_file(path) as f:
        (n,) = _header(f, path, 1)
        y = np.frombuffer(read_exact(f, n, path, f"{n} labels"), np.uint8)
        _at_end(f, path, (n,))
    bad = np.flatnonzero(y >= n_classes)
    if len(bad):
        raise DataFileError(path, f"label {int(y[bad[0]])} at row {int(bad[0])} is out of range "
                            f"0..{n_classes - 1}")
    return y.astype(np.int64)


def read_images(path: str, pos: np.ndarray, n_dest: int) -> np.ndarray:
    """A 3-D IDX file of uint8 images (n, rows, cols), flattened to (n_dest, rows * cols): image
    i lands on row pos[i] (skipped when pos[i] < 0), streamed a chunk at a time."""
    with open_file(path) as f:
        shape = _header(f, path, 3)
        n, row_bytes = shape[0], shape[1] * shape[2]
        if n != len(pos):
            raise DataFileError(path, f"holds {n} images, its labels file {len(pos)} labels")
        dest = np.empty((n_dest, row_bytes), np.uint8)
        for lo, block in chunks(f, path, n, row_bytes, "image"):
            scatter(dest, pos, lo, block)
        _at_end(f, path, shape)
    return dest


def write_idx(path: str, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzipped when the name ends in .gz): for tests and
    for users who convert their own images."""
    import gzip

    a = np.ascontiguousarray(array, np.uint8)
    head = bytes([0, 0, UBYTE, a.ndim]) + struct.pack(">" + "I" * a.ndim, *a.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(head + a.tobytes())
