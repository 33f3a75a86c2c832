"""FedAvgM (Hsu, Qi, Brown, *Measuring the Effects of Non-Identical Data Distribution for
Federated Visual Classification*, 2019, arXiv 1909.06335): FedAvg with server momentum.

Client k in round t: K (S)GD steps on F_k from w_t (FedAvg's local work), w_k. Server, S_t the
clients whose uploads arrived, p_k = n_k / sum_{j in S_t} n_j:

    Delta_t = sum_{k in S_t} p_k (w_t - w_k)          (n_k-weighted, as FedAvg)
    v_t     = beta v_{t-1} + Delta_t                   v_{-1} = 0
    w_{t+1} = w_t - eta v_t

(the paper's Sec. 3, "server momentum": beta = `server_momentum`, eta = `server_lr`). With
beta = 0 and eta = 1, w_{t+1} = sum p_k w_k: FedAvg.

Edge rule (`edge_rounds`, as HierFAVG and FedOpt): edges average their clients' models
n_k-weighted for `edge_rounds` edge rounds; the cloud applies the momentum step to Delta = w_t
minus the sample-weighted mean of its children's models. With one edge round this is the flat
rule above.

State: server v (P,). Messages: w_t down, w_k up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config.fields import positive, spec
from ..registry import Capabilities, StateSize, TierRounds, declare_algorithm


def momentum(v: Any) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (beta >= 1: v_t grows without bound)"


@declare_algorithm("fedavgm", code=f"{__name__}.algorithm:FedAvgM",
                   summary="FedAvgM (Hsu, Qi, Brown 2019): FedAvg with server momentum",
                   caps=Capabilities(hierarchical=True, robust=True), state=StateSize(fixed=2))
@dataclass(frozen=True)
class FedAvgMParams(TierRounds):
    server_lr: float = spec(1.0, "server step size eta: w <- w - eta v", check=positive)
    server_momentum: float = spec(0.9, "server momentum beta: v <- beta v + Delta, in [0, 1)",
                                  check=momentum)
