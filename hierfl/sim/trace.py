"""The event trace: every simulated event as (time, node, kind, peer, value)."""
from __future__ import annotations

import csv
import hashlib
import io
import operator
from typing import IO

Event = tuple[float, str, str, str, float]


class Trace:
    """Append-only list of events; `flush_to` appends new events to an open CSV file.

    keep=False drops events from memory once written (memory then no longer grows with the
    simulated events; `fingerprint` needs keep=True)."""

    HEADER = ("time_s", "node", "kind", "peer", "value")

    def __init__(self, keep: bool = True):
        self.events: list[Event] = []
        self.record = self.events.append      # the hot paths' add: one event tuple, no frame
        self.keep = keep
        self._flushed = 0
        self._written = 0                      # events dropped from memory once written
        self._names: dict[str, str] = {}       # node, kind or peer -> its text in the file
        self._plain = True                     # every name so far is its own text (unquoted)

    @property
    def count(self) -> int:
        """Events recorded in all (those written and dropped from memory too)."""
        return self._written + len(self.events)

    @count.setter
    def count(self, n: int) -> None:          # a resumed run: the events before the checkpoint
        self._written = n - len(self.events)

    def add(self, time: float, node: str, kind: str, peer: str = "", value: float = 0) -> None:
        self.events.append((time, node, kind, peer, value))

    def extend(self, events: list[Event]) -> None:
        self.events.extend(events)

    def flush_to(self, fh: IO[str]) -> None:
        """Append the events not written yet, as csv.writer writes them (one write call). The
        loops run in C (map, zip, join): times by repr, values and fields (quoted as csv.writer
        quotes them) through maps of their few distinct texts."""
        events = self.events if not self._flushed else self.events[self._flushed:]
        names = self._names
        fields = [list(map(get, events)) for get in _FIELDS]   # node, kind, peer, value
        for column in fields[:3]:
            new = set(column).difference(names)
            if new:
                names.update({s: _quoted(s) for s in new})
                self._plain = self._plain and all(names[s] is s for s in new)
            if not self._plain:
                column[:] = map(names.__getitem__, column)
        values = fields[3]
        texts = {v: _num(v) for v in set(values)}
        times = _time_texts(list(map(float, map(_TIME, events))))
        rows = zip(times, *fields[:3], map(texts.__getitem__, values))
        if events:
            fh.write("\r\n".join(map(",".join, rows)) + "\r\n")
        fh.flush()
        if self.keep:
            self._flushed = len(self.events)
        else:
            self._written += len(self.events)
            self.events.clear()               # in place: `record` appends to this list
        if len(names) > 500_000:
            names.clear()
            self._plain = True

    def fingerprint(self) -> str:
        """A hash of the event sequence (OMNeT++-style regression fingerprint)."""
        buf = io.StringIO()
        for e in self.events:
            buf.write(f"{e[0]:.9f},{e[1]},{e[2]},{e[3]},{_num(e[4])}\n")
        return hashlib.sha256(buf.getvalue().encode()).hexdigest()[:16]


_TIME = operator.itemgetter(0)
_FIELDS = tuple(map(operator.itemgetter, (1, 2, 3, 4)))
_SPECIAL = frozenset(',"\r\n')          # characters csv.writer would quote


def _quoted(name) -> str:
    """One field as csv.writer writes it (the same object: a str that needs no quotes)."""
    s = str(name)
    if _SPECIAL.isdisjoint(s):
        return s
    buf = io.StringIO()
    csv.writer(buf).writerow((s, ""))
    return buf.getvalue()[:-3]          # less the "," and "\r\n" of the empty field after it


def _time_texts(times: list[float]) -> list[str]:
    """repr of each time, each distinct time formatted once (a float's repr is ~1 us; about
    half of a trace's events share their time with another). 0.0 == -0.0: where a zero is
    among them, each one is formatted for itself."""
    distinct = list(set(times))
    texts = dict(zip(distinct, map(repr, distinct)))
    if 0.0 in texts:
        return [repr(t) if t == 0.0 else texts[t] for t in times]
    return list(map(texts.__getitem__, times))


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
