"""When an aggregation round closes: the round policy, as a small collector of arrivals."""
from __future__ import annotations

import simpy

from ..scenario.schema import RoundSpec


class Collector:
    """Gathers arrivals of one aggregation round and fires `closed` per the policy.

    wait_all: when every expected arrival is in (or at timeout_s); deadline_*: at the deadline or
    when all are in, whichever is first; first_k: at the k-th arrival (or when all are in)."""

    def __init__(self, env: simpy.Environment, expected: int, policy: RoundSpec):
        self.env = env
        self.expected = expected
        self.policy = policy
        self.arrived: list[int] = []
        self.late: list[int] = []
        self.closed = env.event()
        self.opened = env.now
        limit = policy.deadline_s if policy.policy.startswith("deadline") else policy.timeout_s
        if expected == 0:
            self.closed.succeed()
        elif limit is not None:
            env.process(self._timer(limit))

    @property
    def is_closed(self) -> bool:
        return self.closed.triggered

    def _timer(self, limit: float):
        yield self.env.timeout(limit)
        if not self.closed.triggered:
            self.closed.succeed()

    def arrive(self, who: int) -> bool:
        """Record an arrival; False if the round had already closed (the work is wasted)."""
        if self.closed.triggered:
            self.late.append(who)
            return False
        self.arrived.append(who)
        need = self.expected
        if self.policy.policy == "first_k" and self.policy.k is not None:
            need = min(self.policy.k, self.expected)
        if len(self.arrived) >= need:
            self.closed.succeed()
        return True
