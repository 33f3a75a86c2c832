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
import torch

from .base import Capabilities, RoundCtx, State, Upload, weighted_mean
from .params import FedAdagradParams, FedAdamParams
from .fedavg import FedAvg




@dataclass(frozen=True)
class ServerState:
    m: torch.Tensor             # (P,) first moment of the pseudo-gradient
    v: torch.Tensor             # (P,) second moment


class FedOpt(FedAvg):
    """The shared rule; subclasses give the second-moment update (`second`)."""

    name = ""                   # not itself an algorithm: fedadam, fedyogi, fedadagrad are
    Params = FedAdamParams
    caps = Capabilities(hierarchical=True)
    batch_edges = True          # FedAvg's local round from the start row: edges batch (exec/edges)

    def init_state(self, w0: torch.Tensor) -> State:
        v0 = self.p.tau ** 2 if self.p.v0 is None else self.p.v0
        return State(w0.clone(), ServerState(torch.zeros_like(w0), torch.full_like(w0, v0)))

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(self, state: State, mean: torch.Tensor) -> State:
        """The server optimiser on Delta = mean - x (float64 arithmetic)."""
        x = state.w.double()
        delta = mean.double() - x
        m = self.p.beta1 * state.server.m.double() + (1 - self.p.beta1) * delta
        v = self.second(state.server.v.double(), delta * delta)
        x = x + self.p.server_lr * m / (v.sqrt() + self.p.tau)
        dt = state.w.dtype
        return State(x.to(dt), ServerState(m.to(dt), v.to(dt)), state.clients)

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        return self.step(state, weighted_mean(up.tensors[0], self.weights(clients)))

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        if not uploads:
            return state
        stacked = torch.stack([u[0] for u in uploads])
        return self.step(state, weighted_mean(stacked, weights / weights.sum()))


class FedAdam(FedOpt):
    name = "fedadam"
    Params = FedAdamParams

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return self.p.beta2 * v + (1 - self.p.beta2) * d2


class FedYogi(FedOpt):
    name = "fedyogi"
    Params = FedAdamParams

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return v - (1 - self.p.beta2) * d2 * torch.sign(v - d2)


class FedAdagrad(FedOpt):
    name = "fedadagrad"
    Params = FedAdagradParams

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return v + d2
