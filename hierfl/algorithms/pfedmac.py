"""pFedMac: personalised FL by maximising correlation (R. Li et al. 2021, arXiv 2107.05330), with
the sparse extension pFedMac-S from the seminar slides on pFedMac.

Objective: min_x sum_k p_k F_k(x),
    F_k(x) = min_theta { f_k(theta) - lam <theta, x> [+ gamma ||theta||_1] } + (lam/2) ||x||^2
           = (lam/2) ||x||^2 - f_k*(lam x)            (without the l1 term),
    grad F_k(x) = lam (x - theta_k(x)),   theta_k(x) = argmin_theta f_k(theta) - lam <theta, x> [...].

Local work of client k from the round's x^t (R = train.local.steps local rounds, each on one
minibatch D): theta_k <- K = `inner_steps` steps of step `inner_lr` (warm-started from the previous
theta) on  f_k(theta; D) - lam <theta, x_k> + sparsity term, then x_k <- x_k - eta lam (x_k - theta_k)
(eta = train.local.lr). Shared with pFedMe through `learn.envelope.EnvelopeProgram` (coupling
"linear"). Sparsity (pFedMac-S): `l1` adds gamma ||theta||_1 by proximal gradient (soft-
thresholding after every inner step: exact zeros); `logcosh` adds the smooth
gamma * rho * sum_n log cosh(theta_n / rho) (-> gamma ||theta||_1 as rho -> 0; near-zeros only).
Server: x^{t+1} = (1 - beta) x^t + beta * sum_{k in S} p_k x_k (weighting "samples": p_k ~ n_k;
"uniform": 1/S, the slides' mean).

Boundedness: for f_k with a positive definite Hessian (quadratics) the inner problem has a
unique minimiser; for cross-entropy it is unbounded below whenever lam x is not a gradient of
f_k (always the case for a direction no softmax can produce), so theta grows with K and the
run may blow up. That is a result, not a crash: the engine (run.py) marks the algorithm
diverged when its parameters become non-finite or their norm exceeds train.divergence_bound,
stops it and carries on with the others. With l1, gamma >= lam ||x||_inf bounds the problem.
The outer problem is convex only where lam I <= the curvature of f_k (quadratics: lam <=
lambda_min(Hessian of f_k)); beyond it x is pushed away from the fixed point.

State: the global x; per client the personal model theta_k (N, P), created at init as copies of
x^0 and replaced by the last theta of each round the client trains in (never-trained clients keep
x^0). theta starts every round from x^t.
Messages: x down (one model); x_k up (one model), counted with `encoding` (dense 4 bytes per
entry, sparse 8 bytes per nonzero, auto the smaller per message). The personal model stays on
the client.
"""
from __future__ import annotations

import torch

from ..learn.envelope import EnvelopeProgram
from ..learn.terms import L1, LogCosh, Term
from ._personal import EnvelopeAlgorithm
from .base import RoundCtx, State, stack_start
from .params import SparsityParams, PFedMacParams


def sparsity_terms(s: SparsityParams) -> tuple[Term, ...]:
    if s.kind == "none" or s.gamma == 0.0:
        return ()
    if s.kind == "l1":
        return (L1(s.gamma),)
    return (LogCosh(s.gamma, s.rho),)


class PFedMac(EnvelopeAlgorithm):
    name = "pfedmac"
    Params = PFedMacParams
    p: PFedMacParams

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.p.encoding

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        x0 = stack_start(start, len(clients))
        return EnvelopeProgram(self.setup.model, x0, x0.clone(), self.p.lam, "linear",
                               self.p.inner_steps, self.p.inner_lr,
                               sparsity_terms(self.p.sparsity))

