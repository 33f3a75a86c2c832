"""The envelope local program: the client loop shared by pFedMe, pFedMac and pFedMac-S.

Each client holds an outer variable x (its copy of the global model) and a personal model theta,
both (C, P). One local step on a minibatch D (the solver's step; the same D throughout it):

    theta <- K steps of (proximal) gradient descent, step size `inner_lr`, warm-started from the
             previous theta, on the inner objective
                 f(theta; D) + coupling(theta; x) + extra terms
    x     <- x - eta * lam_out * (x - theta)                     (eta: the round's local lr)

The coupling makes x's step a gradient step on an envelope of f:
- pFedMe:  coupling (lam/2) ||theta - x||^2  (`Prox(lam, x)`): theta approximates prox_{f/lam}(x)
  and lam (x - theta) is the gradient of the Moreau envelope F(x) = min_theta f + (lam/2)||.||^2.
- pFedMac: coupling -lam <theta, x>  (`Linear(-lam x)`): theta approximates
  argmin f(theta) - lam <theta, x> and lam (x - theta) is the gradient of
  F(x) = (lam/2)||x||^2 - f*(lam x). This inner problem is bounded below only if lam x lies in
  the range of grad f (for a quadratic f with positive definite Hessian it always is; for
  cross-entropy it generally is not: theta then runs off to infinity as K grows). With an l1 term
  gamma ||theta||_1 it is bounded when gamma >= lam ||x||_inf.

`extra` terms are fixed inner terms: pFedMe's hidden L2 (`Prox(mu, 0)`), pFedMac-S's `LogCosh`
(smooth) or `L1` (applied exactly by soft-thresholding after each inner gradient step, so the
personal model has exact zeros). `grad_evals_per_step` = K minibatch gradients per local step.
There is no single local objective h_k for a gamma-inexact stop: `grad_h` returns None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..models.functional import Model
from .batches import Batch
from .solver import ProgramBase, State, TermsProgram
from .terms import Linear, Prox, Term


@dataclass(frozen=True)
class EnvelopeProgram(ProgramBase):
    """pFedMe / pFedMac local steps for C clients: state (x, theta)."""

    model: Model
    start: torch.Tensor                    # (C, P) x at the start of the round
    theta0: torch.Tensor                   # (C, P) theta at the start of the round
    lam: float                             # coupling strength of the inner problem
    coupling: Literal["prox", "linear"]    # pFedMe's (lam/2)||theta - x||^2 or pFedMac's -lam<theta, x>
    inner_steps: int                       # K
    inner_lr: float
    extra: tuple[Term, ...] = ()           # fixed inner terms (hidden L2, LogCosh, L1)
    outer_lam: float | None = None         # lambda of the x step (default: lam)

    @property
    def grad_evals_per_step(self) -> int:
        return self.inner_steps

    def inner_terms(self, x: torch.Tensor) -> tuple[Term, ...]:
        couple: Term = Prox(self.lam, x) if self.coupling == "prox" else Linear(-self.lam * x)
        return (couple, *self.extra)

    def solve_inner(self, x: torch.Tensor, theta: torch.Tensor, batch: Batch) -> torch.Tensor:
        """K (proximal) gradient steps on the inner objective at x, from theta, on one batch."""
        inner = TermsProgram(self.model, theta, self.inner_terms(x))
        s: State = (theta,)
        for _ in range(self.inner_steps):
            s = inner.step(s, batch, self.inner_lr)
        return s[0]

    def init(self) -> State:
        return (self.start.clone(), self.theta0.clone())

    def step(self, s: State, batch: Batch, lr: float) -> State:
        x, theta = s
        theta = self.solve_inner(x, theta, batch)
        lam_out = self.lam if self.outer_lam is None else self.outer_lam
        x = x - lr * lam_out * (x - theta)
        return (x, theta)
