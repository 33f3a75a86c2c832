"""The event trace: every simulated event as (time, node, kind, peer, value)."""
from __future__ import annotations

import csv
import hashlib
import io
from typing import IO

Event = tuple[float, str, str, str, float]


class Trace:
    """Append-only list of events; `flush_to` appends new events to an open CSV file.

    keep=False drops events from memory once written (memory then no longer grows with the
    simulated events; `fingerprint` needs keep=True)."""

    HEADER = ("time_s", "node", "kind", "peer", "value")

    def __init__(self, keep: bool = True):
        self.events: list[Event] = []
        self.keep = keep
        self._flushed = 0
        self.count = 0
        self._tails: dict[tuple, str] = {}     # (node, kind, peer, value) -> ",n,k,p,v\r\n"

    def add(self, time: float, node: str, kind: str, peer: str = "", value: float = 0) -> None:
        self.count += 1
        self.events.append((time, node, kind, peer, value))

    def extend(self, events: list[Event]) -> None:
        self.count += len(events)
        self.events.extend(events)

    def flush_to(self, fh: IO[str]) -> None:
        """Append the events not written yet, as csv.writer writes them (one write call)."""
        out: list[str] = []
        tails = self._tails
        last, text = None, ""
        for t, n, k, p, v in self.events[self._flushed:]:
            tail = tails.get((n, k, p, v))      # everything after the time, cached
            if tail is None:
                tail = tails[n, k, p, v] = f"{_fields(n, k, p)}{_num(v)}\r\n"
            if t != last:                         # consecutive events often share a time
                last, text = t, repr(float(t))
            out.append(text + tail)
        fh.write("".join(out))
        fh.flush()
        if self.keep:
            self._flushed = len(self.events)
        else:
            self.events.clear()
        if len(tails) > 500_000:
            tails.clear()

    def fingerprint(self) -> str:
        """A hash of the event sequence (OMNeT++-style regression fingerprint)."""
        buf = io.StringIO()
        for e in self.events:
            buf.write(f"{e[0]:.9f},{e[1]},{e[2]},{e[3]},{_num(e[4])}\n")
        return hashlib.sha256(buf.getvalue().encode()).hexdigest()[:16]


_SPECIAL = frozenset(',"\r\n')          # characters csv.writer would quote


def _fields(n: str, k: str, p: str) -> str:
    """The CSV text between time and value, quoted as csv.writer would."""
    if _SPECIAL.isdisjoint(n + k + p):
        return f",{n},{k},{p},"
    buf = io.StringIO()
    csv.writer(buf).writerow(("", n, k, p, ""))
    return buf.getvalue()[:-2]


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
