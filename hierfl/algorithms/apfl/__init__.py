"""APFL: adaptive personalised federated learning (Y. Deng, M. M. Kamani, M. Mahdavi 2020,
arXiv 2003.13461).

Objectives: the global model w minimises sum_k p_k f_k(w); client k's personal model is the
mixture v_bar_k = alpha_k v_k + (1 - alpha_k) w with v_k = argmin_v f_k(alpha_k v + (1 - alpha_k) w).

Local step of client k on a minibatch D (both gradients on the same D, grad_evals_per_step = 2),
from (w_k, v_k, alpha_k) simultaneously:
    v_bar <- alpha v + (1 - alpha) w_k
    w_k   <- w_k - eta grad f_k(w_k; D)
    v_k   <- v_k - eta alpha grad f_k(v_bar; D)               (chain rule through the mixture)
    alpha <- clip(alpha - eta_alpha <v_k - w_k, grad f_k(v_bar; D)>, 0, 1)    (`adaptive` only)
w_k starts each round from the server's w^t; tau = train.local.steps steps per round.
Server: w^{t+1} = sum_{k in S} n_k w_k / sum_S n_k (FedAvg). With alpha = 0 (not adaptive) the
global model is exactly FedAvg's.

State: the global w; per client v_k and the local model w_k (N, P), created at init as copies of
w^0, and alpha_k (N,) (the `alpha` hyperparameter at init; it changes only when `adaptive`). They
change only in rounds where client k trains.
Personal model (`personal_models`): v_bar_k = alpha_k v_k + (1 - alpha_k) w_k with the client's
local w_k at the end of its last local step -- Algorithm 1's output v_bar_i^(T), which is updated
only at local steps (a synchronisation replaces w_k by the global model but does not recompute
v_bar). Never-trained clients keep v_bar = w^0. With alpha = 0, v_bar_k is the client's last
local FedAvg model.
Messages: w down (one model), w_k up (one model); v_k and alpha_k stay on the client.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import positive, spec, unit_interval
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("apfl", code=f"{__name__}.algorithm:APFL",
                   summary="APFL (Deng et al. 2020)",
                   caps=Capabilities(supports_gamma=False, personalised=True,
                                     optimizers=False,
                                     optimizers_why=("its local program steps the global model, "
                                                     "the personal model and the mixing weight "
                                                     "together")),
                   state=StateSize(fixed=1, per_client=2, client_bytes=4))   # + alpha (float32) each
@dataclass(frozen=True)
class APFLParams:
    alpha: float = spec(0.25, "mixing weight of the personal model v in v_bar (initial value if "
                        "adaptive)", check=unit_interval)
    adaptive: bool = spec(False, "learn alpha per client by gradient steps on the mixture")
    alpha_lr: float | None = spec(None, "step size of the alpha update (default: the local lr)",
                                  check=positive)
