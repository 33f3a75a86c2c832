"""FedPD (Zhang, Hong, Dhar, Yi, Luo, *FedPD: A Federated Learning Framework with Adaptivity
to Non-IID Data*, IEEE TSP 2021, arXiv 2005.11418), Algorithm 1 with the SGD local solver
(FedPD-SGD): min_x (1/N) sum_i f_i(x) (unweighted; f_i = F_i, the client's mean loss).

Client i holds a dual lambda_i and a local copy x_{0,i} of the global model. Its augmented
Lagrangian is

    L_i(x_i, x_{0,i}, lambda_i) = f_i(x_i) + <lambda_i, x_i - x_{0,i}>
                                  + (1 / (2 eta)) ||x_i - x_{0,i}||^2

(terms `Linear(lambda_i)` and `Prox(1/eta, x_{0,i})`). Round r (one iteration of the paper):

    x_i         <- the local steps on L_i(., x_{0,i}, lambda_i), from x_{0,i}
    lambda_i    <- lambda_i + (x_i - x_{0,i}) / eta
    x_{0,i}^+    = x_i + eta lambda_i
    with probability p_comm (one draw per round, shared by all clients, seeded):
        x_0 = mean_i x_{0,i}^+ and every client continues from x_{0,i} = x_0,
    otherwise x_{0,i} = x_{0,i}^+ (no communication).

A fixed point has x_i = x_{0,i} = x_0, lambda_i = -grad f_i(x_0) and mean lambda_i = 0:
sum_i grad f_i(x_0) = 0, the exact minimiser.

A round that does not communicate still has the simulator's round shape: the broadcast of x_0
is charged (a sampled client that missed the last communication needs it; one that took part
since ignores it), and each client uploads an all-zero message, counted sparse: 0 bytes. A
communicating round's upload is x_{0,i}^+ - x_0 (dense) and the server's x_0 becomes x_0 + the
unweighted mean over the clients that reported. Under partial participation a client uses x_0
if a communication happened at or after its last round, else its own x_{0,i}^+.

Flat only: edges relay (no edge rule). State: server `comm` (1,), the last communicating round;
client lambda_i, x_{0,i}^+ (N, P) and `last` (N,), the round each client last trained."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config.fields import each, positive, spec
from ..registry import StateSize, declare_algorithm


def probability(v: Any) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


@declare_algorithm("fedpd", code=f"{__name__}.algorithm:FedPD",
                   summary=("FedPD-SGD (Zhang et al., IEEE TSP 2021), communicating with "
                            "probability `p_comm`"),
                   state=StateSize(fixed=1, per_client=2, fixed_bytes=8, client_bytes=8))
#                                (+ a float64 counter, the last round of each client)
@dataclass(frozen=True)
class FedPDParams:
    eta: float = spec(1.0, "penalty eta: the Lagrangian's (1/(2 eta)) ||x_i - x_0i||^2",
                      check=positive)
    p_comm: float = spec(1.0, "probability that a round communicates (x_0 = mean x_0i+)",
                         check=probability)
