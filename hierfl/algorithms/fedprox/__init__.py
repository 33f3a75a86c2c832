"""FedProx (Li et al., MLSys 2020, arXiv 1812.06127).

Local objective of client k in round t (w^t: the round's global model):

    h_k(w; w^t) = F_k(w) + (mu/2) ||w - w^t||^2,
    local step  w <- w - eta (grad F_k(w) + mu (w - w^t)),

solved approximately: K steps, or fewer when `local.gamma` asks for a gamma-inexact solution
||grad h_k(w)|| <= gamma ||grad h_k(w^t; w^t)||. Server: the n_k-weighted mean of the local models
(FedAvg's rule). With mu = 0 it is FedAvg exactly.

State: the global model only. Messages: w^t down, w_k up (one model-sized tensor each way).
Stragglers (the paper's experiment) keep their partial work: `stragglers.drop: auto` drops them
for FedAvg only; the paper draws a straggler's epochs in [1, E], the published code in [1, E-1]
(`stragglers.epochs_range: paper | code`)."""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import non_negative, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("fedprox", code=f"{__name__}.algorithm:FedProx",
                   summary="FedProx (Li et al., MLSys 2020)",
                   caps=Capabilities(linear_aggregate=True, asynchronous=True, robust=True),
                   state=StateSize(fixed=1))
@dataclass(frozen=True)
class FedProxParams:
    mu: float = spec(0.01, "proximal coefficient mu (0 = FedAvg)", check=non_negative)
