"""Links and the byte ledger.

A transfer over a link takes bytes / bandwidth of transmission, during which the link is busy
(FIFO: concurrent transfers queue), then `latency` of propagation, during which the link is
already free for the next transfer (a pipe, as in ns-3's point-to-point channel)."""
from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from .trace import Trace

TIERS = ("client_edge", "edge_cloud")


@dataclass
class Ledger:
    """Cumulative bytes by direction and tier; wasted = sent but not used by an aggregator."""

    up: dict[str, float] = field(default_factory=lambda: {t: 0.0 for t in TIERS})
    down: dict[str, float] = field(default_factory=lambda: {t: 0.0 for t in TIERS})
    wasted: float = 0.0

    def add(self, tier: str, direction: str, nbytes: float) -> None:
        (self.up if direction == "up" else self.down)[tier] += nbytes

    @property
    def bytes_up(self) -> float:
        return sum(self.up.values())

    @property
    def bytes_down(self) -> float:
        return sum(self.down.values())

    def tier(self, t: str) -> float:
        return self.up[t] + self.down[t]

    def as_list(self) -> list[float]:
        return [*self.up.values(), *self.down.values(), self.wasted]

    @classmethod
    def from_list(cls, v: list[float]) -> "Ledger":
        n = len(TIERS)
        return cls(dict(zip(TIERS, v[:n])), dict(zip(TIERS, v[n:2 * n])), v[2 * n])


class Link:
    """One direction of a physical link between two nodes."""

    def __init__(self, env: simpy.Environment, src: str, dst: str, latency_s: float,
                 bandwidth_Bps: float, tier: str, direction: str, trace: Trace, ledger: Ledger):
        self.env, self.src, self.dst = env, src, dst
        self.latency, self.bandwidth = latency_s, bandwidth_Bps
        self.tier, self.direction = tier, direction
        self.trace, self.ledger = trace, ledger
        self.wire = simpy.Resource(env, capacity=1)

    def send(self, nbytes: float):
        """simpy process: queue, transmit, propagate. Returns the arrival time."""
        with self.wire.request() as req:
            yield req
            self.trace.add(self.env.now, self.src, "send", self.dst, nbytes)
            self.ledger.add(self.tier, self.direction, nbytes)
            yield self.env.timeout(nbytes / self.bandwidth)
        yield self.env.timeout(self.latency)
        self.trace.add(self.env.now, self.dst, "recv", self.src, nbytes)
        return self.env.now
