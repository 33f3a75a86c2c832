"""MOON: the transitions and the local program (torch). The objective, its keys and its
declaration: the package's __init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from ...learn.batches import Batch
from ...learn.solver import SolveResult, TermsProgram
from ...learn.solver import State as Steps
from ...models.aliases import call
from ..base import Algorithm, RoundCtx, State, Upload, stack_start


@dataclass(frozen=True)
class ClientState:
    prev: torch.Tensor          # (N, P) each client's local model of its last participation


def last_linear(module: nn.Module) -> nn.Linear:
    found = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if not found:
        raise ValueError(f"MOON needs a model with an nn.Linear output layer (its input is the "
                         f"representation z); {type(module).__name__} has none")
    return found[-1]


def representation(model, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
    """z = the input of the output layer for C clients, (C, B, h) (differentiable in w), or None
    where it does not depend on w (a one-layer stacked model: z = x)."""
    module = getattr(model, "module", None)
    if module is None:                                   # a stacked model (functional.Model)
        parts = model.unflatten(w)
        if len(parts) == 1:
            return None
        h = x.to(w.dtype)
        for wt, b in parts[:-1]:
            h = torch.bmm(h, wt.transpose(1, 2))
            h = torch.relu(h if b is None else h + b.unsqueeze(1))
        return h
    head = last_linear(module)
    seen: list[torch.Tensor] = []
    hook = head.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        out = []
        for k in range(w.shape[0]):
            seen.clear()
            xk = x[k].reshape(x.shape[1], *model.input_shape)
            call(module, model.unflatten(w[k]), model.aliases, (xk,))
            out.append(seen[-1].reshape(x.shape[1], -1))
        return torch.stack(out)
    finally:
        hook.remove()


def contrastive(z: torch.Tensor, z_glob: torch.Tensor, z_prev: torch.Tensor,
                temperature: float) -> torch.Tensor:
    """l_con per sample, (C, B): cross-entropy of [sim(z, z_glob), sim(z, z_prev)] / T against
    the first (the published code's form)."""
    pos = nn.functional.cosine_similarity(z, z_glob, dim=-1)
    neg = nn.functional.cosine_similarity(z, z_prev, dim=-1)
    logits = torch.stack([pos, neg], -1) / temperature
    return -torch.log_softmax(logits, -1)[..., 0]


@dataclass(frozen=True)
class MoonProgram(TermsProgram):
    """(S)GD on F_k + mu l_con from `start` (the received global model, also z_glob's), with
    `prev` (C, P) the clients' previous local models. One step at a time (no fused steps);
    train.local.optimizer applies (TermsProgram's step on this gradient)."""

    prev: torch.Tensor | None = None
    mu: float = 1.0
    temperature: float = 0.5
    optimizer_steps = True          # exec/round.py: its step is TermsProgram's

    def contrastive_grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor | None:
        """grad_w sum_b m_b l_con(x_b) per client, (C, P); None where it is zero."""
        with torch.no_grad():
            z_glob = representation(self.model, self.start, b.x)
            if z_glob is None:
                return None
            z_prev = representation(self.model, self.prev, b.x)
        with torch.enable_grad():
            wl = w.detach().requires_grad_(True)
            z = representation(self.model, wl, b.x)
            loss = (contrastive(z, z_glob, z_prev, self.temperature) * b.m.to(z.dtype)).sum()
            (g,) = torch.autograd.grad(loss, wl)
        return g

    def _grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor:
        g = super()._grad(w, b)
        con = self.contrastive_grad(w, b)
        return g if con is None else g + self.mu * con

    def run_steps(self, s: Steps, span: Batch, lr: float) -> Steps | None:
        return None


class Moon(Algorithm):
    name = "moon"

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), clients=ClientState(w0.expand(self.setup.n_clients, -1).clone()))

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> MoonProgram:
        return MoonProgram(self.setup.model, stack_start(start, len(clients)),
                           grad_evals_per_step=2,
                           prev=state.clients.prev.index_select(0, clients),
                           mu=self.p.mu, temperature=self.p.temperature)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        w = res.state[0]
        table = state.clients.prev
        trained = (res.steps > 0).unsqueeze(1)
        table.index_copy_(0, clients, torch.where(trained, w, table.index_select(0, clients)))
        return replace(state, clients=ClientState(table)), Upload((w,))
