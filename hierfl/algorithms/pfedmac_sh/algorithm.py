"""pFedMac-SH: sparse, hierarchical pFedMac on client -> edge -> cloud with a two-level lambda: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ... import seeding
from ...learn.envelope import EnvelopeProgram
from ...learn.solver import SolveResult
from ...learn.solver import State as Steps
from .._personal import PersonalAlgorithm, keep_personal, mix, uniform_weights
from ..base import RoundCtx, State, Upload, set_rows, stack_start, weighted_mean
from ..pfedmac.algorithm import sparsity_terms
from . import PFedMacSHParams


@dataclass(frozen=True)
class IncrementProgram(EnvelopeProgram):
    """The envelope program that also accumulates z_{k+1} = (1 - a) z_k + a theta~_k (a = eta1
    lambda), so y_K = (1 - a)^K y_0 + z_K exactly and z has the zeros the theta~_k share."""

    def init(self) -> Steps:
        x, theta = super().init()
        return (x, theta, torch.zeros_like(x))

    def step(self, s: Steps, batch, lr: float) -> Steps:
        x, theta, z = s
        x, theta = super().step((x, theta), batch, lr)
        a = lr * (self.lam if self.outer_lam is None else self.outer_lam)
        return (x, theta, (1.0 - a) * z + a * theta)


@dataclass(frozen=True)
class OwnClients:
    """client_start: own. Per client its personal model, its last y_ij (N, P) and the cloud
    round that y_ij belongs to (N,; -1: none yet)."""

    personal: torch.Tensor
    y: torch.Tensor
    round: torch.Tensor


@dataclass(frozen=True)
class EdgeState:
    """An edge during one cloud round: its x_i and the y_i it sends to its clients."""

    x: torch.Tensor
    y: torch.Tensor


class PFedMacSH(PersonalAlgorithm):
    name = "pfedmac_sh"
    p: PFedMacSHParams

    @property
    def upload_as_is(self) -> tuple[int, ...]:
        """compress: theta / increment payloads are coded as they are (sparse already)."""
        return () if self.p.upload == "y" else (0,)

    # ------------------------------------------------------------------ state
    @property
    def client_lam(self) -> float:
        return self.p.lambda1 if self.p.client_lambda == "lambda1" else self.p.lambda2

    def _mean(self, rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        w = uniform_weights(len(rows)) if self.p.weighting == "uniform" else weights / weights.sum()
        return weighted_mean(rows, w)

    def init_state(self, w0: torch.Tensor) -> State:
        state = super().init_state(w0)
        if self.p.client_start == "edge":
            return state
        n = self.setup.n_clients
        return replace(state, clients=OwnClients(state.clients.personal,
                                                 w0.expand(n, -1).clone(),
                                                 torch.full((n,), -1.0, dtype=torch.float64)))

    # ------------------------------------------------------------------ client
    def start_rows(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                   ctx: RoundCtx) -> torch.Tensor:
        """(C, P) starts of ClientUpdate: the edge's y_i; with client_start: own, from the
        second edge round of a cloud round on, a client that trained earlier in this cloud
        round continues from its own last y_ij (the slides' y_ij^{t,r+1} <- ClientUpdate(j,
        y_ij^{t,r}) read literally)."""
        y0 = stack_start(start, len(clients))
        if self.p.client_start == "edge" or ctx.edge_round == 0:
            return y0
        own = (state.clients.round[clients] == float(ctx.round)).unsqueeze(1)
        return torch.where(own, state.clients.y[clients].to(y0.dtype), y0)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        y0 = self.start_rows(state, clients, start, ctx)
        cls = IncrementProgram if self.p.upload == "increment" else EnvelopeProgram
        return cls(self.setup.model, y0, y0.clone(), self.p.lambda1, "linear", self.p.inner_steps,
                   self.p.inner_lr, sparsity_terms(self.p.sparsity), outer_lam=self.client_lam)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        y, theta = res.state[0], res.state[1]
        if self.p.client_start == "own":
            return self._keep_own(state, clients, y, theta, res.steps > 0, ctx), \
                Upload((y,), encoding=self.p.encoding)
        state = keep_personal(state, clients, theta, res.steps > 0)
        if self.p.upload == "y":
            return state, Upload((y,), encoding=self.p.encoding)
        k = res.steps.to(y.dtype).unsqueeze(1)              # the 4-byte header: steps done
        payload = theta if self.p.upload == "theta" else res.state[2]
        return state, Upload((payload, k), encoding=self.p.encoding, header=1)

    @staticmethod
    def _keep_own(state: State, clients: torch.Tensor, y: torch.Tensor, theta: torch.Tensor,
                  trained: torch.Tensor, ctx: RoundCtx) -> State:
        c, k = state.clients, clients[trained]
        return replace(state, clients=OwnClients(
            set_rows(c.personal, k, theta[trained]), set_rows(c.y, k, y[trained]),
            set_rows(c.round, k, torch.full((len(k),), float(ctx.round), dtype=torch.float64))))

    def client_models(self, y0: torch.Tensor, up: Upload, lr: float) -> torch.Tensor:
        """The edge's y_ij from what the clients sent and the y_0 it sent them."""
        if self.p.upload == "y":
            return up.tensors[0]
        payload, k = up.tensors[0].double(), up.tensors[1].double()
        keep = (1.0 - lr * self.client_lam) ** k                        # (C, 1): (1 - a)^K
        if self.p.upload == "theta":
            rows = keep * y0.double() + (1.0 - keep) * payload
        else:
            rows = keep * y0.double() + payload
        return rows.to(y0.dtype)

    # ------------------------------------------------------------------ edge
    def edge_start(self, w: torch.Tensor) -> EdgeState:
        return EdgeState(w.clone(), w.clone())

    def edge_model(self, es: EdgeState) -> torch.Tensor:
        return es.y

    def edge_aggregate(self, es: EdgeState, clients: torch.Tensor | None, up: Upload,
                       weights: torch.Tensor, ctx: RoundCtx) -> EdgeState:
        if weights.numel() == 0:
            return es
        rows = up.tensors[0] if clients is None else self.client_models(es.y, up, ctx.lr)
        y = self._mean(rows, weights)
        step = self.p.eta2 * self.p.lambda2
        x = (es.x.double() - step * (es.x.double() - y.double())).to(es.x.dtype)
        return EdgeState(x, y)

    def edge_upload(self, es: EdgeState) -> tuple[torch.Tensor, ...]:
        return (es.x,)

    # ------------------------------------------------------------------ cloud
    def reporting(self, t: int, children: list[str]) -> list[str]:
        s = self.p.edges_per_round
        if s == "all" or int(s) >= len(children):
            return children
        pick = seeding.rng(self.setup.seed, "edge-sample", t).choice(len(children), int(s),
                                                                     replace=False)
        return [children[i] for i in np.sort(pick)]

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        if not uploads:
            return state
        mean = self._mean(torch.stack([u[0] for u in uploads]), weights)
        return replace(state, w=mix(state.w, mean, self.p.beta))
