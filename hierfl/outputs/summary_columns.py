"""summary.json's long lists (one entry per node or client: 10^5-10^6 at city scale) kept beside
it in binary, OUT/summary_columns.npz, so that a report does not parse them: a 237 MB
summary.json of 10^6 clients took ~4.5 s to read with its nine number columns, and ~1.5-3.5 s
more with only its seven name columns (10^6 Python strings each, and the memory they fault in).

summary.json is written as before, with the same bytes, and stays the record. The npz holds, for
each list of at least LONG plain ints, finite floats or strings, its key path, where its text
lies in summary.json, and its values: numbers as an int64 or float64 array (the same numbers);
strings as a table (bytes where all are ASCII) and codes into it, table[codes] being the list
(the topology's names and indices where a `StringColumn` gives them, else the distinct strings
in order of first appearance; no codes where the table is the list); and the SHA-256 of
summary.json's bytes. `read` uses it only for a summary.json of those bytes (an edited one, or
another run's, is read whole as JSON; a copied folder keeps the speed): it parses summary.json
with those lists' text left out and puts arrays in their place (strings as a numpy str array;
`as_list` gives json's list). The string columns are listed apart in the npz ("texts"), so a
reader that knows only the numbers (hierfl before them) parses the strings from the JSON as it
did."""
from __future__ import annotations

import hashlib
import itertools
import json
import operator
import os

import numpy as np

from ..string_column import StringColumn
from .files import atomic_npz
from .jsontext import Span

NAME = "summary_columns.npz"
LONG = 10_000          # shorter lists parse in milliseconds
WIDER = 4              # a string table may take this many times its list's text, no more
PARTS = ("topology", "data")   # the per-node and per-client columns (not the scenario's lists:
#                               they stay lists, as comparable() and the tables read them)


def as_list(column: object) -> object:
    """A summary column as json reads it: an array from `read` back as a list (10^6 numbers in
    ~20 ms), anything else as it is."""
    return column.tolist() if isinstance(column, np.ndarray) else column


def is_client(roles: object) -> np.ndarray:
    """role == "client" for each node, a C loop (10^6 nodes in ~30 ms); False for a role that
    is not a string (a hand-edited summary.json); a str array (`read`'s) compared at once."""
    if isinstance(roles, np.ndarray) and roles.dtype.kind == "U":
        return roles == "client"
    return np.fromiter(map(operator.eq, roles, itertools.repeat("client")), bool, len(roles))


def write(out: str, text: str, spans: list[Span]) -> str | None:
    """OUT/summary_columns.npz for the summary.json just written with `text` and these `spans`
    (dumps_indent1's); None, and an earlier npz removed, when there is none."""
    path = os.path.join(out, NAME)
    cols, texts, arrays = [], [], {}
    for keys, start, end, values in spans:
        if keys[0] not in PARTS:
            continue
        if type(values[0]) is str:
            coded = _codes(values, end - start)
            if coded is not None:
                table, codes = coded
                arrays[f"t{len(texts)}"] = table
                if codes is not None:
                    arrays[f"t{len(texts)}c"] = codes
                texts.append((list(keys), start, end))
            continue
        try:
            a = np.array(values, np.float64 if type(values[0]) is float else np.int64)
        except OverflowError:               # an int past int64: stays in the JSON only
            continue
        arrays[str(len(cols))] = a
        cols.append((list(keys), start, end))
    if not cols and not texts:
        if os.path.isfile(path):
            os.unlink(path)
        return None
    meta = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "paths": [c[0] for c in cols],
            "spans": [[c[1], c[2]] for c in cols], "texts": [list(t) for t in texts]}
    atomic_npz(path, {"meta": np.array(json.dumps(meta)), **arrays})
    return path


def _codes(values: list[str], text_bytes: int) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A table of strings and codes into it in the smallest unsigned type (None: the table is
    the column): `StringColumn`'s where the list says how it was made, else the distinct strings in
    order of first appearance (hashing each string once). None, the list staying in the JSON,
    where numpy could not give the strings back (a NUL: numpy's strings drop trailing ones) or
    where the table, as wide as its longest string in every row, would hold more than
    WIDER x the list's `text_bytes` in summary.json (one 20,000-character name among 10^4)."""
    table, codes = (values.table, values.codes) if isinstance(values, StringColumn) else \
        (list(dict.fromkeys(values)), None)
    joined = "".join(table)
    if "\x00" in joined:
        return None
    ascii_ = joined.isascii()
    width = max(map(len, table), default=0) * (1 if ascii_ else 4)
    if len(table) * width > WIDER * text_bytes + 4096:
        return None
    strings = np.array(table, dtype="S" if ascii_ else str)     # ASCII: a byte a character
    if len(table) == len(values) and codes is None:
        return strings, None
    if codes is None:
        at = {v: i for i, v in enumerate(table)}
        codes = np.fromiter(map(at.__getitem__, values), np.int64, len(values))
    return strings, np.asarray(codes).astype(np.min_scalar_type(max(len(table) - 1, 0)))


def read(out: str, json_path: str) -> dict | None:
    """The summary, its long lists as numpy arrays, when OUT/summary_columns.npz was written with
    summary.json as it is now; else None (read the JSON)."""
    path = os.path.join(out, NAME)
    if not os.path.isfile(path) or not os.path.isfile(json_path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            with open(json_path, "rb") as fh:
                text = fh.read()
            if hashlib.sha256(text).hexdigest() != meta["sha256"]:
                return None
            texts = meta.get("texts", [])
            places = [(s, e, ("n", i)) for i, (s, e) in enumerate(meta["spans"])] + \
                [(s, e, ("t", i)) for i, (_, s, e) in enumerate(texts)]
            pieces, at = [], 0
            for start, end, _ in sorted(places):
                if not (at <= start < end and text[start:start + 1] == b"["
                        and text[end - 1:end] == b"]"):
                    return None
                pieces += (text[at:start], b"null")
                at = end
            summary = json.loads(b"".join(pieces + [text[at:]]))
            for _, _, (kind, i) in places:
                keys = meta["paths"][i] if kind == "n" else texts[i][0]
                node = summary
                for k in keys[:-1]:
                    node = node[k]
                if node.get(keys[-1], 0) is not None:
                    return None
                if kind == "n":
                    node[keys[-1]] = z[str(i)]
                else:
                    node[keys[-1]] = _strings(z, i)
    except Exception:  # noqa: BLE001 - damaged or of another layout: the JSON is the record
        return None
    return summary


def _strings(z, i: int) -> np.ndarray:
    """Text column i: its table, indexed by its codes where it has them; ValueError where the
    arrays are not what `write` writes (a 1-D table of strings, 1-D unsigned codes into it)."""
    table = z[f"t{i}"]
    if table.ndim != 1 or table.dtype.kind not in "SU":
        raise ValueError("not a table of strings")
    table = _text(table)
    if f"t{i}c" not in z.files:
        return table
    codes = z[f"t{i}c"]
    if codes.ndim != 1 or codes.dtype.kind != "u" or (len(codes) and
                                                      int(codes.max()) >= len(table)):
        raise ValueError("codes outside the table")
    return table[codes]


def _text(table: np.ndarray) -> np.ndarray:
    """A str array of the table (ASCII bytes widened to code points at once: numpy's own
    conversion took ~0.17 s for 10^6 names)."""
    if table.dtype.kind != "S":
        return table
    width = table.dtype.itemsize
    points = np.zeros((len(table), width), np.uint32)      # (native order, as numpy's str)
    points[:] = table.view(np.uint8).reshape(len(table), width)
    return points.view(f"U{width}").reshape(len(table))
