"""Ditto: fair and robust federated learning through personalisation (T. Li, S. Hu, A. Beirami,
V. Smith, ICML 2021, arXiv 2012.04221).

Objectives: global  min_w sum_k p_k F_k(w);  personal  v_k = argmin_v F_k(v) + (lam/2) ||v - w*||^2.

Local step of client k on a minibatch D (both gradients on the same D, grad_evals_per_step = 2),
with w^t the model of this round's downlink (the anchor, fixed during the round):
    v_k <- v_k - eta_p (grad F_k(v_k; D) + lam (v_k - w^t))        (eta_p = `personal_lr`)
    w_k <- w_k - eta grad F_k(w_k; D)                               (eta = train.local.lr)
w_k starts each round from w^t; v_k persists across rounds. Server: w^{t+1} = n_k-weighted mean
of the w_k over the clients that reported (FedAvg), so Ditto's global model is FedAvg's.
The personal step is a contraction towards w^t only if eta_p * lam < 2; with eta_p * lam = 1 one
step gives v = w^t - grad F_k(v; D) / lam, i.e. v -> w^t as lam -> infinity.

State: the global w; per client v_k (N, P), created at init as copies of w^0 and changed only in
rounds where the client trains (never-trained clients keep w^0).
Messages: w down (one model), w_k up (one model); v_k never leaves the client.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import non_negative, positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("ditto", code=f"{__name__}.algorithm:Ditto",
                   summary="Ditto (Li et al., ICML 2021)",
                   caps=Capabilities(supports_gamma=False, personalised=True,
                                     optimizers=False,
                                     optimizers_why=("its local program steps the global and the "
                                                     "personal model together")),
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class DittoParams:
    lam: float = spec(1.0, "lambda: pull of the personal model towards the global one "
                      "(paper: 0.1, 1, 2)", check=non_negative)
    personal_lr: float | None = spec(None, "step size of the personal steps (default: the "
                                     "local lr)", check=positive)
