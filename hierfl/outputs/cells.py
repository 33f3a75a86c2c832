"""Some columns of a CSV file, read at once: the cells of each as a numpy array of UTF-8 bytes.

A clients.csv of 10^5-10^6 client-rounds (city-scale runs) costs seconds through `csv.reader`
and a Python loop per row and column. The files hierfl writes have no quoted cells and one cell
per column on every line, so the cells are found with numpy: the positions of the commas and
newlines of the whole file, checked to be w - 1 commas then a newline on every line, give each
cell's start and length, and a column's cells are gathered into one fixed-width bytes array
(what numpy's parsers read at once). Any other file (quotes, carriage returns, a blank line, a
line with more or fewer cells, no newline at the end, mixed line ends) is read by
`csv.reader`, with the same cells."""
from __future__ import annotations

import contextlib
import csv
import os
from typing import Iterable, Iterator

import numpy as np

WIDEST = 256          # longer cells: the csv module (a fixed-width array would be mostly pad)
CHUNK = 1 << 18       # bytes of a column gathered at once


def read_columns(path: str, names: Iterable[str], whole: tuple[str, ...] = ()
                 ) -> tuple[list[str], dict[str, np.ndarray]]:
    """(header, {name: cells in row order as a bytes array}) for the columns of `names` that the
    header has (the first of a repeated name), in the order of `names`. A row without a cell of
    a column named in `whole` is left out; a shorter row reads b"" for its missing cells."""
    names = list(names)
    lay = _layout(path)
    if lay is None:
        return _read_slow(path, names, whole)     # quotes, carriage returns, ragged lines
    head, body, ends, crlf = lay
    idx = _indices(head, names)
    if not idx or not body.size:
        return head, {k: np.zeros(0, "S1") for k in idx}
    w = len(head)
    cols = {}
    for k, i in idx.items():
        e = ends[i::w]
        if i:
            s = ends[i - 1::w] + 1
        else:                                     # after the line end ("\r\n": two bytes)
            s = np.empty_like(e)
            s[0] = 0
            s[1:] = ends[w - 1:-1:w] + 1 + crlf
        cols[k] = _gather(body, s, e - s)
        if cols[k] is None:
            return _read_slow(path, names, whole)
    return head, cols


_KEPT: dict | None = None      # inside `keeping_layouts`: path -> layout


@contextlib.contextmanager
def keeping_layouts() -> Iterator[None]:
    """Within it, each file's layout is found once (a report reads one clients.csv for several
    figures; the files do not change while it runs), while the files kept stay under
    KEEP_BYTES together (a `compare` of many large runs keeps the first ones only)."""
    global _KEPT
    outer, _KEPT = _KEPT, {} if _KEPT is None else _KEPT
    try:
        yield
    finally:
        _KEPT = outer


KEEP_BYTES = 512 << 20


def _layout(path: str) -> tuple[list[str], np.ndarray, np.ndarray | None, int] | None:
    """(header, the bytes after it, the offsets of every "," and line end, 1 for "\r\n" line
    ends) of a file hierfl writes, or None for any other (read by the csv module)."""
    if _KEPT is None:
        return _scan(path)
    key = os.path.abspath(path)
    if key not in _KEPT:
        lay = _scan(path)
        kept = sum(_size(v) for v in _KEPT.values())
        if kept + _size(lay) > KEEP_BYTES:
            return lay
        _KEPT[key] = lay
    return _KEPT[key]


def _size(lay: tuple | None) -> int:
    return 0 if lay is None else lay[1].nbytes + (0 if lay[2] is None else lay[2].nbytes)


def _scan(path: str) -> tuple[list[str], np.ndarray, np.ndarray | None, int] | None:
    with open(path, "rb") as fh:
        buf = fh.read()
    nl = buf.find(b"\n")
    crlf = nl > 0 and buf[nl - 1] == 13           # the csv module's "\r\n" line ends
    if nl < 0 or b'"' in buf or not buf.endswith(b"\n") or \
            buf.count(b"\r") != (buf.count(b"\n") if crlf else 0) or \
            crlf and buf.count(b"\r\n") != buf.count(b"\n"):
        return None                               # quotes, lone or mixed carriage returns
    head = buf[:nl - crlf].decode("utf-8").split(",") if nl - crlf else []
    body = np.frombuffer(buf, np.uint8, offset=nl + 1)
    if not body.size:
        return head, body, None, int(crlf)
    w, end = len(head), 13 if crlf else 10
    if not w:
        return None                               # no header: the csv module's reading
    ends = np.flatnonzero((body == 44) | (body == end))     # "," and the line ends
    n = ends.size // w
    if ends.size != n * w or np.count_nonzero(body[ends] == end) != n or \
            not (body[ends[w - 1::w]] == end).all():
        return None                               # a line with more or fewer cells, a blank line
    if body.size < 2**31:
        ends = ends.astype(np.int32)              # half the memory while kept
    if w == 1 and (np.diff(ends) == 1 + crlf).any() | (ends[0] == 0):
        return None                               # a blank line: no row for csv.reader
    return head, body, ends, int(crlf)


def _gather(body: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray | None:
    """The cells body[start:start + length] as one fixed-width bytes array (None: too wide)."""
    width = int(length.max()) if length.size else 1
    if width > WIDEST:
        return None
    width = max(width, 1)
    at = np.arange(width)
    out = np.empty((len(start), width), np.uint8)
    step = max(1, CHUNK // width)           # positions of CHUNK bytes at a time, not of all
    for i in range(0, len(start), step):    # (8 bytes per byte of the column: one long cell)
        s, n = start[i:i + step, None], length[i:i + step, None]
        chars = body[np.minimum(s + at, body.size - 1)]
        chars[at >= n] = 0
        out[i:i + step] = chars
    return out.view(f"S{width}").ravel()


def decimals(chars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of an (n, w) uint8 matrix of ASCII cells, each padded on the right with NULs (a
    numpy bytes array's view): whether each is 1-18 decimal digits (an int64 holds 18), and the
    number it writes (0 where not). Digit by digit over the whole matrix: no Python per cell."""
    pad = chars == 0
    digit = (chars >= 48) & (chars <= 57)
    length = np.count_nonzero(~pad, axis=1)
    ok = (length > 0) & (length <= 18) & (digit | pad).all(axis=1) \
        & (pad[:, :-1] <= pad[:, 1:]).all(axis=1)             # no NUL inside a cell
    value = np.zeros(len(chars), np.int64)
    for j in range(chars.shape[1]):
        value = np.where(ok & digit[:, j], value * 10 + (chars[:, j] - 48), value)
    return ok, value


def _indices(head: list[str], names: list[str]) -> dict[str, int]:
    return {k: head.index(k) for k in names if k in head}


def _read_slow(path: str, names: list[str], whole: tuple[str, ...]
               ) -> tuple[list[str], dict[str, np.ndarray]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        head = next(reader, [])
        idx = _indices(head, names)
        if not idx:
            return head, {}
        need = max((head.index(k) for k in whole if k in head), default=-1) + 1
        width = max(idx.values()) + 1
        rows = [r if len(r) >= width else r + [""] * (width - len(r))
                for r in reader if len(r) >= need]
    return head, {k: _bytes([r[i] for r in rows]) for k, i in idx.items()}


def _bytes(cells: list[str]) -> np.ndarray:
    return np.array([c.encode("utf-8") for c in cells], dtype="S") if cells else \
        np.zeros(0, "S1")
