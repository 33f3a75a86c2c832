"""FedOpt (Reddi, Charles, Zaheer, Garrett, Rush, Konecny, Kumar, McMahan, *Adaptive Federated
Optimization*, ICLR 2021, arXiv 2003.00295), Algorithm 2: FedAdam, FedYogi, FedAdagrad.

Client k in round t: K (S)GD steps on F_k from x_t (FedAvg's local work), x_k. Server, S_t the
clients whose uploads arrived, with the pseudo-gradient

    Delta_t = sum_{k in S_t} n_k (x_k - x_t) / sum_{k in S_t} n_k     (n_k-weighted, as FedAvg)
    m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
    v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2                          (fedadam)
    v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)      (fedyogi)
    v_t = v_{t-1} + Delta_t^2                                            (fedadagrad)
    x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)

elementwise, without bias correction; m_{-1} = 0, v_{-1} = v0 (default tau^2, the paper's
choice). With beta1 = 0, tau = 0 and v0 so large that v stays v0, x_{t+1} = x_t +
(eta / sqrt(v0)) Delta_t: eta / sqrt(v0) = 1 is FedAvg.

Edge rule (`edge_rounds`, as HierFAVG): edges average their clients' models n_k-weighted for
`edge_rounds` edge rounds; the cloud applies the optimiser to Delta = the sample-weighted mean
of its children's models minus x_t. With one edge round this is the flat rule above.

State: server m, v (P,). Messages: x_t down, x_k up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config.fields import FieldError, non_negative, positive, spec
from ..registry import Capabilities, StateSize, TierRounds, declare_algorithm


# the three share the schedule and the state: server m, v and the model
FEDOPT = {"caps": Capabilities(hierarchical=True, local_train=True, robust=True), "state": StateSize(fixed=3)}


def momentum(v: Any) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (1 keeps m at 0: the model never moves)"


def second_moment(v: Any) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (1 keeps v at v0: the second moment " \
        "never moves)"


@declare_algorithm("fedadagrad", code=f"{__name__}.algorithm:FedAdagrad",
                   summary="FedAdagrad: FedOpt with Adagrad's server step",
                   **FEDOPT)
@dataclass(frozen=True)
class FedAdagradParams(TierRounds):
    server_lr: float = spec(0.1, "server step size eta", check=positive)
    beta1: float = spec(0.9, "momentum of the pseudo-gradient m, in [0, 1)",
                        check=momentum)
    tau: float = spec(1e-3, "adaptivity tau: x += eta m / (sqrt(v) + tau); > 0 (0 only with "
                      "v0 > 0)", check=non_negative)
    v0: float | None = spec(None, "initial v (default tau^2, the paper's)", check=non_negative)

    def __post_init__(self) -> None:
        if self.tau == 0 and not self.v0:
            raise FieldError("tau", "must be > 0 (with tau 0 and v0 unset, tau^2, or 0, a "
                             "coordinate whose pseudo-gradient is 0 gives m / (sqrt(v) + tau) "
                             "= 0 / 0: NaN parameters); tau 0 needs v0 > 0")


@declare_algorithm("fedadam", code=f"{__name__}.algorithm:FedAdam",
                   summary="FedAdam: FedOpt (Reddi et al., ICLR 2021) with Adam's server step",
                   **FEDOPT)
@declare_algorithm("fedyogi", code=f"{__name__}.algorithm:FedYogi",
                   summary="FedYogi: FedOpt with Yogi's server step",
                   **FEDOPT)
@dataclass(frozen=True)
class FedAdamParams(FedAdagradParams):
    beta2: float = spec(0.99, "decay of the second moment v, in [0, 1)", check=second_moment)
