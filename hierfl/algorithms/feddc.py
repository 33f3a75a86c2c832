"""FedDC (Gao et al., CVPR 2022, arXiv 2203.11751): local drift decoupling and correction.

Client i keeps a drift h_i and its last local update g_i; the server keeps g = sum_i
(|D_i|/|D|) g_i over all clients. In round t the client starts from theta = w and takes K steps on

    F(theta; h_i, D_i, w) = L_i(theta) + (alpha/2) ||theta + h_i - w||^2
                            + (1/(eta K)) <theta, g_i - g>,

i.e. theta <- theta - eta grad L_i(theta) - eta alpha (theta + h_i - w) - (1/K)(g_i - g)
(terms `Prox(alpha, w - h_i)` and `Linear((g_i - g)/(eta K))`, K the planned local steps, eta the
round's learning rate). Then, with theta_i+ its result:
    h_i <- h_i + (theta_i+ - w),     g_i <- theta_i+ - w,
and the client uploads theta_i+ + h_i+ and dg_i = g_i+ - g_i (so the server can keep g).
Server (S: the clients whose uploads arrived):
    g <- g + sum_S (|D_i|/|D|) dg_i,
    w+ = sum_S |D_i| (theta_i+ + h_i+) / sum_S |D_i|                     (server_rule: paper)

Options where the published code differs from the paper (paper's choice by default):
- `alpha_scaling: code`: alpha_i = alpha / (n_i / mean n) per client;
- `server_rule: code`: w+ = mean_S(theta_i+) + mean_all(h_i); the client then uploads theta_i+
  (not theta_i+ + h_i+), and the server tracks sum_all h_i from the uploads
  (h_i changes by theta_i+ - w);
- `clip`: clip the norm of each local gradient (loss + terms) at this value (the code uses 10).

State: client h_i, g_i (N, P); server g (P,), hsum (P,) (= sum_i h_i, used by the code rule);
all start at 0. Messages: (w, g) down, two model-sized tensors up."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Linear, Prox
from .base import (Algorithm, Capabilities, RoundCtx, State, Upload, set_rows, stack_start,
                   weighted_mean)
from .feddyn import client_alpha
from .params import FedDCParams


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
    Params = FedDCParams
    caps = Capabilities(upload_tensors=2)
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
