"""Links and the byte ledger.

FIFO (default): a transfer over a link takes bytes / bandwidth of transmission, during which the
link is busy (concurrent transfers queue), then `latency` of propagation, during which the link is
already free for the next transfer (a pipe, as in ns-3's point-to-point channel).
Fair: processor sharing — the n transfers in transmission each get bandwidth / n."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy
from simpy.events import Timeout

from .tasks import after
from .trace import Trace

if TYPE_CHECKING:
    from .failures import Failures

TIERS = ("client_edge", "edge_cloud")


def _legacy_levels() -> dict[str, str]:
    return {t: t for t in TIERS}


@dataclass
class Ledger:
    """Cumulative bytes by direction, per link level and per legacy tier; wasted = sent but not
    used by an aggregator.

    A level is one adjacent pair of tiers, named `<lower>_<upper>` after the tiers (bottom up:
    client_edge, edge_regional, regional_cloud; `Topology.levels`). `levels` maps each level to
    its legacy tier: client_edge for the clients' links, edge_cloud for every link above them
    (the two-column sums metrics.csv has always had). A link adds to its level and its tier."""

    up: dict[str, float] = field(default_factory=lambda: {t: 0.0 for t in TIERS})
    down: dict[str, float] = field(default_factory=lambda: {t: 0.0 for t in TIERS})
    wasted: float = 0.0
    levels: dict[str, str] = field(default_factory=_legacy_levels)   # level -> legacy tier
    level_up: dict[str, float] = field(default_factory=dict)
    level_down: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for lv in self.levels:
            self.level_up.setdefault(lv, 0.0)
            self.level_down.setdefault(lv, 0.0)

    @classmethod
    def for_levels(cls, levels: dict[str, str]) -> "Ledger":
        """A ledger of the given levels (bottom up), each mapped to its legacy tier."""
        return cls(levels=dict(levels))

    def add(self, level: str, direction: str, nbytes: float) -> None:
        tier = self.levels.get(level)
        if tier is None:          # a level not declared up front: its own legacy tier
            tier = self.levels[level] = level if level in TIERS else "edge_cloud"
            self.level_up[level] = self.level_down[level] = 0.0
        if direction == "up":
            self.up[tier] += nbytes
            self.level_up[level] += nbytes
        else:
            self.down[tier] += nbytes
            self.level_down[level] += nbytes

    @property
    def bytes_up(self) -> float:
        return sum(self.up.values())

    @property
    def bytes_down(self) -> float:
        return sum(self.down.values())

    def tier(self, t: str) -> float:
        return self.up[t] + self.down[t]

    def level_row(self) -> dict[str, float]:
        """metrics.csv's per-level columns: bytes_up_<level>, bytes_down_<level>."""
        out = {}
        for lv in self.levels:
            out[f"bytes_up_{lv}"] = self.level_up[lv]
            out[f"bytes_down_{lv}"] = self.level_down[lv]
        return out

    def as_list(self) -> list[float]:
        """Legacy up, legacy down, wasted, then every level's up and down (level order)."""
        return [*self.up.values(), *self.down.values(), self.wasted,
                *self.level_up.values(), *self.level_down.values()]

    @classmethod
    def from_list(cls, v: list[float]) -> "Ledger":
        n = len(TIERS)
        return cls(dict(zip(TIERS, v[:n])), dict(zip(TIERS, v[n:2 * n])), v[2 * n])

    def restore(self, v: list[float]) -> None:
        """Load `as_list` values of a ledger with the same levels (a checkpoint); a list from
        before levels were counted restores the legacy tiers only."""
        n, m = len(TIERS), len(self.levels)
        self.up.update(zip(TIERS, v[:n]))
        self.down.update(zip(TIERS, v[n:2 * n]))
        self.wasted = v[2 * n]
        rest = v[2 * n + 1:]
        if len(rest) == 2 * m:
            self.level_up.update(zip(self.levels, rest[:m]))
            self.level_down.update(zip(self.levels, rest[m:]))


