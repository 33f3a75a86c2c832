"""Terms of a local objective h_k(w) = F_k(w) + sum of terms, each vectorised over clients.

A smooth term contributes a gradient; a non-smooth one (l1) contributes a proximal map that
is applied after the gradient step (proximal gradient). Anchors and vectors are (C, P) or (P,)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Prox:
    """(mu/2) ||w - anchor||^2. mu is a float, or a (C, 1) tensor: one coefficient per client
    (FedDyn's / FedDC's per-client alpha); `select_term` keeps the rows of the selected clients."""

    mu: float | torch.Tensor
    anchor: torch.Tensor

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        return self.mu * (w - self.anchor)

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return 0.5 * (self.mu * (w - self.anchor) ** 2).sum(-1)


@dataclass(frozen=True)
class Linear:
    """<v, w> (SCAFFOLD's and FedDyn's corrections, pFedMac's -lambda <theta, x>)."""

    v: torch.Tensor

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        return self.v.expand_as(w)

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return (self.v * w).sum(-1)


@dataclass(frozen=True)
class LogCosh:
    """gamma * rho * sum log cosh(w / rho): a smooth l1 (-> gamma ||w||_1 as rho -> 0)."""

    gamma: float
    rho: float

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        return self.gamma * torch.tanh(w / self.rho)

    def value(self, w: torch.Tensor) -> torch.Tensor:
        z = (w / self.rho).abs()
        # log cosh z = z + log(1 + exp(-2z)) - log 2, stable for large z
        return self.gamma * self.rho * (z + torch.log1p(torch.exp(-2 * z)) - 0.6931471805599453).sum(-1)


@dataclass(frozen=True)
class L1:
    """gamma ||w||_1, handled exactly by soft-thresholding (the proximal map)."""

    gamma: float

    def prox(self, w: torch.Tensor, lr: float | torch.Tensor) -> torch.Tensor:
        t = self.gamma * lr
        return torch.sign(w) * torch.clamp(w.abs() - t, min=0.0)

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return self.gamma * w.abs().sum(-1)


Smooth = Prox | Linear | LogCosh
Term = Smooth | L1


def split(terms: list[Term]) -> tuple[list[Smooth], list[L1]]:
    smooth = [t for t in terms if not isinstance(t, L1)]
    return smooth, [t for t in terms if isinstance(t, L1)]


def soft_threshold(w: torch.Tensor, t: float | torch.Tensor) -> torch.Tensor:
    return torch.sign(w) * torch.clamp(w.abs() - t, min=0.0)
