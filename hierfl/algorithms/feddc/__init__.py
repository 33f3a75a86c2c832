"""FedDC (Gao et al., CVPR 2022, arXiv 2203.11751): local drift decoupling and correction.

Client i keeps a drift h_i and its last local update g_i; the server keeps g = sum_i
(|D_i|/|D|) g_i over all clients. In round t the client starts from theta = w and takes K steps on

    F(theta; h_i, D_i, w) = L_i(theta) + (alpha/2) ||theta + h_i - w||^2
                            + (1/(eta K)) <theta, g_i - g>,

i.e. theta <- theta - eta grad L_i(theta) - eta alpha (theta + h_i - w) - (1/K)(g_i - g)
(terms `Prox(alpha, w - h_i)` and `Linear((g_i - g)/(eta K))`, K the planned local steps, eta the
round's learning rate). Then, with theta_i+ its result:
    h_i <- h_i + (theta_i+ - w),     g_i <- theta_i+ - w,
and the client uploads theta_i+ + h_i+ and dg_i = g_i+ - g_i (so the server can keep g).
Server (S: the clients whose uploads arrived):
    g <- g + sum_S (|D_i|/|D|) dg_i,
    w+ = sum_S |D_i| (theta_i+ + h_i+) / sum_S |D_i|                     (server_rule: paper)

Options where the published code differs from the paper (paper's choice by default):
- `alpha_scaling: code`: alpha_i = alpha / (n_i / mean n) per client;
- `server_rule: code`: w+ = mean_S(theta_i+) + mean_all(h_i); the client then uploads theta_i+
  (not theta_i+ + h_i+), and the server tracks sum_all h_i from the uploads
  (h_i changes by theta_i+ - w);
- `clip`: clip the norm of each local gradient (loss + terms) at this value (the code uses 10).

State: client h_i, g_i (N, P); server g (P,), hsum (P,) (= sum_i h_i, used by the code rule);
all start at 0. Messages: (w, g) down, two model-sized tensors up."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config.fields import each, non_negative, positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("feddc", code=f"{__name__}.algorithm:FedDC",
                   summary="FedDC (Gao et al., CVPR 2022)",
                   caps=Capabilities(upload_tensors=2),
                   state=StateSize(fixed=3, per_client=2))
@dataclass(frozen=True)
class FedDCParams:
    alpha: float = spec(0.01, "weight of the drift-corrected prox term alpha", check=non_negative)
    alpha_scaling: Literal["paper", "code"] = spec(
        "paper", "paper: one alpha; code: alpha / (n_i / mean n) per client (published code)")
    server_rule: Literal["paper", "code"] = spec(
        "paper", "paper: n-weighted mean of theta_i + h_i; code: mean_S theta_i + mean_all h_i")
    clip: float | None = spec(None, "clip each local gradient's norm (published code: 10)",
                              check=positive)