class Link:
    """One direction of a physical link between two nodes (FIFO)."""

    __slots__ = ("env", "src", "dst", "latency", "bandwidth", "tier", "direction", "trace",
                 "ledger", "failures", "busy_until")

    def __init__(self, env: simpy.Environment, src: str, dst: str, latency_s: float,
                 bandwidth_Bps: float, tier: str, direction: str, trace: Trace, ledger: Ledger,
                 failures: "Failures | None" = None):
        self.env, self.src, self.dst = env, src, dst
        self.latency, self.bandwidth = latency_s, bandwidth_Bps
        self.tier, self.direction = tier, direction
        self.trace, self.ledger = trace, ledger
        # outages are fixed with the scenario: a link asks about them only where there are any
        self.failures = failures if failures is not None and (
            failures.node_down or failures.link_down) else None
        self.busy_until = 0.0     # FIFO: the wire is reserved in request order

    def _reserve(self, nbytes: float) -> tuple[float, float]:
        """FIFO: reserve the wire from when it is free; (transmission start, its seconds)."""
        now = self.env._now
        start = now if self.busy_until <= now else self.busy_until
        tx = nbytes / self.bandwidth
        self.busy_until = start + tx
        return start, tx

    def _sent(self, nbytes: float) -> None:
        """The transmission starts now: trace and ledger."""
        self.trace.add(self.env._now, self.src, "send", self.dst, nbytes)
        self.ledger.add(self.tier, self.direction, nbytes)

    def _transmit(self, nbytes: float):
        """Generator: queue and start the transmission; (its start, its seconds left)."""
        start, tx = self._reserve(nbytes)
        if start > self.env._now:
            yield Timeout(self.env, start - self.env._now)
        self._sent(nbytes)
        return start, tx

    def send(self, nbytes: float):
        """Generator: queue, transmit, propagate. Returns the arrival time, or None if the
        message met an outage (it is counted as sent and as wasted). The hot path of every
        message: `_transmit`, `_reserve`, `_sent` and `_delivered` written inline (the same
        operations: `_transmit` is what mobility's handovers and fair sharing use)."""
        env = self.env
        now = env._now
        start = now if self.busy_until <= now else self.busy_until
        tx = nbytes / self.bandwidth
        self.busy_until = start + tx
        if start > now:                                 # queued until the wire is free
            yield after(env, start - now)
        self.trace.record((env._now, self.src, "send", self.dst, nbytes))
        self.ledger.add(self.tier, self.direction, nbytes)
        yield after(env, tx + self.latency)             # transmission + propagation
        if self.failures is not None:
            return self._delivered(nbytes, start)
        now = env._now
        self.trace.record((now, self.dst, "recv", self.src, nbytes))
        return now

    def _delivered(self, nbytes: float, start: float) -> float | None:
        """The message arrives now, or met an outage that began after its `start`."""
        now = self.env._now
        if self.failures is not None and self.failures.lost(self.src, self.dst, start, now):
            self.trace.add(now, self.dst, "lost", self.src, nbytes)
            self.ledger.wasted += nbytes
            return None
        self.trace.add(now, self.dst, "recv", self.src, nbytes)
        return now


