"""IFCA, the Iterative Federated Clustering Algorithm (A. Ghosh, J. Chung, D. Yin,
K. Ramchandran, NeurIPS 2020, arXiv 2006.04088), model averaging (Algorithm 2).

k models theta_1..theta_k (`clusters`). In round t each selected client i receives them,
estimates its cluster identity on its local training data

    j_hat = argmin_j F_i(theta_j)          (ties: the lowest j)

and runs the local steps (train.local) on F_i from theta_{j_hat}; it uploads its model and
j_hat. The server averages each cluster's uploads,

    theta_j <- sum_{i in S_j} n_i theta_i / sum_{i in S_j} n_i    (S_j: arrivals that chose j)

(the paper's mean is unweighted; its clients hold equal n_i), and a cluster nobody chose keeps
its model. With k = 1 this is FedAvg.

Initialisation (from the seed, distinct): theta_1 is the scenario's initial model, theta_j for
j > 1 is drawn with the model's default rule from the key (seed, "ifca-init", j).

Downlink (`downlink`): `all` (the paper): every round the k models, k model-sized tensors.
`chosen`: after the first round the server sends each client only the model of its last cluster
(a client never seen: the global model's cluster) and the client trains it without estimating
again: one model down, no loss evaluation; identities are then fixed after the first round.

Cost: estimating the identity is k forward passes over the local data, charged as k/3 full-data
gradients (the engine charges a gradient as 3 forward passes).

Global and personal models: the personalised model of client i is theta of the cluster it chose
last (a client never selected: the global model); the global model w (test_acc, final_params) is
the model of the cluster holding the most training samples among the clients with a known
identity (ties: the lowest j). clients.csv's `cluster` column: each client's choice per round.

State: w; server theta (k, P) and the rounds done; per client its last cluster (N,), -1 before.
Messages: k models down (or 1, above); the model and its cluster id (a 4-byte header) up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config.fields import all_of, at_most, each, positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


def _state(p: "IFCAParams") -> StateSize:
    """k cluster models and a round counter; each client's cluster id."""
    return StateSize(fixed=1 + p.clusters, fixed_bytes=4, client_bytes=4)


@declare_algorithm("ifca", code=f"{__name__}.algorithm:IFCA",
                   summary=("IFCA (Ghosh et al., NeurIPS 2020): k cluster models, `cluster` "
                            "column in clients.csv"),
                   caps=Capabilities(supports_gamma=False, personalised=True, codes_down=False,
                                     optimizers=False,
                                     optimizers_why=("its local program (choose a cluster's "
                                                     "model, then steps) carries the cluster in "
                                                     "its state, not an optimizer's")),
                   state=_state)
@dataclass(frozen=True)
class IFCAParams:
    clusters: int = spec(2, "k: the number of cluster models", check=all_of(positive,
                                                                            at_most(64)))
    downlink: Literal["all", "chosen"] = spec(
        "all", "all: the k models every round (the paper); chosen: after the first round only "
        "the model of each client's last cluster (identities fixed)")
