"""Pieces shared by the personalised algorithms (not an algorithm module: the registry skips it)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PersonalState:
    """Per-client personal models, stacked (N, P): one row per client of the system."""

    personal: torch.Tensor


def mix(w: torch.Tensor, mean: torch.Tensor, beta: float) -> torch.Tensor:
    """(1 - beta) w + beta mean, accumulated in float64 (pFedMe's and pFedMac's server step)."""
    return ((1.0 - beta) * w.double() + beta * mean.double()).to(w.dtype)


def uniform_weights(n: int) -> torch.Tensor:
    return torch.full((n,), 1.0 / n, dtype=torch.float64)
