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
        self._fields: dict[tuple[str, str, str], str] = {}   # (node, kind, peer) -> ",n,k,p,"
        self._nums: dict[float, str] = {}

    def add(self, time: float, node: str, kind: str, peer: str = "", value: float = 0) -> None:
        self.count += 1
        self.events.append((time, node, kind, peer, value))

    def extend(self, events: list[Event]) -> None:
        self.count += len(events)
        self.events.extend(events)

    def flush_to(self, fh: IO[str]) -> None:
        """Append the events not written yet, as csv.writer writes them (one write call)."""
        out: list[str] = []
        fields, nums = self._fields, self._nums
        last, text = None, ""
        for t, n, k, p, v in self.events[self._flushed:]:
            mid = fields.get((n, k, p))
            if mid is None:
                mid = fields[n, k, p] = _fields(n, k, p)
            num = nums.get(v)
            if num is None:
                num = nums[v] = _num(v)
            if t != last:                         # consecutive events often share a time
                last, text = t, repr(float(t))
            out.append(f"{text}{mid}{num}\r\n")
        fh.write("".join(out))
        fh.flush()
        if self.keep:
            self._flushed = len(self.events)
        else:
            self.events.clear()
        if len(fields) > 200_000:
            fields.clear()
        if len(nums) > 200_000:
            nums.clear()

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
