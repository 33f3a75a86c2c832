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

import torch

from ..learn.solver import LocalProgram, SolveResult
from ..models.functional import Model
from ..scenario.schema import LocalSpec


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

    # ------------------------------------------------------------------ hierarchy
    def edge_start(self, w: torch.Tensor) -> Any:
        return w.clone()

    def edge_model(self, es: Any) -> torch.Tensor:
        return es

    def edge_aggregate(self, es: Any, clients: torch.Tensor, up: Upload, ctx: RoundCtx) -> Any:
        if len(clients) == 0:
            return es
        return weighted_mean(up.tensors[0], self.weights(clients))

    def edge_upload(self, es: Any) -> tuple[torch.Tensor, ...]:
        return (es,)

    def cloud_aggregate(self, edge_ids: list[int], uploads: list[tuple[torch.Tensor, ...]],
                        weights: torch.Tensor, ctx: RoundCtx) -> None:
        if not uploads:
            return
        stacked = torch.stack([u[0] for u in uploads])
        self.w = weighted_mean(stacked, weights / weights.sum())


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_k weights_k rows_k, accumulated in float64."""
    return (weights.double() @ rows.double()).to(rows.dtype)


def rows_of(t: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    return t[clients]


def stack_start(start: torch.Tensor, c: int) -> torch.Tensor:
    """A (C, P) start from a shared (P,) model or per-client rows."""
    return start.expand(c, -1).clone() if start.dim() == 1 else start.clone()
