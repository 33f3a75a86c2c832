"""Learning-rate schedules over cloud rounds (`train.local.lr_schedule`), torch-free: the lr of
round t (from 1) is what torch.optim.lr_scheduler gives after t - 1 scheduler steps, one step
per round, from the base lr:

    step:          lr * gamma ** floor((t - 1) / step_size)                     (StepLR)
    exponential:   lr * gamma ** (t - 1)                       (ExponentialLR; = lr_decay)
    cosine:        eta_min + (lr - eta_min) (1 + cos(pi (t - 1) / T)) / 2, T = t_max or the
                   rounds                                                (CosineAnnealingLR)
    warmup_cosine: lr * t / warmup for t <= warmup (a linear ramp), then cosine from lr to
                   eta_min over the remaining rounds

With `every: step` the same formulas run on a clock of local steps instead of rounds (step_size,
t_max and warmup count steps): step s (from 0) of edge round r of cloud round t has the clock
n = ((t - 1) R + r) K + s (R edge rounds per cloud round, K = train.local.steps), what torch's
scheduler gives after n steps of a client that took part in every round; the horizon (cosine's
default t_max) is rounds R K. Every client of a round steps with the same lr at its step s."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def round_lr(spec: Any, lr: float, t: int, rounds: int) -> float:
    """The local lr of round t under `spec` (config.schema.ScheduleSpec)."""
    return scheduled(spec, lr, t - 1, rounds)


def scheduled(spec: Any, lr: float, k: int, horizon: int) -> float:
    """The lr after k scheduler steps (from 0) of a schedule over `horizon` steps."""
    if spec.kind == "step":
        return lr * spec.gamma ** (k // spec.step_size)
    if spec.kind == "exponential":
        return lr * spec.gamma ** k
    if spec.kind == "cosine":
        return _cosine(lr, spec.eta_min, k, spec.t_max or horizon)
    if k + 1 <= spec.warmup:                                        # warmup_cosine
        return lr * (k + 1) / spec.warmup
    return _cosine(lr, spec.eta_min, k - spec.warmup, max(horizon - spec.warmup, 1))


@dataclass(frozen=True)
class StepLR:
    """The lr of each local step of one round under an `every: step` schedule: step i of the
    round has the clock offset + i (module doc)."""

    spec: Any
    lr: float
    offset: int
    horizon: int

    def __call__(self, i: int) -> float:
        return scheduled(self.spec, self.lr, self.offset + i, self.horizon)


def _cosine(lr: float, eta_min: float, k: int, t_max: int) -> float:
    return eta_min + (lr - eta_min) * (1 + math.cos(math.pi * k / t_max)) / 2
