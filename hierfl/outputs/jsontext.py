"""`json.dumps(obj, indent=1, sort_keys=True)`, the same text, faster for long lists of one
scalar type (summary.json's per-node columns: 10^6 entries each at city scale).

With an indent, the json module encodes in Python, one call chain per item (14 CPU s for W9's
summary.json on this machine). A list of plain floats or ints is written by json's C encoder (no
indent) with its ", " turned into the newline and indent json puts between items, a list of
plain strings by json's string encoder item by item; anything else (bools, None, nested lists, numpy
scalars, non-finite floats, short lists, dicts with keys that are not strings) is handed to
`json.dumps` itself and re-indented to its depth (a JSON text has no raw newline inside a
string, so every newline is a line break)."""
from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string

LONG = 64          # shorter lists: json.dumps (nothing to gain)


Span = tuple[tuple[str, ...], int, int, list]    # (key path, start, end, the list)


def dumps_indent1(obj: object, spans: list[Span] | None = None, longest: int = 0) -> str:
    """json.dumps(obj, indent=1, sort_keys=True). With `spans`, each list of at least `longest`
    plain strs, ints or finite floats (one type) reached through string keys is recorded in it:
    its key path, where its text starts and ends (the text is ASCII: characters are bytes) and
    the list."""
    parts: list[str] = []
    _write(obj, 0, parts, () if spans is not None else None, spans, max(longest, LONG + 1))
    return "".join(parts)      # one copy of the text (a 200 MB one at W9)


def _write(obj: object, level: int, out: list[str], path: tuple[str, ...] | None = None,
           spans: list[Span] | None = None, longest: int = LONG + 1) -> None:
    """Append the text of obj at nesting depth `level` to `out` (`path`: its keys, while
    spans are recorded)."""
    pad = " " * (level + 1)
    if type(obj) is dict and obj and all(type(k) is str for k in obj):
        out.append("{")
        for i, (k, v) in enumerate(sorted(obj.items())):
            out.append(("," if i else "") + "\n" + pad + _string(k) + ": ")
            _write(v, level + 1, out, None if path is None else path + (k,), spans, longest)
        out.append("\n" + " " * level + "}")
        return
    if isinstance(obj, list) and len(obj) > LONG:          # (a list subclass: StringColumn)
        text = _scalars(obj, ",\n" + pad)
        if text is not None:
            tail = "\n" + " " * level + "]"
            if path is not None and len(obj) >= longest:
                start = sum(map(len, out))
                spans.append((path, start, start + 2 + len(pad) + len(text) + len(tail), obj))
            out += ("[\n", pad, text, tail)
            return
    out.append(json.dumps(obj, indent=1, sort_keys=True).replace("\n", "\n" + " " * level))


def _scalars(items: list, sep: str) -> str | None:
    """The items as json writes them, joined by `sep`, when all are plain str, int or finite
    float (one type); else None."""
    kinds = set(map(type, items))
    if kinds == {str}:
        return sep.join(map(_string, items))
    if kinds == {int} or kinds == {float}:      # json's C encoder, then json's indent
        text = json.dumps(items)[1:-1]          # (a number holds no ", ")
        return None if "N" in text or "I" in text else text.replace(", ", sep)
    return None                                 # (NaN, Infinity: json.dumps itself)
