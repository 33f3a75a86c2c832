"""Drawing device and link attributes from constants or distributions."""
from __future__ import annotations

import numpy as np

from ..config.schema import Dist, DistSpec


def draw(d: Dist, rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws of `d` (a constant or a DistSpec) as float64."""
    if not isinstance(d, DistSpec):
        return np.full(n, float(d))
    if d.dist == "constant":
        return np.full(n, float(d.value))  # type: ignore[arg-type]
    if d.dist == "uniform":
        return rng.uniform(d.low, d.high, n)
    if d.dist == "lognormal":
        with np.errstate(over="ignore"):     # an absurd sigma gives inf, which validation reports
            return float(d.median) * np.exp(rng.normal(0.0, d.sigma, n))  # type: ignore[arg-type]
    if d.dist == "normal":
        out = rng.normal(d.mean, d.std, n)
        return np.maximum(out, d.min) if d.min is not None else out
    p = None
    if d.weights is not None:
        w = np.asarray(d.weights, float)
        p = w / w.sum()
    return rng.choice(np.asarray(d.choices, float), size=n, p=p)
