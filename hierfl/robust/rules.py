"""How one aggregator combines the updates of its children: `combine(spec, updates, weights)`.

`mean` is today's weighted mean, to the bit. The robust rules compute in float64 and return
the updates' dtype. The median, the trimmed mean, Krum, multi-Krum and centered clipping treat
the updates equally (a Byzantine client could otherwise claim a large weight); the geometric
median (RFA) and norm bounding use the weights, as their papers do. Equations and papers:
docs/robustness.md."""
from __future__ import annotations

import math

import torch

from .spec import RuleSpec, check


def combine(spec: RuleSpec, updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The (P,) combination of `updates` (C, P) by `spec`, in updates' dtype; `weights` (C,)
    float64 summing to 1. No update gives zeros. One update is the result itself for the
    rules that choose among or between updates; the clipping rules clip it."""
    if spec.is_mean:
        return (weights.double() @ updates.double()).to(updates.dtype)
    c, p = updates.shape
    if c == 0:
        return updates.new_zeros(p)
    if c == 1 and spec.kind not in ("centered_clipping", "norm_bound"):
        return updates[0].clone()
    why = check(spec, c)
    if why is not None:
        raise ValueError(why)
    x = updates.double()
    return _RULES[spec.kind](spec, x, weights.to(x.device, torch.float64)).to(updates.dtype)


def _middle(x: torch.Tensor, k: int) -> torch.Tensor:
    """Per coordinate, the mean of the values left when the k smallest and k largest go."""
    return x.sort(0).values[k:x.shape[0] - k].mean(0)


def _median(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Coordinate-wise median; of an even count, the mean of the two middle values."""
    return _middle(x, (x.shape[0] - 1) // 2)


def _trimmed_mean(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Coordinate-wise mean of what is left when floor(beta C) values go from each end."""
    return _middle(x, math.floor(spec.beta * x.shape[0] + 1e-9))   # 0.29 * 100 is 28.99...


def krum_scores(x: torch.Tensor, f: int) -> torch.Tensor:
    """Each update's Krum score: the sum of its squared distances to its n - f - 2 nearest
    other updates (float64, from the Gram matrix: exact on small integers)."""
    g = x @ x.T
    sq = g.diagonal()
    d = (sq[:, None] + sq[None, :] - 2 * g).clamp_min_(0).fill_diagonal_(math.inf)
    return d.sort(1).values[:, :x.shape[0] - f - 2].sum(1)


def _multi_krum(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The mean of the m updates of least score (Krum: m = 1); ties go to the lower row."""
    m = 1 if spec.kind == "krum" else (spec.m if spec.m is not None else x.shape[0] - spec.f)
    best = torch.sort(krum_scores(x, spec.f), stable=True).indices[:m]
    return x[best].mean(0)


def _geometric_median(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Smoothed Weiszfeld from the weighted mean: v <- sum_i b_i x_i / sum_i b_i with
    b_i = w_i / max(nu, |v - x_i|), at most `iters` times, stopping once the objective
    sum_i w_i |v - x_i| changes by at most tol times itself."""
    v = w @ x
    d = (x - v).norm(dim=1)
    obj = w @ d
    for _ in range(spec.iters):
        b = w / d.clamp_min(spec.nu)
        v = (b / b.sum()) @ x
        d = (x - v).norm(dim=1)
        prev, obj = obj, w @ d
        if abs(prev - obj) <= spec.tol * obj:
            break
    return v


def _scale(x: torch.Tensor, radius: float) -> torch.Tensor:
    """Each row times min(1, radius / its norm) (a zero row stays zero)."""
    return x * (radius / x.norm(dim=1, keepdim=True)).clamp_max_(1.0)


def _centered_clipping(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """From v = 0 (the aggregator's own model), `iters` times v <- v + mean_i clip(x_i - v)."""
    v = x.new_zeros(x.shape[1])
    for _ in range(spec.iters):
        v = v + _scale(x - v, spec.tau).mean(0)
    return v


def _norm_bound(spec: RuleSpec, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The weighted mean of the updates, each first scaled to norm at most `bound`."""
    return w @ _scale(x, spec.bound)


_RULES = {"median": _median, "trimmed_mean": _trimmed_mean, "krum": _multi_krum,
          "multi_krum": _multi_krum, "geometric_median": _geometric_median,
          "centered_clipping": _centered_clipping, "norm_bound": _norm_bound}
