"""Reading trace.csv (written by the engine's Trace, columns TRACE_COLUMNS): the events of one
cloud round, streamed, as tuples (`read_round`) or as columns (`read_round_columns`: a W9 round
holds ~10^5 events, and a tuple of Python floats per event was most of its reading)."""
from __future__ import annotations

import csv
from itertools import islice
from operator import itemgetter
from typing import NamedTuple

import numpy as np

Event = tuple[float, str, str, str, float]     # time_s, node, kind, peer, value
NAMES = ("time_s", "node", "kind", "peer", "value")
CHUNK = 1024           # rows parsed at a time (larger chunks were slower here: more young lists)


class RoundColumns(NamedTuple):
    """One round's events by column, in file order (`read_round`'s tuples, transposed)."""
    time: np.ndarray        # float64
    node: list
    kind: list
    peer: list              # "" where empty
    value: np.ndarray       # float64; 0 where empty

    @classmethod
    def of(cls, events: list[Event]) -> "RoundColumns":
        if not events:
            return cls(np.zeros(0), [], [], [], np.zeros(0))
        t, node, kind, peer, value = map(list, zip(*events))
        return cls(np.array(t, np.float64), node, kind, peer, np.array(value, np.float64))

    def events(self) -> list[Event]:
        return list(zip(self.time.tolist(), self.node, self.kind, self.peer,
                        self.value.tolist()))


def read_round(path: str, round_: int) -> list[Event]:
    """Events from the cloud's round_start of `round_` to its round_end (file order), streamed:
    the file is read only up to that round's end. Read as `csv.DictReader` reads (blank lines
    skipped, a repeated column name's last cell, None for a short row's missing cells), by
    position."""
    out: list[Event] = []
    inside = False
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, None)
        if head is None:
            return out
        last = {k: i for i, k in enumerate(head)}
        at = [last.get(k) for k in NAMES]
        width = len(head)
        for row in reader:
            if not row:
                continue
            if None in at:          # what DictReader's row[name] does for a missing column
                raise KeyError(NAMES[at.index(None)])
            if len(row) < width:
                row = row + [None] * (width - len(row))
            ev = (float(row[at[0]]), row[at[1]], row[at[2]], row[at[3]] or "",
                  float(row[at[4]] or 0))
            if ev[2] == "round_start" and int(ev[4]) == round_:
                inside = True
            if inside:
                out.append(ev)
                if ev[2] == "round_end" and int(ev[4]) == round_:
                    break
    return out


def read_round_columns(path: str, round_: int) -> RoundColumns:
    """`read_round`'s events as columns: rows parsed CHUNK at a time by csv's C reader and
    transposed, numbers converted a column at a time. The same events, and the same error
    where read_round raises one: a chunk that does not parse, or whose numbers do not all
    convert, is read again by read_round itself (its first bad row, not this chunk's, is the
    error; rows after the round's end are never read there)."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, None)
        if head is None:
            return RoundColumns.of([])
        last = {k: i for i, k in enumerate(head)}
        at = [last.get(k) for k in NAMES]
        width = len(head)
        cols: tuple[list, ...] = ([], [], [], [], [])
        inside, done = False, False
        while not done:
            try:
                raw = list(islice(reader, CHUNK))
            except (csv.Error, UnicodeDecodeError):   # maybe past the round's end: read_round
                return RoundColumns.of(read_round(path, round_))    # stops there, or raises
            if not raw:
                break
            rows = [r for r in raw if r]
            if not rows:
                continue
            if None in at:
                raise KeyError(NAMES[at.index(None)])
            if min(map(len, rows)) < width:
                rows = [r if len(r) >= width else r + [None] * (width - len(r)) for r in rows]
            t, node, kind, peer, value = (list(map(itemgetter(j), rows)) for j in at)
            try:
                t = list(map(float, t))
                value = [float(v) if v else 0.0 for v in value]
            except (TypeError, ValueError):
                return RoundColumns.of(read_round(path, round_))
            lo, hi = (0 if inside else None), len(rows)
            for i in [i for i, k in enumerate(kind) if k == "round_start" or k == "round_end"]:
                if kind[i] == "round_start":
                    if int(value[i]) == round_ and not inside:
                        inside, lo = True, i
                elif inside and int(value[i]) == round_:
                    hi, done = i + 1, True
                    break
            if inside:
                for col, part in zip(cols, (t, node, kind, peer, value)):
                    col.extend(part[lo:hi])
    return RoundColumns(np.array(cols[0], np.float64), cols[1], cols[2],
                        [p or "" for p in cols[3]], np.array(cols[4], np.float64))
