"""A data file that is there more than once: plain and gzipped (`train-images-idx3-ubyte` and
`train-images-idx3-ubyte.gz`: torchvision keeps both, so does `gunzip -k`), or in the root and
in the archive's folder under it (`data_batch_1.bin` and `cifar-10-batches-bin/data_batch_1.bin`:
`hierfl data fetch` after a hand-unpacked archive). When they hold the same bytes, the first
(in the root, plain) is read and a note says so; when they differ, hierfl does not guess which
one is meant: a DataFileError names both and where they first differ.

"The same bytes" is first judged cheaply: CRC-32 and length, computed for a plain file and read
from the trailer of a gzip file (what it records of the bytes it was made from: a gzip file is
not decompressed when its plain twin, the one read, matches them). Only when these disagree
(different data, a damaged trailer, or a gzip file of several members, whose trailer covers
only the last) are both read through to find the first difference, or that there is none."""
from __future__ import annotations

import functools
import os
import struct
import sys
import zlib

from .files import READ_ERRORS, DataFileError, open_file

BLOCK = 1 << 20


def _gzipped(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _digest(path: str) -> tuple[int, int]:
    """(CRC-32, length mod 2**32) of the bytes the file holds once decompressed (a gzip file's
    as its trailer records them; (-1, -1), never equal, when it is too short to have one)."""
    with open(path, "rb") as f:
        if _gzipped(path):
            if os.path.getsize(path) < 18:          # a gzip header and trailer take 18 bytes
                return -1, -1
            f.seek(-8, os.SEEK_END)
            crc, size = struct.unpack("<II", f.read(8))
            return crc, size
        crc, size = 0, 0
        for block in iter(lambda: f.read(BLOCK), b""):
            crc, size = zlib.crc32(block, crc), size + len(block)
    return crc, size & 0xFFFFFFFF


def _read(f, path: str) -> bytes:
    try:
        return f.read(BLOCK)
    except READ_ERRORS as exc:
        raise DataFileError(path, f"cannot read ({exc})") from None


def _first_difference(a: str, b: str, b_name: str) -> str | None:
    """Where the decompressed bytes of a and b (called b_name) first differ, in words; None when
    they do not."""
    at = 0
    with open_file(a) as fa, open_file(b) as fb:
        while True:
            x, y = _read(fa, a), _read(fb, b)
            if x != y:
                n = min(len(x), len(y))
                if x[:n] == y[:n]:
                    longer = "it" if len(x) > len(y) else b_name
                    return f"{longer} is longer: the other ends at byte {at + n}"
                k = next(i for i in range(n) if x[i] != y[i])
                return f"they first differ at byte {at + k}"
            if not x:
                return None
            at += len(x)


@functools.lru_cache(maxsize=64)
def _judge(first: str, other: str, stamp: tuple) -> None:
    """Raises when first and other differ, else notes (once per process) that first is read."""
    name = os.path.relpath(other, os.path.dirname(first))
    try:
        same = _digest(first) == _digest(other)
    except OSError as exc:
        raise DataFileError(other, f"cannot read ({exc})") from None
    why = None if same else _first_difference(first, other, name)
    if why is not None:
        raise DataFileError(first, f"both it and {name} are here and they hold different data "
                            f"({why}); hierfl does not guess which one is meant: remove or "
                            "rename the other")
    print(f"note: {first} and {name} hold the same data; reading {os.path.basename(first)}",
          file=sys.stderr)


def one_of(paths: list[str]) -> str:
    """The file to read of several that should hold the same data: the first, once every other
    one is checked to hold its bytes (see above)."""
    for other in paths[1:]:
        try:
            stamp = tuple((s.st_size, s.st_mtime_ns) for s in map(os.stat, (paths[0], other)))
        except OSError as exc:
            raise DataFileError(other, f"cannot read ({exc})") from None
        _judge(paths[0], other, stamp)
    return paths[0]
