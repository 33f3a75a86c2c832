"""Closed forms shared by several tests (computed with numpy, independently of hierfl)."""
from __future__ import annotations

import numpy as np


def smooth_solution(b, gamma, rho):
    """argmin (1/2) t^2 - b t + gamma rho log cosh(t / rho), by bisection on
    t - b + gamma tanh(t / rho) = 0 (the objective is strictly convex)."""
    lo, hi = np.full_like(b, -10.0), np.full_like(b, 10.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        pos = mid - b + gamma * np.tanh(mid / rho) > 0
        hi, lo = np.where(pos, mid, hi), np.where(pos, lo, mid)
    return (lo + hi) / 2
