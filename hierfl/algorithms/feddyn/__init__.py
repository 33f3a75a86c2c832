"""FedDyn (Acar et al., ICLR 2021, arXiv 2111.04263): federated learning with dynamic
regularisation.

Client k in round t (w^t: the global model) solves, approximately by K (S)GD steps from w^t,

    theta_k = argmin_theta  F_k(theta) - <g_k, theta> + (alpha/2) ||theta - w^t||^2

(terms `Linear(-g_k)` and `Prox(alpha, w^t)`), then updates its state
    g_k <- g_k - alpha (theta_k - w^t)          (g_k tracks grad F_k at its last local model).
Server (S: the clients whose uploads arrived, m: all clients):
    h <- h - (alpha/m) sum_{k in S} (theta_k - w^t),     w^{t+1} = mean_S(theta_k) - h / alpha.
At a fixed point theta_k = w and sum_k g_k = sum_k grad F_k(w) = 0: FedDyn converges to the
minimiser of the paper's objective (1/m) sum_k F_k (unweighted).

`alpha_scaling: code` (the published code): client k uses alpha_k = alpha / (n_k / mean_j n_j)
in its prox term and in its g_k update; the server keeps alpha (its h / alpha is the mean drift,
alpha-free). Its fixed point then has sum_k n_k grad F_k(w) = 0: the sample-weighted objective.

State: server h (P,); client g_k (N, P); both start at 0.
Messages: w^t down, theta_k up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config.fields import positive, spec
from ..registry import StateSize, declare_algorithm


@declare_algorithm("feddyn", code=f"{__name__}.algorithm:FedDyn",
                   summary="FedDyn (Acar et al., ICLR 2021)",
                   state=StateSize(fixed=2, per_client=1))
@dataclass(frozen=True)
class FedDynParams:
    alpha: float = spec(0.01, "dynamic regularisation coefficient alpha", check=positive)
    alpha_scaling: Literal["paper", "code"] = spec(
        "paper", "paper: one alpha; code: alpha / (n_k / mean n) per client (published code)")