class FairLink(Link):
    """Processor sharing: every transfer in transmission gets bandwidth / (number of them)."""

    __slots__ = ("active", "changed", "last", "_next")

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.active: dict[int, float] = {}      # transfer id -> bytes left
        self.changed = self.env.event()
        self.last = 0.0
        self._next = 0

    def send(self, nbytes: float):
        """Generator: transmit while sharing the wire, then propagate."""
        start, rest = yield from self._transmit(nbytes)
        yield self.env.timeout(rest + self.latency)
        return self._delivered(nbytes, start)

    def _advance(self) -> None:
        """Charge the time since the last change to every active transfer."""
        now = self.env.now
        if self.active:
            rate = self.bandwidth / len(self.active)
            for tid in self.active:
                self.active[tid] -= rate * (now - self.last)
        self.last = now

    def _notify(self) -> None:
        old, self.changed = self.changed, self.env.event()
        old.succeed()

    def _transmit(self, nbytes: float):
        self._advance()
        tid = self._next
        self._next += 1
        self.active[tid] = float(nbytes)
        start = self.env.now
        self.trace.add(start, self.src, "send", self.dst, nbytes)
        self.ledger.add(self.tier, self.direction, nbytes)
        self._notify()
        while True:
            left = self.active[tid]
            rate = self.bandwidth / len(self.active)
            if left <= 1e-9 * max(nbytes, 1.0):
                break
            done = self.env.timeout(left / rate)
            fired = yield done | self.changed
            self._advance()
            if done in fired:
                self.active[tid] = 0.0
                break
        del self.active[tid]
        self._notify()
        return start, 0.0


class Links(dict):
    """(src, dst) -> its Link, each made when first asked for (a million clients' links are not
    all made up front; a link's state starts idle, whenever it is made). Read from the tree's
    arrays directly, as `Topology.link` reads them; the level is looked up once per upper end
    (all its children are at one depth)."""

    def __init__(self, sim, link_cls: type):
        super().__init__()
        self.sim, self.link_cls = sim, link_cls
        self._level: dict[str, str] = {}      # upper end -> the level of its children's links
        self._rows = self._parent = None      # the topology's maps (name -> row, parent)

    def __missing__(self, key: tuple[str, str]) -> Link:
        a, b = key
        sim, topo = self.sim, self.sim.topo
        t, rows, parent = topo.tree, self._rows, self._parent
        if rows is None:
            rows, parent = self._rows, self._parent = topo.row_of, topo.parent
        if parent.get(a) == b:
            r = rows[a]
            lat, bw, lower, upper, direction = t.lat_up[r], t.bw_up[r], a, b, "up"
        elif parent.get(b) == a:
            r = rows[b]
            lat, bw, lower, upper, direction = t.lat_down[r], t.bw_down[r], b, a, "down"
        else:
            raise KeyError(key)
        level = self._level.get(upper)
        if level is None:
            level = self._level[upper] = topo.level_of(lower)
        link = self[key] = self.link_cls(sim.env, a, b, float(lat), float(bw), level, direction,
                                         sim.trace, sim.ledger, sim.failures)
        return link

    def of_clients(self, node: str | None, ids: list[int]) -> None:
        """Make the links between clients `ids` and their parent `node` (None: each client's
        own parent, as for a whole round's selection), both directions, that are not made
        yet, all at once: the tree's arrays read once for them (what `__missing__` makes one
        at a time; `node` must be their parent in the tree, so not where clients move: with
        mobility they are made one at a time, as asked for)."""
        sim, topo, names = self.sim, self.sim.topo, self.sim.topo.clients
        if sim.mobility is not None:
            return
        parent = topo.parent
        ups = [node] * len(ids) if node is not None else [parent[names[k]] for k in ids]
        new = [(k, up) for k, up in zip(ids, ups)
               if (up, names[k]) not in self or (names[k], up) not in self]
        if not new:
            return
        t, rows = topo.tree, topo.client_rows[[k for k, _ in new]]
        levels = self._level
        make, env, trace, ledger, failures = \
            self.link_cls, sim.env, sim.trace, sim.ledger, sim.failures
        for (k, up), lat_up, bw_up, lat_down, bw_down in zip(
                new, *(a[rows].tolist() for a in (t.lat_up, t.bw_up, t.lat_down, t.bw_down))):
            name = names[k]
            level = levels.get(up)
            if level is None:                  # all of an upper end's children: one depth
                level = levels[up] = topo.level_of(name)
            if (up, name) not in self:
                self[up, name] = make(env, up, name, lat_down, bw_down, level, "down",
                                      trace, ledger, failures)
            if (name, up) not in self:
                self[name, up] = make(env, name, up, lat_up, bw_up, level, "up",
                                      trace, ledger, failures)
