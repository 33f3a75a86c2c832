"""IFCA, the Iterative Federated Clustering Algorithm: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ... import seeding
from ...learn.batches import Batch
from ...learn.solver import SolveResult, TermsProgram
from ...learn.solver import State as Steps
from ..base import Algorithm, RoundCtx, State, Upload, set_rows, stack_start
from . import IFCAParams


@dataclass(frozen=True)
class ServerState:
    models: torch.Tensor        # (k, P) theta_1..theta_k
    rounds: torch.Tensor        # () rounds aggregated so far (the model's dtype, as below)


@dataclass(frozen=True)
class ClientState:
    cluster: torch.Tensor       # (N,) each client's last cluster, -1 before it chose (small
                                # integers in the model's dtype, like every State tensor)


@dataclass(frozen=True)
class ChooseProgram(TermsProgram):
    """Local SGD from the best of k models: state (w, j) with j the chosen cluster (as a float
    per client); `prepare` evaluates the k losses on the full local data."""

    models: torch.Tensor | None = None      # (k, P), shared by every client
    prepare_evals: float = 1.0              # k forward passes = k/3 gradient evaluations

    def init(self) -> Steps:
        return (self.start.clone(), self.start.new_zeros(self.start.shape[0]))

    def prepare(self, s: Steps, full: Batch) -> Steps:  # type: ignore[override]
        assert self.models is not None
        c = s[0].shape[0]
        losses = torch.stack([self.model.loss(m.expand(c, -1), full.x, full.y, full.m)
                              for m in self.models])            # (k, C)
        best = losses.argmin(0)                                 # the first minimum
        return (self.models.index_select(0, best), best.to(s[0].dtype))

    def step(self, s: Steps, batch: Batch, lr: float) -> Steps:
        (w,) = super().step((s[0],), batch, lr)
        return (w, s[1])

    def run_steps(self, s: Steps, span: Batch, lr: float) -> Steps | None:
        out = super().run_steps((s[0],), span, lr)
        return None if out is None else (out[0], s[1])

    def select(self, sel: torch.Tensor) -> "ChooseProgram":
        """Every client's rows; the k models are shared, not per-client rows."""
        rows = TermsProgram.select(replace(self, models=None), sel)
        return replace(rows, models=self.models)


class IFCA(Algorithm):
    name = "ifca"
    p: IFCAParams

    def init_state(self, w0: torch.Tensor) -> State:
        models = [w0.clone()] + [
            self.setup.model.init(seeding.torch_gen(self.setup.seed, "ifca-init", j)).to(w0.dtype)
            for j in range(1, self.p.clusters)]
        cluster = torch.full((self.setup.n_clients,), -1.0, dtype=w0.dtype)
        return State(w0.clone(), ServerState(torch.stack(models), w0.new_zeros(())),
                     ClientState(cluster))

    def _fixed(self, state: State) -> bool:
        """Identities fixed and one model sent (downlink: chosen, after the first round)."""
        return self.p.downlink == "chosen" and int(state.server.rounds) > 0

    def _known(self, state: State, clients: torch.Tensor) -> torch.Tensor:
        """Each client's last cluster, the global model's for a client never seen."""
        last = state.clients.cluster.index_select(0, clients).long()
        return torch.where(last >= 0, last, self._largest(state))

    def broadcast(self, state: State) -> tuple[torch.Tensor, ...]:
        if self._fixed(state):
            return (state.w,)
        return tuple(state.server.models)

    def personal(self, state: State) -> torch.Tensor:
        everyone = torch.arange(self.setup.n_clients)
        return state.server.models.index_select(0, self._known(state, everyone))

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        models = state.server.models
        if self._fixed(state):
            return TermsProgram(self.setup.model,
                                models.index_select(0, self._known(state, clients)))
        return ChooseProgram(self.setup.model, stack_start(models[0], len(clients)),
                             models=models, prepare_evals=len(models) / 3.0)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        x = res.state[0]
        chosen = self._known(state, clients) if self._fixed(state) else res.state[1].long()
        table = set_rows(state.clients.cluster, clients, chosen.to(x.dtype))
        return (replace(state, clients=ClientState(table)),
                Upload((x, chosen.to(x.dtype).unsqueeze(1)), header=1))

    def upload_reference(self, clients: torch.Tensor, start: torch.Tensor,
                         up: Upload) -> torch.Tensor:
        """compress.up: each client's model is coded against its cluster's model, which it
        started from (not the global model)."""
        return self._now().server.models.index_select(0, up.tensors[-1][:, 0].long())

    def cluster_of(self, up: Upload) -> np.ndarray:
        return up.tensors[-1][:, 0].long().numpy()

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        models = state.server.models.clone()
        if len(clients):
            x, ids = up.tensors[0], up.tensors[1][:, 0].long()
            n = self.setup.counts[clients].double()
            for j in range(len(models)):
                mine = ids == j
                if bool(mine.any()):
                    models[j] = (n[mine] @ x[mine].double() / n[mine].sum()).to(models.dtype)
        server = ServerState(models, state.server.rounds + 1)
        new = replace(state, server=server)
        return replace(new, w=models[self._largest(new)].clone())

    def _largest(self, state: State) -> torch.Tensor:
        """The cluster with the most training samples among the clients of known identity."""
        cluster = state.clients.cluster.long()
        known = cluster >= 0
        size = torch.zeros(len(state.server.models), dtype=torch.float64)
        size.index_add_(0, cluster[known], self.setup.counts[known].double())
        return size.argmax()
