"""What an algorithm is: a small spec on the shared mechanism.

- `program(...)`: the local objective / local step of the selected clients (a LocalProgram, run
  by an executor that never knows which algorithm it runs);
- `finish(...)`: the client-side state change after local work, and what each client uploads;
- `aggregate(...)` (flat) or `edge_aggregate` / `cloud_aggregate` (hierarchical): the server side;
- `downlink()` / uploads: the tensors each message carries, which the byte ledger counts.

State is explicit: `init` creates `self.server` and `self.clients` (dataclasses of tensors;
client tensors are stacked, one row per client) before anything runs, so checkpoints can save
them field by field."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ..learn.solver import LocalProgram, SolveResult
from ..models.functional import Model
from ..config.schema import LocalSpec


@dataclass(frozen=True)
class Setup:
    """What every algorithm is built with."""

    model: Model
    n_clients: int
    counts: torch.Tensor        # (N,) training samples per client, float
    local: LocalSpec
    seed: int
    n_edges: int = 1


@dataclass(frozen=True)
class RoundCtx:
    round: int                  # cloud round, from 1
    edge_round: int             # 0..R-1
    lr: float                   # this round's local learning rate
    steps: torch.Tensor         # (C,) planned local steps of the selected clients (K)


@dataclass
class Upload:
    """What the selected clients send: a tuple of (C, P) tensors (the ledger counts each row)."""

    tensors: tuple[torch.Tensor, ...]
    encoding: str = "dense"     # how the ledger counts them: dense | sparse | auto (sim/messages)


@dataclass
class NoState:
    pass


class Algorithm:
    """Base: FedAvg's server and no client state; subclasses override what differs."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = type(None)
    personalised: ClassVar[bool] = False
    hierarchical: ClassVar[bool] = False
    supports_gamma: ClassVar[bool] = True
    upload_tensors: ClassVar[int] = 1       # model-sized tensors per client upload (planning)
    linear_aggregate: ClassVar[bool] = False  # aggregate() is the n_k-weighted mean of uploads
    drops_stragglers: ClassVar[bool] = False  # stragglers.drop: auto discards their work

    def __init__(self, params: Any, setup: Setup):
        self.p = params
        self.setup = setup
        self.w = torch.zeros(0)
        self.server: Any = NoState()
        self.clients: Any = NoState()

    # ------------------------------------------------------------------ state
    def init(self, w0: torch.Tensor) -> None:
        self.w = w0.clone()

    def global_model(self) -> torch.Tensor:
        return self.w

    def personal_models(self) -> torch.Tensor | None:
        return None

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor of the algorithm's state, by stable name (checkpoints)."""
        out = {"w": self.w}
        for prefix, obj in (("server", self.server), ("clients", self.clients)):
            for f in dataclasses.fields(obj):
                v = getattr(obj, f.name)
                if isinstance(v, torch.Tensor):
                    out[f"{prefix}.{f.name}"] = v
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        self.w = tensors["w"].clone()
        for prefix, obj in (("server", self.server), ("clients", self.clients)):
            for f in dataclasses.fields(obj):
                key = f"{prefix}.{f.name}"
                if key in tensors:
                    setattr(obj, f.name, tensors[key].clone())

    # ------------------------------------------------------------------ messages
    def downlink(self) -> tuple[torch.Tensor, ...]:
        """Tensors the cloud broadcasts at the start of a round."""
        return (self.w,)

    # ------------------------------------------------------------------ client side
    def trainees(self, selected: np.ndarray) -> np.ndarray:
        """Clients that do local work in a flat round: the selected ones. An algorithm may add
        others (pFedMe's published code trains every client): those receive the model and
        compute, but upload nothing and are not aggregated."""
        return selected

    def program(self, clients: torch.Tensor, start: torch.Tensor, ctx: RoundCtx) -> LocalProgram:
        raise NotImplementedError

    def finish(self, clients: torch.Tensor, start: torch.Tensor, res: SolveResult,
               ctx: RoundCtx) -> Upload:
        return Upload((res.state[0],))

    # ------------------------------------------------------------------ server side (flat)
    def weights(self, clients: torch.Tensor) -> torch.Tensor:
        n = self.setup.counts[clients].double()
        return n / n.sum()

    def aggregate(self, clients: torch.Tensor, up: Upload, ctx: RoundCtx) -> None:
        """n_k-weighted mean of the uploaded models (FedAvg)."""
        if len(clients) == 0:
            return
        self.w = weighted_mean(up.tensors[0], self.weights(clients))

    # ------------------------------------------------------------------ edge pre-aggregation
    def partial(self, clients: torch.Tensor, up: Upload) -> tuple[tuple[torch.Tensor, ...], float]:
        """An edge's weighted partial sum of its clients' uploads (linear aggregators only)."""
        n = self.setup.counts[clients].double()
        return ((n @ up.tensors[0].double()),), float(n.sum())

    def aggregate_partials(self, parts: list[tuple[tuple[torch.Tensor, ...], float]],
                           ctx: RoundCtx) -> None:
        """Combine edges' partial sums: the same model as aggregate() over all their clients."""
        total = sum(w for _, w in parts)
        if total <= 0:
            return
        self.w = (sum(p[0] for p, _ in parts) / total).to(self.w.dtype)

    # ------------------------------------------------------------------ hierarchy
    def reporting(self, t: int, children: list[str]) -> list[str]:
        """Which of the cloud's active children upload this round (all; pFedMac-SH samples)."""
        return children

    def edge_start(self, w: torch.Tensor) -> Any:
        """An aggregator's state when it receives its parent's model."""
        return w.clone()

    def edge_model(self, es: Any) -> torch.Tensor:
        """The model an aggregator sends to its children at each of its rounds."""
        return es

    def edge_aggregate(self, es: Any, clients: torch.Tensor | None, up: Upload,
                       weights: torch.Tensor, ctx: RoundCtx) -> Any:
        """Combine the children's uploads (clients, or lower aggregators when clients is None);
        weights are the children's training-sample totals."""
        if weights.numel() == 0:
            return es
        return weighted_mean(up.tensors[0], weights / weights.sum())

    def edge_upload(self, es: Any) -> tuple[torch.Tensor, ...]:
        return (es,)

    def cloud_aggregate(self, nodes: list[str], uploads: list[tuple[torch.Tensor, ...]],
                        weights: torch.Tensor, ctx: RoundCtx) -> None:
        """Combine the uploads of the cloud's children (weights: their sample totals)."""
        if not uploads:
            return
        stacked = torch.stack([u[0] for u in uploads])
        self.w = weighted_mean(stacked, weights / weights.sum())


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_k weights_k rows_k, accumulated in float64."""
    return (weights.double() @ rows.double()).to(rows.dtype)


def stack_start(start: torch.Tensor, c: int) -> torch.Tensor:
    """A (C, P) start from a shared (P,) model or per-client rows."""
    return start.expand(c, -1).clone() if start.dim() == 1 else start.clone()
