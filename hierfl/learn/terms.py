"""Terms of a local objective h_k(w) = F_k(w) + sum of terms, each vectorised over clients.

Every term speaks the same small protocol (`Term`), so the solver never asks what a term is:

- `smooth`: True if the term enters the gradient (`grad`); False if it is applied by its
  proximal map after the gradient step (`prox`, proximal gradient: l1's soft-thresholding);
- `affine()`: for a term whose gradient is affine in w, `(decay, shift)` with
  grad = decay * w + shift (either may be None: no contribution); None otherwise. The solver
  runs the model's fused SGD (`Model.sgd_steps`) exactly when every term is affine;
- `select(sel)`: the same term for some of the clients (per-client (C, ...) tensors keep the
  selected rows; shared (P,) tensors stay as they are).

Anchors and vectors are (C, P) or (P,). A new term is a dataclass that subclasses `Term` and
fills in what applies: no solver edit."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

import torch


def select_rows(t: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """Rows of a per-client tensor (C, ...); a shared (P,) tensor stays as is."""
    return t[sel] if t.dim() == 2 else t


class Term:
    """The protocol every term follows (defaults: smooth, not affine, no prox)."""

    smooth: ClassVar[bool] = True

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} is not smooth")

    def prox(self, w: torch.Tensor, lr: float | torch.Tensor) -> torch.Tensor:
        """The proximal map of lr * term (non-smooth terms only)."""
        raise NotImplementedError(f"{type(self).__name__} has no proximal map")

    def affine(self) -> tuple[float | torch.Tensor | None, torch.Tensor | None] | None:
        return None

    def value(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def select(self, sel: torch.Tensor) -> "Term":
        kw = {f.name: select_rows(getattr(self, f.name), sel)
              for f in fields(self)  # type: ignore[arg-type]
              if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **kw)  # type: ignore[type-var]


@dataclass(frozen=True)
class Prox(Term):
    """(mu/2) ||w - anchor||^2. mu is a float, or a (C, 1) tensor: one coefficient per client
    (FedDyn's / FedDC's per-client alpha); `select` keeps the rows of the selected clients."""

    mu: float | torch.Tensor
    anchor: torch.Tensor

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        return self.mu * (w - self.anchor)

    def affine(self) -> tuple[float | torch.Tensor, torch.Tensor]:
        return self.mu, -self.mu * self.anchor

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return 0.5 * (self.mu * (w - self.anchor) ** 2).sum(-1)


@dataclass(frozen=True)
class Linear(Term):
    """<v, w> (SCAFFOLD's and FedDyn's corrections, pFedMac's -lambda <theta, x>)."""

    v: torch.Tensor

    def grad(self, w: torch.Tensor) -> torch.Tensor:
        return self.v.expand_as(w)

    def affine(self) -> tuple[None, torch.Tensor]:
        return None, self.v

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return (self.v * w).sum(-1)


@dataclass(frozen=True)
class LogCosh(Term):
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
class L1(Term):
    """gamma ||w||_1, handled exactly by soft-thresholding (the proximal map)."""

    smooth: ClassVar[bool] = False
    gamma: float

    def prox(self, w: torch.Tensor, lr: float | torch.Tensor) -> torch.Tensor:
        t = self.gamma * lr
        return torch.sign(w) * torch.clamp(w.abs() - t, min=0.0)

    def value(self, w: torch.Tensor) -> torch.Tensor:
        return self.gamma * w.abs().sum(-1)


def affine_sum(terms: tuple[Term, ...]) -> tuple[float | torch.Tensor | None,
                                                 torch.Tensor | None] | None:
    """(decay, shift) of the sum of the terms' gradients, decay * w + shift, accumulated in the
    terms' order; None when some term is not affine."""
    decay: float | torch.Tensor | None = None
    shift: torch.Tensor | None = None
    for t in terms:
        part = t.affine()
        if part is None:
            return None
        d, s = part
        if d is not None:
            decay = d if decay is None else decay + d
        if s is not None:
            shift = s if shift is None else shift + s
    return decay, shift
