"""FedNova (Wang, Liu, Liang, Joshi, Poor, *Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization*, NeurIPS 2020, arXiv 2007.07481): normalised averaging.

Client i in round t takes tau_i local steps from x_t (tau_i: the steps it actually did, which
stragglers, deadlines and gamma stops make unequal) of (S)GD with step size eta, so that
x_t - x_i = eta G_i a_i, G_i its stacked gradients and a_i (tau_i,) the weights each gradient
carries in the sum (eq. 4). Its normalised update d_i = (x_t - x_i) / ||a_i||_1 (eq. 6 with eta
folded into d_i), and

    plain SGD:              ||a_i||_1 = tau_i                          (a_i = [1, ..., 1])
    SGD, momentum rho:      ||a_i||_1 = sum_{j=1}^{tau_i} (1 - rho^j) / (1 - rho)

(Sec. 5 / App. "FedNova with momentum": a_i = [1 - rho^{tau_i}, ..., 1 - rho] / (1 - rho), the
buffer starting at the first gradient, as torch.optim.SGD's; the published code accumulates the
same counter c <- rho c + 1, ||a_i||_1 = sum c). Server, S_t the clients whose uploads arrived
with tau_i > 0, p_i = n_i / sum_{j in S_t} n_j:

    tau_eff = sum_{i in S_t} p_i ||a_i||_1
    x_{t+1} = x_t - tau_eff sum_{i in S_t} p_i d_i

With equal tau_i and plain SGD this is FedAvg's sum p_i x_i. A client with tau_i = 0 carries
no gradient: it gets zero weight (p renormalised over the others; none left: x unchanged).
train.local.optimizer: plain SGD or sgd with `momentum` (no dampening, Nesterov, weight decay:
their a_i is not derived here; adam and adamw have none).

State: the model only. Messages: x_t down; x_i and the 4-byte ||a_i||_1 up (a header: the
server forms d_i, so 4 P + 4 bytes, the same as sending d_i and ||a_i||_1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..registry import Capabilities, StateSize, declare_algorithm


def optimizer_check(spec: Any) -> tuple[str, str] | None:
    """The first key of train.local.optimizer whose a_i FedNova does not know, with why."""
    if spec.name != "sgd":
        return "name", (f"{spec.name} has no normalising vector a_i (FedNova's eq. 4 holds for "
                        "SGD and SGD with momentum): use sgd")
    for key in ("dampening", "nesterov", "weight_decay"):
        if spec.value(key):
            return key, (f"sgd's {key} changes the weights a_i of the local gradients; FedNova "
                         "here derives a_i for plain SGD and momentum only")
    if spec.value("momentum") and getattr(spec, "state", "reset") == "keep":
        return "state", ("a_i of momentum SGD assumes the buffer starts from zero each round "
                         "(state: reset)")
    return None


@declare_algorithm("fednova", code=f"{__name__}.algorithm:FedNova",
                   summary="FedNova (Wang et al., NeurIPS 2020): normalised averaging of "
                           "heterogeneous local steps",
                   caps=Capabilities(upload_tensors=1, optimizer_check=optimizer_check,
                                     optimizers_why="plain SGD or sgd with momentum only (the "
                                     "normalising vector a_i is derived for those)"),
                   state=StateSize(fixed=1))
@dataclass(frozen=True)
class FedNovaParams:
    pass
