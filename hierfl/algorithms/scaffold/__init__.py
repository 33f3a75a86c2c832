"""SCAFFOLD (Karimireddy et al., ICML 2020, arXiv 1910.06378).

Client k in round t starts from y = x (the global model) and takes K steps of

    y <- y - eta_l (g_k(y) - c_k + c),

i.e. SGD on the local objective F_k(y) + <c - c_k, y> (a `Linear` term). Its new control variate:
    option I : c_k+ = grad F_k(x)                          (one extra full-data gradient, charged)
    option II: c_k+ = c_k - c + (x - y) / (K eta_l)         (K = the steps this client actually did)
It sends dy = y - x and dc = c_k+ - c_k. Server (S: the clients whose uploads arrived, N: all):
    x <- x + eta_g (1/|S|) sum_S dy,      c <- c + (|S|/N) (1/|S|) sum_S dc.
The means are unweighted, as in the paper: with all clients taking part every round and exact
arithmetic, the fixed point minimises (1/N) sum_k F_k (the paper's objective), which is
sum_k p_k F_k when the n_k are equal.

State: server c (P,); client c_k (N, P); both start at 0.
Messages: (x, c) down, (dy, dc) up: two model-sized tensors each way."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config.fields import positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("scaffold", code=f"{__name__}.algorithm:Scaffold",
                   summary="SCAFFOLD (Karimireddy et al., ICML 2020)",
                   caps=Capabilities(upload_tensors=2,
                                     optimizers=False,
                                     optimizers_why=("its control variates assume plain SGD "
                                                     "(option II: c_k+ = c_k - c + (x - y_k) / (K"
                                                     " lr), the mean step of K SGD steps of size "
                                                     "lr; option I's program carries grad F_k in "
                                                     "its state)")),
                   state=StateSize(fixed=2, per_client=1))
@dataclass(frozen=True)
class ScaffoldParams:
    option: Literal[1, 2] = spec(2, "control variate update: 1 = grad F_k(x) (an extra full "
                                 "gradient), 2 = c_k - c + (x - y)/(K eta_l) (the paper's choice)")
    server_lr: float = spec(1.0, "global step size eta_g", check=positive)
