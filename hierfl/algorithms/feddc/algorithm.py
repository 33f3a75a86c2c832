"""FedDC: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Linear, Prox
from ..base import Algorithm, RoundCtx, State, Upload, set_rows, stack_start, weighted_mean
from ..feddyn.algorithm import client_alpha


@dataclass(frozen=True)
class ServerState:
    g: torch.Tensor             # (P,) sum_i (|D_i|/|D|) g_i
    hsum: torch.Tensor          # (P,) sum_i h_i as known to the server (code rule)


@dataclass(frozen=True)
class ClientState:
    h: torch.Tensor             # (N, P) local drifts h_i
    g: torch.Tensor             # (N, P) last local updates g_i


class FedDC(Algorithm):
    name = "feddc"
    upload_as_is = (1,)         # compress: the model, then dg = step - g (a difference)

    def init_state(self, w0: torch.Tensor) -> State:
        n, p = self.setup.n_clients, w0.numel()
        return State(w0.clone(), ServerState(torch.zeros_like(w0), torch.zeros_like(w0)),
                     ClientState(torch.zeros(n, p, dtype=w0.dtype),
                                 torch.zeros(n, p, dtype=w0.dtype)))

    def broadcast(self, state: State) -> tuple[torch.Tensor, ...]:
        return (state.w, state.server.g)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        dtype = state.w.dtype
        alpha = client_alpha(self.p.alpha, self.setup.counts, clients, self.p.alpha_scaling, dtype)
        k = ctx.steps.to(dtype).clamp_min(1).unsqueeze(1)
        terms = (Prox(alpha, start - state.clients.h[clients]),
                 Linear((state.clients.g[clients] - state.server.g) / (ctx.lr * k)))
        return TermsProgram(self.setup.model, stack_start(start, len(clients)), terms,
                            clip=self.p.clip)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        theta = res.state[0]
        step = theta - start
        h, g = state.clients.h, state.clients.g
        h_new = h[clients] + step
        dg = step - g[clients]
        cs = ClientState(set_rows(h, clients, h_new), set_rows(g, clients, step))
        first = theta + h_new if self.p.server_rule == "paper" else theta
        return replace(state, clients=cs), Upload((first, dg))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        first, dg = up.tensors
        counts, dtype = self.setup.counts, state.w.dtype
        p_all = (counts[clients].double() / counts.double().sum())
        g = (state.server.g.double() + p_all @ dg.double()).to(dtype)
        if self.p.server_rule == "paper":
            return State(weighted_mean(first, self.weights(clients)),
                         replace(state.server, g=g), state.clients)
        theta = first.double()
        hsum = state.server.hsum.double() + (theta - state.w.double()).sum(0)
        w = (theta.mean(0) + hsum / self.setup.n_clients).to(dtype)
        return State(w, ServerState(g, hsum.to(dtype)), state.clients)
