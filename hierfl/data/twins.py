"""A file that is there twice, plain and gzipped (`train-images-idx3-ubyte` and
`train-images-idx3-ubyte.gz`: torchvision keeps both, so does `gunzip -k`). When the two hold
the same bytes, the plain one is read and a note says so; when they differ, hierfl does not
guess which one is meant: a DataFileError names both and where they first differ.

"The same bytes" is first judged cheaply: the CRC-32 and length of the plain file against those
a gzip file records in its trailer. Only when these disagree (different data, or a gzip file of
several members, whose trailer covers only the last) are both read through to find the first
difference, or that there is none."""
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
    """(CRC-32, length mod 2**32) of the bytes the file holds once decompressed."""
    with open(path, "rb") as f:
        if _gzipped(path):
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


def _first_difference(a: str, b: str) -> str | None:
    """Where the decompressed bytes of a and b first differ, in words; None when they do not."""
    at = 0
    with open_file(a) as fa, open_file(b) as fb:
        while True:
            x, y = _read(fa, a), _read(fb, b)
            if x != y:
                n = min(len(x), len(y))
                if x[:n] == y[:n]:
                    longer = a if len(x) > len(y) else b
                    return f"{os.path.basename(longer)} is longer: the other ends at byte {at + n}"
                k = next(i for i in range(n) if x[i] != y[i])
                return f"they first differ at byte {at + k}"
            if not x:
                return None
            at += len(x)


@functools.lru_cache(maxsize=64)
def _judge(plain: str, packed: str, stamp: tuple) -> None:
    """Raises when plain and packed differ, else notes (once per process) that plain is read."""
    try:
        same = _digest(plain) == _digest(packed)
    except OSError as exc:
        raise DataFileError(packed, f"cannot read ({exc})") from None
    why = None if same else _first_difference(plain, packed)
    if why is not None:
        raise DataFileError(plain, f"both it and {os.path.basename(packed)} are here and they "
                            f"hold different data ({why}); hierfl does not guess which one is "
                            "meant: remove or rename the other")
    print(f"note: {plain} and {os.path.basename(packed)} hold the same data; reading "
          f"{os.path.basename(plain)}", file=sys.stderr)


def one_of(plain: str, packed: str) -> str:
    """The file to read of two that should hold the same data (plain; checked, see above)."""
    try:
        stamp = tuple((s.st_size, s.st_mtime_ns) for s in map(os.stat, (plain, packed)))
    except OSError as exc:
        raise DataFileError(plain, f"cannot read ({exc})") from None
    _judge(plain, packed, stamp)
    return plain
