"""Asynchronous round policies (Xie et al. 2019 FedAsync; Nguyen et al. 2022 FedBuff): the
staleness weighting of an update that was computed from an older server version."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .fields import non_negative, positive, spec

ASYNC_POLICIES = ("fedasync", "fedbuff")


@dataclass(frozen=True)
class StalenessSpec:
    """s(tau) for an update tau server versions old (FedAsync, Xie et al. 2019, section 5.2):
    constant 1; polynomial (tau + 1)^-a; hinge 1 if tau <= b else 1 / (a (tau - b) + 1)."""

    kind: Literal["constant", "polynomial", "hinge"] = spec("constant", "staleness function")
    a: float = spec(0.5, "polynomial: exponent; hinge: slope", check=non_negative)
    b: float = spec(4.0, "hinge: staleness tolerated at full weight", check=non_negative)

    def weight(self, tau: int) -> float:
        if self.kind == "polynomial":
            return float((tau + 1) ** -self.a)
        if self.kind == "hinge":
            return 1.0 if tau <= self.b else 1.0 / (self.a * (tau - self.b) + 1.0)
        return 1.0


ALPHA = spec(0.6, "fedasync: mixing weight alpha (x <- (1 - a_s) x + a_s x_k, a_s = alpha "
             "s(staleness))", check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]")
SERVER_LR = spec(1.0, "fedbuff: server learning rate on the buffered mean delta", check=positive)
CONCURRENCY = spec(None, "fedasync / fedbuff: clients working at once (default: "
                   "train.clients_per_round; at an edge: its clients sampled that round)",
                   check=positive)
DRAIN = spec(None, "fedasync / fedbuff: every this many server versions, start no job until "
             "nothing is in flight: a quiescent point where checkpoints are written (changes "
             "the schedule; default: never, and asynchronous runs write no checkpoint)",
             check=positive)
