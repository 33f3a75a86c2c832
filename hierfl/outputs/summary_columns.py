"""summary.json's long lists of numbers (one entry per node or client: 10^5-10^6 at city scale)
kept beside it in binary, OUT/summary_columns.npz, so that a report does not parse them: a
237 MB summary.json of 10^6 clients takes ~4.5 s to read, nearly all of it its nine number
columns.

summary.json is written as before, with the same bytes, and stays the record. The npz holds, for
each list of at least LONG plain ints or finite floats, its key path, where its text lies in
summary.json, and its values as an int64 or float64 array (the same numbers), and the SHA-256
of summary.json's bytes. `read` uses it only for a summary.json of those bytes (an edited one,
or another run's, is read whole as JSON; a copied folder keeps the speed): it parses summary.json
with those lists' text left out and puts the arrays in their place."""
from __future__ import annotations

import hashlib
import itertools
import json
import operator
import os

import numpy as np

from .files import atomic_npz
from .jsontext import Span

NAME = "summary_columns.npz"
LONG = 10_000          # shorter lists parse in milliseconds
PARTS = ("topology", "data")   # the per-node and per-client columns (not the scenario's lists:
#                               they stay lists, as comparable() and the tables read them)


def as_list(column: object) -> object:
    """A summary column as json reads it: an array from `read` back as a list (10^6 numbers in
    ~20 ms), anything else as it is."""
    return column.tolist() if isinstance(column, np.ndarray) else column


def is_client(roles: object) -> np.ndarray:
    """role == "client" for each node, a C loop (10^6 nodes in ~30 ms); False for a role that
    is not a string (a hand-edited summary.json)."""
    return np.fromiter(map(operator.eq, roles, itertools.repeat("client")), bool, len(roles))


def write(out: str, text: str, spans: list[Span]) -> str | None:
    """OUT/summary_columns.npz for the summary.json just written with `text` and these `spans`
    (dumps_indent1's); None, and an earlier npz removed, when there is none."""
    path = os.path.join(out, NAME)
    cols = []
    for keys, start, end, values in spans:
        if keys[0] not in PARTS:
            continue
        try:
            a = np.array(values, np.float64 if type(values[0]) is float else np.int64)
        except OverflowError:               # an int past int64: stays in the JSON only
            continue
        cols.append((list(keys), start, end, a))
    if not cols:
        if os.path.isfile(path):
            os.unlink(path)
        return None
    meta = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "paths": [c[0] for c in cols],
            "spans": [[c[1], c[2]] for c in cols]}
    atomic_npz(path, {"meta": np.array(json.dumps(meta)),
                      **{str(i): c[3] for i, c in enumerate(cols)}})
    return path


def read(out: str, json_path: str) -> dict | None:
    """The summary, its long number lists as numpy arrays, when OUT/summary_columns.npz was
    written with summary.json as it is now; else None (read the JSON)."""
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
            pieces, at = [], 0
            for start, end in meta["spans"]:
                if not (at <= start < end and text[start:start + 1] == b"["
                        and text[end - 1:end] == b"]"):
                    return None
                pieces += (text[at:start], b"null")
                at = end
            summary = json.loads(b"".join(pieces + [text[at:]]))
            for i, keys in enumerate(meta["paths"]):
                node = summary
                for k in keys[:-1]:
                    node = node[k]
                if node.get(keys[-1], 0) is not None:
                    return None
                node[keys[-1]] = z[str(i)]
    except Exception:  # noqa: BLE001 - damaged or of another layout: the JSON is the record
        return None
    return summary
