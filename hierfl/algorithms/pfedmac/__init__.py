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

from dataclasses import dataclass
from typing import Literal

from ...config.fields import all_of, at_most, non_negative, positive, spec
from ..registry import ENVELOPE, StateSize, declare_algorithm


@dataclass(frozen=True)
class SparsityParams:
    kind: Literal["none", "l1", "logcosh"] = spec(
        "none", "none; l1: gamma ||theta||_1 by soft-thresholding (exact zeros); logcosh: smooth "
        "gamma * rho * sum log cosh(theta / rho)")
    gamma: float = spec(0.0, "weight of the sparsity term", check=non_negative)
    rho: float = spec(0.01, "logcosh: smoothing width (-> l1 as rho -> 0)", check=positive)


@declare_algorithm("pfedmac", code=f"{__name__}.algorithm:PFedMac",
                   summary="pFedMac (Li et al. 2021)",
                   caps=ENVELOPE,
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class PFedMacParams:
    lam: float = spec(1.0, "lambda: weight of the correlation -lambda <theta, x>", check=positive)
    beta: float = spec(1.0, "server mixing: x <- (1 - beta) x + beta mean(x_k)",
                       check=all_of(positive, at_most(10.0)))
    inner_steps: int = spec(5, "K: (proximal) gradient steps on the inner problem per local step",
                            check=all_of(positive, at_most(1e5)))
    inner_lr: float = spec(0.01, "step size of the inner steps", check=positive)
    sparsity: SparsityParams = spec(default_factory=SparsityParams,
                                    doc="pFedMac-S: sparsity of the personal models")
    encoding: Literal["dense", "sparse", "auto"] = spec(
        "dense", "how uploads are counted: dense 4 B/entry, sparse 8 B/nonzero, auto the smaller")
    weighting: Literal["samples", "uniform"] = spec(
        "samples", "server mean over the selected clients: n_k-weighted or uniform")
