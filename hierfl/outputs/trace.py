"""Reading trace.csv (written by the engine's Trace, columns TRACE_COLUMNS): the events of one
cloud round, streamed."""
from __future__ import annotations

import csv

Event = tuple[float, str, str, str, float]     # time_s, node, kind, peer, value
NAMES = ("time_s", "node", "kind", "peer", "value")


def read_round(path: str, round_: int) -> list[Event]:
    """Events from the cloud's round_start of `round_` to its round_end (file order), streamed:
    the file is read only up to that round's end. Read as `csv.DictReader` reads (blank lines
    skipped, a repeated column name's last cell, None for a short row's missing cells), by
    position: a W9 round holds ~10^5 events."""
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
