"""Reading trace.csv (written by the engine's Trace, columns TRACE_COLUMNS): the events of one
cloud round, streamed."""
from __future__ import annotations

import csv

Event = tuple[float, str, str, str, float]     # time_s, node, kind, peer, value


def read_round(path: str, round_: int) -> list[Event]:
    """Events from the cloud's round_start of `round_` to its round_end (file order), streamed:
    the file is read only up to that round's end."""
    out: list[Event] = []
    inside = False
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            ev = (float(row["time_s"]), row["node"], row["kind"], row["peer"] or "",
                  float(row["value"] or 0))
            if ev[2] == "round_start" and int(ev[4]) == round_:
                inside = True
            if inside:
                out.append(ev)
                if ev[2] == "round_end" and int(ev[4]) == round_:
                    break
    return out
