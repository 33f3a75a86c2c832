"""Learning-rate schedules over cloud rounds (`train.local.lr_schedule`), torch-free: the lr of
round t (from 1) is what torch.optim.lr_scheduler gives after t - 1 scheduler steps, one step
per round, from the base lr:

    step:          lr * gamma ** floor((t - 1) / step_size)                     (StepLR)
    exponential:   lr * gamma ** (t - 1)                       (ExponentialLR; = lr_decay)
    cosine:        eta_min + (lr - eta_min) (1 + cos(pi (t - 1) / T)) / 2, T = t_max or the
                   rounds                                                (CosineAnnealingLR)
    warmup_cosine: lr * t / warmup for t <= warmup (a linear ramp), then cosine from lr to
                   eta_min over the remaining rounds

Every client of a round steps with that round's lr (per-step schedules are a later piece)."""
from __future__ import annotations

import math
from typing import Any


def round_lr(spec: Any, lr: float, t: int, rounds: int) -> float:
    """The local lr of round t under `spec` (config.schema.ScheduleSpec)."""
    k = t - 1
    if spec.kind == "step":
        return lr * spec.gamma ** (k // spec.step_size)
    if spec.kind == "exponential":
        return lr * spec.gamma ** k
    if spec.kind == "cosine":
        return _cosine(lr, spec.eta_min, k, spec.t_max or rounds)
    if t <= spec.warmup:                                            # warmup_cosine
        return lr * t / spec.warmup
    return _cosine(lr, spec.eta_min, t - 1 - spec.warmup, max(rounds - spec.warmup, 1))


def _cosine(lr: float, eta_min: float, k: int, t_max: int) -> float:
    return eta_min + (lr - eta_min) * (1 + math.cos(math.pi * k / t_max)) / 2
