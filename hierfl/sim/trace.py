"""The event trace: every simulated event as (time, node, kind, peer, value)."""
from __future__ import annotations

import csv
import hashlib
import io
from typing import IO

Event = tuple[float, str, str, str, float]


class Trace:
    """Append-only list of events; `flush_to` appends new events to an open CSV file."""

    HEADER = ("time_s", "node", "kind", "peer", "value")

    def __init__(self, keep: bool = True):
        self.events: list[Event] = []
        self.keep = keep
        self._flushed = 0
        self.count = 0

    def add(self, time: float, node: str, kind: str, peer: str = "", value: float = 0) -> None:
        self.count += 1
        if self.keep:
            self.events.append((time, node, kind, peer, value))

    def flush_to(self, fh: IO[str]) -> None:
        """Append the events not written yet, as csv.writer writes them (one write call)."""
        out: list[str] = []
        for t, n, k, p, v in self.events[self._flushed:]:
            if _SPECIAL.isdisjoint(n + k + p):
                out.append(f"{float(t)!r},{n},{k},{p},{_num(v)}\r\n")
                continue
            buf = io.StringIO()                   # a name that needs quoting: csv's rules
            w = csv.writer(buf)
            w.writerow((repr(float(t)), n, k, p, _num(v)))
            out.append(buf.getvalue())
        fh.write("".join(out))
        fh.flush()
        self._flushed = len(self.events)

    def fingerprint(self) -> str:
        """A hash of the event sequence (OMNeT++-style regression fingerprint)."""
        buf = io.StringIO()
        for e in self.events:
            buf.write(f"{e[0]:.9f},{e[1]},{e[2]},{e[3]},{_num(e[4])}\n")
        return hashlib.sha256(buf.getvalue().encode()).hexdigest()[:16]


_SPECIAL = frozenset(',"\r\n')          # characters csv.writer would quote


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
