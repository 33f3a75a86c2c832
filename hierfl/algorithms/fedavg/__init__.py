"""FedAvg (McMahan et al., AISTATS 2017).

Client k: K SGD steps from w^t on F_k. Server: w^{t+1} = sum_{k in S_t} n_k w_k / sum n_k.
State: the global model only. Messages: w down, w_k up (one model each way)."""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("fedavg", code=f"{__name__}.algorithm:FedAvg",
                   summary="FedAvg (McMahan et al., AISTATS 2017)",
                   caps=Capabilities(linear_aggregate=True, drops_stragglers=True,
                                     asynchronous=True, local_train=True, robust=True),
                   state=StateSize(fixed=1))
@dataclass(frozen=True)
class FedAvgParams:
    pass
