"""Data files on disk: where a set's files are, how a bad one is reported, and reading the rows
of a big file into their clients' places without a second copy of the whole set."""
from __future__ import annotations

import gzip
import os
import zlib
from typing import IO, Iterator

import numpy as np

from ..config.paths import not_a_file

READ_ERRORS = (OSError, EOFError, ValueError, zlib.error)   # gzip.BadGzipFile is an OSError
CHUNK_BYTES = 8 << 20          # bytes read at once when streaming rows


class DataFileError(Exception):
    """A data file that is missing or malformed: `path` and what is wrong with it."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def fetch_hint(name: str, root: str) -> str:
    return f"download the files with `hierfl data fetch {name} --root {root}`"


def find(root: str, name: str, subdirs: tuple[str, ...] = (), gz: bool = True) -> str | None:
    """`root/name` or (when gz) `root/name.gz`, also under `subdirs` of root, or None. When
    more than one is there they must hold the same data (twins.py: else a DataFileError)."""
    names = (name, name + ".gz") if gz else (name,)
    paths = [os.path.join(root, d, n) for d in ("", *subdirs) for n in names]
    have = [p for p in paths if os.path.isfile(p)]
    if len(have) > 1:
        from .twins import one_of       # cycle: twins.py reads files with this module
        return one_of(have)
    return have[0] if have else None


def require(root: str, name: str, set_name: str, subdirs: tuple[str, ...] = (),
            gz: bool = True) -> str:
    """The path of a set's file, or a DataFileError that names the command that fetches it."""
    if os.path.isfile(root):
        raise DataFileError(root, f"is a file, not a folder: root: names the folder that holds "
                            f"{set_name}'s files")
    if not os.path.isdir(root):
        raise DataFileError(root, f"no such folder; {fetch_hint(set_name, root)}")
    path = find(root, name, subdirs, gz)
    if path is None:
        names = (name, name + ".gz") if gz else (name,)
        for p in (os.path.join(root, d, n) for d in ("", *subdirs) for n in names):
            what = not_a_file(p)
            if what is not None:        # there, but not a file: say what it is
                raise DataFileError(p, f"is {what}, not a regular file: {set_name} reads its "
                                    f"{name} here")
        also = f" (nor {name}.gz)" if gz else ""
        raise DataFileError(os.path.join(root, name),
                            f"file not found{also}; {fetch_hint(set_name, root)}")
    return path


def open_file(path: str) -> IO[bytes]:
    """The file's bytes, decompressed on the fly when it is gzipped (by its magic, not name)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def read_exact(f: IO[bytes], n: int, path: str, what: str) -> bytes:
    try:
        data = f.read(n)
    except READ_ERRORS as exc:
        raise DataFileError(path, f"cannot read {what} ({exc})") from None
    if len(data) != n:
        raise DataFileError(path, f"truncated: {what} needs {n} bytes, the file has {len(data)}")
    return data


def chunks(f: IO[bytes], path: str, rows: int, row_bytes: int,
           what: str) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, uint8 array (k, row_bytes)) for `rows` rows read from f, a chunk at a time."""
    per = max(1, CHUNK_BYTES // max(row_bytes, 1))
    for lo in range(0, rows, per):
        k = min(per, rows - lo)
        data = read_exact(f, k * row_bytes, path, f"{what} rows {lo}..{lo + k - 1}")
        yield lo, np.frombuffer(data, np.uint8).reshape(k, row_bytes)


def scatter(dest: np.ndarray, pos: np.ndarray, lo: int, block: np.ndarray) -> None:
    """dest[pos[lo + i]] = block[i] for the rows of the block that have a place (pos >= 0)."""
    where = pos[lo:lo + len(block)]
    keep = where >= 0
    if keep.all():
        dest[where] = block
    else:
        dest[where[keep]] = block[keep]


def placement(parts: list[np.ndarray], n_rows: int) -> np.ndarray:
    """pos[r] = the row that file row r takes once clients are laid one after another (parts[k]
    are client k's file rows), -1 for rows no client uses."""
    pos = np.full(n_rows, -1, np.int64)
    order = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    pos[order] = np.arange(len(order))
    return pos
