"""When an aggregation round closes: the round policy, as a small collector of arrivals."""
from __future__ import annotations

import simpy
from simpy.events import PENDING

from ..config.schema import RoundSpec


class Collector:
    """Gathers arrivals of one aggregation round and fires `closed` per the policy.

    wait_all: when every expected participant has arrived (or at timeout_s); deadline_*: at the
    deadline or when all are in, whichever is first; first_k: at the k-th arrival. A participant
    whose message the simulator lost (crash, outage) is reported with `fail`; when every
    participant has arrived or failed the round closes too, so a round never hangs."""

    def __init__(self, env: simpy.Environment, expected: int, policy: RoundSpec,
                 opened: float | None = None):
        self.env = env
        self.expected = expected
        self.policy = policy
        self.arrived: list = []
        self.failed: list = []
        self.late: list = []
        self.closed = env.event()
        self.opened = env.now if opened is None else opened
        self.need = expected        # arrivals that close it (the policy is fixed)
        if policy.policy == "first_k" and policy.k is not None:
            self.need = min(policy.k, expected)
        limit = policy.limit_s
        if expected == 0:
            self.closed.succeed()
        elif limit is not None:
            env.process(self._timer(max(self.opened + limit - env.now, 0.0)))

    def _timer(self, delay: float):
        yield self.env.timeout(delay)
        if not self.closed.triggered:
            self.closed.succeed()

    def _check(self) -> None:
        if self.closed.triggered:
            return
        if len(self.arrived) >= self.need or \
                len(self.arrived) + len(self.failed) >= self.expected:
            self.closed.succeed()

    def arrive(self, who) -> bool:
        """Record an arrival; False if the round had already closed (the work is wasted).
        Once per message that reaches an aggregator: `_check` inline."""
        closed, arrived = self.closed, self.arrived
        if closed._value is not PENDING:          # triggered
            self.late.append(who)
            return False
        arrived.append(who)
        n = len(arrived)
        if n >= self.need or n + len(self.failed) >= self.expected:
            closed.succeed()
        return True

    def fail(self, who) -> None:
        """A participant that will never arrive."""
        self.failed.append(who)
        self._check()
