"""FedBN (Li, Jiang, Zhang, Kamp, Dou, *FedBN: Federated Learning on Non-IID Features via Local
Batch Normalization*, ICLR 2021, arXiv 2102.07623), Algorithm 1.

Client k in round t: K local steps from the global model w^t with its own BatchNorm layers:
the parameters of every BatchNorm layer (its affine weight gamma_k and bias beta_k) and its
running statistics (mean, variance) are the client's, kept from its previous round (at its
first round: the initial model's, and fresh statistics), never averaged:

    start_k = (w^t on the other layers, theta_k^BN),   w_k = K SGD steps on F_k from start_k,
    theta_k^BN <- the BatchNorm entries of w_k.

Server: w^{t+1} = sum_k n_k w_k / sum_k n_k on every entry (FedAvg's rule; the BatchNorm
entries of w are used by no client: they only make the global model evaluable). The running
statistics stay with each client (Capabilities.local_norm: exec/carry.py), so nothing of the
BatchNorm layers needs to travel; the ledger counts the whole model each way, as FedAvg's
(the BatchNorm entries are 2 floats per channel: 0.6% of ResNet-20's). Each client's personal
model (its BatchNorm entries in w^{t+1}, with its own statistics) gives personal_test_acc.

With no BatchNorm layer (logreg, an MLP, a GroupNorm ResNet) it is FedAvg exactly.
State: the global model; per client its BatchNorm entries (N x P_BN floats)."""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("fedbn", code=f"{__name__}.algorithm:FedBN",
                   summary="FedBN (Li et al., ICLR 2021): BatchNorm layers stay local",
                   caps=Capabilities(linear_aggregate=True, personalised=True,
                                     local_norm=True, robust=True),
                   state=StateSize(fixed=1))     # + N x P_BN (known with the model only)
@dataclass(frozen=True)
class FedBNParams:
    pass
