"""FedPD: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Linear, Prox
from ...seeding import rng
from ..base import Algorithm, RoundCtx, State, Upload, set_rows




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
