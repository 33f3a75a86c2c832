"""pFedMe: personalised FL with Moreau envelopes (T. Dinh, N. Tran, T. Nguyen, NeurIPS 2020,
arXiv 2006.08848).

Objective: min_w sum_k p_k F_k(w),  F_k(w) = min_theta { f_k(theta) + (lam/2) ||theta - w||^2 }.

Local work of client k from the round's w^t (R = train.local.steps local rounds, each on one
minibatch D): theta_k <- K = `personal_steps` gradient steps (step `personal_lr`, warm-started from
the previous theta) on  f_k(theta; D) + (lam/2) ||theta - w_k||^2 [+ (mu/2) ||theta||^2];
then w_k <- w_k - eta lam (w_k - theta_k) (eta = train.local.lr). Shared with pFedMac through
`learn.envelope.EnvelopeProgram` (coupling "prox").
Server: w^{t+1} = (1 - beta) w^t + beta * sum_{k in S} p_k w_k, p_k = n_k / sum_S n (weighting
"samples", the published code; the paper's Algorithm 1 writes the uniform mean 1/S: "uniform").

State: the global w; per client the personal model theta_k (N, P), created at init as copies of
w^0 and replaced by the last theta of each round the client trains in (clients that never train
keep w^0). theta starts every round from w^t, as in the published code (`set_parameters`).
Messages: w down (one model), w_k up (one model). The personal model never leaves the client.

Paper vs published code (options, paper's choice by default):
- `train_all_clients`: the published code trains every client every round (their personal
  models are refreshed and evaluated) but aggregates only the S selected ones. Unselected
  clients then receive the model and compute but upload nothing. Default false.
- `hidden_l2`: the published pFedMeOptimizer adds mu * theta to the inner gradient with
  mu = 0.001, i.e. an extra (mu/2) ||theta||^2 in the inner problem. Default 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config.fields import all_of, at_most, non_negative, positive, spec
from ..registry import ENVELOPE, StateSize, declare_algorithm


@declare_algorithm("pfedme", code=f"{__name__}.algorithm:PFedMe",
                   summary="pFedMe (Dinh et al., NeurIPS 2020)",
                   caps=ENVELOPE,
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class PFedMeParams:
    lam: float = spec(15.0, "lambda: strength of the Moreau envelope coupling", check=positive)
    personal_steps: int = spec(5, "K: gradient steps on the inner (personal) problem per local "
                               "step", check=all_of(positive, at_most(1e5)))
    personal_lr: float = spec(0.01, "step size of the inner (personal) steps", check=positive)
    beta: float = spec(1.0, "server mixing: w <- (1 - beta) w + beta mean(w_k)",
                       check=all_of(positive, at_most(10.0)))
    train_all_clients: bool = spec(False, "published code: every client trains every round, only "
                                   "the selected ones are aggregated")
    hidden_l2: float = spec(0.0, "published code's (mu/2)||theta||^2 in the inner problem "
                            "(mu = 0.001 there)", check=non_negative)
    weighting: Literal["samples", "uniform"] = spec(
        "samples", "server mean over the selected clients: n_k-weighted or uniform (paper)")
