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

import torch

from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Linear, Prox
from ..seeding import rng
from .base import Algorithm, RoundCtx, State, Upload, set_rows
from .params import FedPDParams




@dataclass(frozen=True)
class ServerState:
    comm: torch.Tensor          # (1,) the last round that communicated (0: none yet)


@dataclass(frozen=True)
class ClientState:
    lam: torch.Tensor           # (N, P) duals lambda_i
    x0: torch.Tensor            # (N, P) x_{0,i}^+ of each client's last round
    last: torch.Tensor          # (N,) the round each client last trained (0: never)


class FedPD(Algorithm):
    name = "fedpd"
    Params = FedPDParams
    upload_as_is = (0,)         # compress: x0+ - x0 is a difference already

    def init_state(self, w0: torch.Tensor) -> State:
        n = self.setup.n_clients
        return State(w0.clone(), ServerState(torch.zeros(1, dtype=torch.float64)),
                     ClientState(torch.zeros(n, w0.numel(), dtype=w0.dtype),
                                 w0.expand(n, -1).clone(), torch.zeros(n, dtype=torch.float64)))

    def communicates(self, t: int) -> bool:
        """The round's shared coin: True with probability p_comm."""
        return self.p.p_comm >= 1 or bool(rng(self.setup.seed, "fedpd-comm", t).random()
                                          < self.p.p_comm)

    def anchor(self, state: State, clients: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """x_{0,i}: the broadcast x_0 if a communication happened at or after the client's last
        round, else its own x_{0,i}^+."""
        synced = (state.server.comm >= state.clients.last.index_select(0, clients)).unsqueeze(1)
        return torch.where(synced, start, state.clients.x0.index_select(0, clients))

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        x0 = self.anchor(state, clients, start)
        terms = (Linear(state.clients.lam.index_select(0, clients)), Prox(1.0 / self.p.eta, x0))
        return TermsProgram(self.setup.model, x0.clone(), terms)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        x0, x = self.anchor(state, clients, start), res.state[0]
        lam = state.clients.lam.index_select(0, clients) + (x - x0) / self.p.eta
        x0p = x + self.p.eta * lam
        cs = ClientState(set_rows(state.clients.lam, clients, lam),
                         set_rows(state.clients.x0, clients, x0p),
                         set_rows(state.clients.last, clients,
                                  torch.full((len(clients),), float(ctx.round),
                                             dtype=torch.float64)))
        new = State(state.w, state.server, cs)
        if self.communicates(ctx.round):
            return new, Upload((x0p - start,))
        return new, Upload((torch.zeros_like(x0p),), encoding="sparse", silent=True)

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0 or not self.communicates(ctx.round):
            return state
        w = state.w.double() + up.tensors[0].double().mean(0)
        return State(w.to(state.w.dtype), ServerState(torch.full((1,), float(ctx.round),
                                                                 dtype=torch.float64)),
                     state.clients)
