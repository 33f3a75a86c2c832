"""Client availability, crashes and outage windows, all drawn from the scenario seed.

- availability bernoulli(p): each cloud round, each client is available with probability p
  (keyed by round: the same for every algorithm); unavailable clients are not selected.
- availability markov(mean_on_s, mean_off_s): each client alternates exponential on/off periods
  in simulated time (its own generator; starts in the stationary distribution); it is selectable
  only while on, and drops out if it is off when it would upload.
- availability trace: measured intervals (client,start_s,end_s); a client is available while
  start_s <= t < end_s of one of its intervals; like markov, it is selectable only while
  available, and drops out if it is unavailable when it would upload.
- crash_p: a selected client crashes with this probability at a uniform point of its compute
  (drawn before it trains: the state it would have changed stays as it was).
- outages: windows in which a node, or a link (both directions), is down; a message whose
  transfer overlaps a window is lost."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import seeding

MARKOV_KEEP = 256       # switch times kept per client (older ones are replayed if asked for)


@dataclass
class Failures:
    seed: int = 0
    kind: str = "always"
    p: float = 1.0
    mean_on: float = 1.0
    mean_off: float = 1.0
    crash_p: float = 0.0
    node_down: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    link_down: dict[frozenset, list[tuple[float, float]]] = field(default_factory=dict)
    _switch: dict[int, list[float]] = field(default_factory=dict)   # markov switch times
    _start_on: dict[int, bool] = field(default_factory=dict)
    _gen: dict[int, np.random.Generator] = field(default_factory=dict)
    _dropped: dict[int, int] = field(default_factory=dict)      # switches no longer kept
    intervals: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # trace
    n_clients: int = 0          # set by the engine (next_change of markov availability)

    @classmethod
    def none(cls) -> "Failures":
        return cls()

    @classmethod
    def from_spec(cls, spec, seed: int,
                  intervals: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
                  ) -> "Failures":
        """`intervals`: availability trace (kind trace), read and checked by the caller."""
        f = cls(seed=seed, kind=spec.availability.kind, p=spec.availability.p,
                mean_on=spec.availability.mean_on_s, mean_off=spec.availability.mean_off_s,
                crash_p=spec.failures.crash_p, intervals=dict(intervals or {}))
        for w in spec.failures.outages:
            if w.node is not None:
                f.node_down.setdefault(w.node, []).append((w.start_s, w.end_s))
            else:
                f.link_down.setdefault(frozenset(w.link), []).append((w.start_s, w.end_s))
        return f

    @property
    def active(self) -> bool:
        return self.kind != "always" or self.crash_p > 0 or bool(self.node_down or self.link_down)

    # ------------------------------------------------------------------ availability
    def available(self, t: int, now: float, n: int) -> np.ndarray | None:
        if self.kind == "always":
            return None
        if self.kind == "bernoulli":
            return seeding.rng(self.seed, "availability", t).random(n) < self.p
        if self.kind == "trace":
            up = np.zeros(n, dtype=bool)
            for k in self.intervals:
                up[k] = self._in_trace(k, now)
            return up
        return np.array([self.client_up(k, now) for k in range(n)])

    def next_change(self, now: float) -> float | None:
        """The first time after `now` at which a client may become available (markov, trace),
        or None when none will (or availability does not change in time)."""
        if self.kind == "trace":
            nxt = [iv[0][i] for iv in self.intervals.values()
                   for i in [int(np.searchsorted(iv[0], now, side="right"))] if i < len(iv[0])]
            return float(min(nxt)) if nxt else None
        if self.kind != "markov" or self.n_clients == 0:
            return None
        best = None
        for k in range(self.n_clients):
            self.client_up(k, now)             # extends k's switches beyond now
            sw = self._switch[k]
            later = sw[int(np.searchsorted(sw, now, side="right"))]
            best = later if best is None or later < best else best
        return best

    def _in_trace(self, k: int, now: float) -> bool:
        iv = self.intervals.get(k)
        if iv is None:
            return False
        i = int(np.searchsorted(iv[0], now, side="right")) - 1
        return i >= 0 and now < iv[1][i]

    def client_up(self, k: int, now: float) -> bool:
        if self.kind == "trace":
            return self._in_trace(k, now)
        if self.kind != "markov":
            return True
        sw = self._switch.get(k)
        if sw is None or (now < sw[0] and self._dropped.get(k, 0)):
            sw = self._restart(k)   # asked about a time before the kept window: replay
        g = self._gen[k]
        while sw[-1] <= now:
            on_now = self._start_on[k] ^ ((self._dropped.get(k, 0) + len(sw) - 1) % 2 == 1)
            sw.append(sw[-1] + g.exponential(self.mean_on if on_now else self.mean_off))
            if len(sw) > MARKOV_KEEP:       # bounded memory: keep only the recent switches
                cut = len(sw) - MARKOV_KEEP // 2
                self._dropped[k] = self._dropped.get(k, 0) + cut
                del sw[:cut]
        periods = self._dropped.get(k, 0) + int(np.searchsorted(sw, now, side="right")) - 1
        return self._start_on[k] ^ (periods % 2 == 1)

    def _restart(self, k: int) -> list[float]:
        """Client k's on/off process from time 0 (the same draws every time)."""
        g = seeding.rng(self.seed, "markov", k)
        self._gen[k] = g
        self._start_on[k] = bool(g.random() < self.mean_on / (self.mean_on + self.mean_off))
        self._dropped[k] = 0
        sw = self._switch[k] = [0.0]
        return sw

    def crash_fraction(self, t: int, r: int, k: int) -> float | None:
        """The fraction of its compute after which client k crashes in round (t, r), or None
        (a draw of its own: known before the client trains)."""
        if self.crash_p <= 0:
            return None
        g = seeding.rng(self.seed, "crash", t, r, k)
        return float(g.random()) if g.random() < self.crash_p else None

    def crashes(self, t: int, r: int, sel: np.ndarray) -> np.ndarray | None:
        """crash_fraction of every client of `sel` (nan: it does not crash); None without
        crashes."""
        if self.crash_p <= 0:
            return None
        out = [self.crash_fraction(t, r, int(k)) for k in sel.tolist()]
        return np.array([math.nan if f is None else f for f in out])

    # ------------------------------------------------------------------ outages
    def next_recovery(self, now: float) -> float | None:
        """The first time after `now` at which things may go better: an outage ends or a
        client may become available (next_change); None when nothing will change."""
        ends = [e for ws in (*self.node_down.values(), *self.link_down.values())
                for _, e in ws if e > now]
        nxt = self.next_change(now)
        if nxt is not None:
            ends.append(nxt)
        return min(ends) if ends else None

    def _overlap(self, windows: list[tuple[float, float]], a: float, b: float) -> bool:
        return any(s <= b and a <= e for s, e in windows)

    def lost(self, src: str, dst: str, t0: float, t1: float) -> bool:
        """True if a transfer src -> dst during [t0, t1] meets an outage."""
        if not (self.node_down or self.link_down):
            return False
        for n in (src, dst):
            if n in self.node_down and self._overlap(self.node_down[n], t0, t1):
                return True
        w = self.link_down.get(frozenset((src, dst)))
        return bool(w) and self._overlap(w, t0, t1)
