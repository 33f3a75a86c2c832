"""What an algorithm is: explicit state and pure transitions on it (FedJAX / optax manner).

An algorithm module defines a frozen `Params` dataclass, its `State` parts (frozen dataclasses of
tensors: a server part and a client part whose tensors are stacked, one row per client) and the
transitions that differ from FedAvg's:

    init_state(w0)                                   -> State
    local(state, clients, start, ctx)                -> LocalProgram   (the local objective)
    client_update(state, clients, start, res, ctx)   -> (State, Upload)
    server_update(state, clients, up, ctx)           -> State          (flat rounds)
    cloud_update(state, uploads, weights, ctx)       -> State          (hierarchical rounds)
    broadcast(state) -> tensors sent down;  personal(state) -> personal models or None

They read `self.p` (hyperparameters) and `self.setup` (fixed facts) but never `self.state`.
A transition hands back a new State; it may write the selected rows of the (N, P) client
tables of the State it was given (that State is donated, as with jax's donate_argnums: the
driver never uses it again), so a round costs no copy of the whole client table.

`Algorithm` is also the thin driver the engine calls (`init`, `program`, `finish`, `aggregate`,
`cloud_aggregate`, `downlink`, `state_tensors`, ...): it holds the current State and applies the
transitions, so a checkpoint is the State's tensors and nothing else. The engine-facing flags
(`hierarchical`, `linear_aggregate`, ...) are derived from one declaration, `caps` (a built-in's
comes from its package's `declare_algorithm`, registry.py); an edge's
state during a cloud round (`edge_start` ... `edge_upload`) is passed in and returned."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch

from ..learn.solver import LocalProgram, SolveResult
from ..models.functional import Model
from ..config.schema import LocalSpec
from .registry import Capabilities, declared_for


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
    """What the selected clients send: a tuple of (C, P) tensors (the ledger counts each row),
    the last `header` of them small per-client headers rather than model-sized tensors."""

    tensors: tuple[torch.Tensor, ...]
    encoding: str = "dense"     # how the ledger counts them: dense | sparse | auto (sim/messages)
    header: int = 0
    silent: bool = False        # a round without communication (FedPD's): counted by `encoding`
    #                             (all-zero sparse rows: 0 bytes), never coded by compress.up


@dataclass(frozen=True)
class NoState:
    pass


@dataclass(frozen=True)
class State:
    """All an algorithm knows between rounds: the global model, the server's own tensors and
    the clients' (stacked (N, ...), one row per client of the system)."""

    w: torch.Tensor
    server: Any = NoState()
    clients: Any = NoState()

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor by stable name ("w", "server.<field>", "clients.<field>")."""
        out = {"w": self.w}
        for prefix, part in (("server", self.server), ("clients", self.clients)):
            for f in dataclasses.fields(part):
                v = getattr(part, f.name)
                if isinstance(v, torch.Tensor):
                    out[f"{prefix}.{f.name}"] = v
        return out

    def with_tensors(self, tensors: dict[str, torch.Tensor]) -> "State":
        """The same State with the tensors named in `tensors` (copies) in place of its own."""
        parts = {}
        for prefix in ("server", "clients"):
            part = getattr(self, prefix)
            kw = {f.name: tensors[f"{prefix}.{f.name}"].clone() for f in dataclasses.fields(part)
                  if f"{prefix}.{f.name}" in tensors}
            parts[prefix] = replace(part, **kw)
        return State(tensors["w"].clone(), parts["server"], parts["clients"])


class Algorithm:
    """FedAvg's transitions, no server or client state; subclasses override what differs."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = type(None)
    caps: ClassVar[Capabilities] = Capabilities()
    # derived from caps (class attributes, for the engine and the registry's readers)
    hierarchical: ClassVar[bool]
    linear_aggregate: ClassVar[bool]
    drops_stragglers: ClassVar[bool]
    supports_gamma: ClassVar[bool]
    personalised: ClassVar[bool]
    upload_tensors: ClassVar[int]

    def __init_subclass__(cls, **kw: Any) -> None:
        """A built-in's Params and caps are its declaration's (the package's __init__.py)."""
        super().__init_subclass__(**kw)
        decl = declared_for(cls)
        if decl is not None:
            cls.Params, cls.caps = decl.params, decl.facts.caps
        _derive_flags(cls)

    def __init__(self, params: Any, setup: Setup):
        self.p = params
        self.setup = setup
        self.state: State | None = None
        self.combiner: Any = None   # exec/protect.Protect.combine where an entry asks for it

    # ================================================================== pure transitions
    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone())

    def broadcast(self, state: State) -> tuple[torch.Tensor, ...]:
        """Tensors the cloud broadcasts at the start of a round."""
        return (state.w,)

    def personal(self, state: State) -> torch.Tensor | None:
        return None

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> LocalProgram:
        raise NotImplementedError

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        return state, Upload((res.state[0],))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        """n_k-weighted mean of the uploaded models (FedAvg)."""
        if len(clients) == 0:
            return state
        return replace(state, w=self.combine("cloud", up.tensors[0], self.weights(clients),
                                             state.w))

    def partials_update(self, state: State, parts: list[tuple[tuple[torch.Tensor, ...], float]],
                        ctx: RoundCtx) -> State:
        """Combine edges' partial sums: the same model as server_update over all their clients."""
        total = sum(w for _, w in parts)
        if total <= 0:
            return state
        return replace(state, w=(sum(p[0] for p, _ in parts) / total).to(state.w.dtype))

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        """Combine the uploads of the cloud's children (weights: their sample totals)."""
        if not uploads:
            return state
        stacked = torch.stack([u[0] for u in uploads])
        return replace(state, w=self.combine("cloud", stacked, weights / weights.sum(), state.w,
                                             clients=False))

    def combine(self, tier: str, rows: torch.Tensor, weights: torch.Tensor, ref: torch.Tensor,
                clients: bool = True) -> torch.Tensor:
        """The aggregate of model rows at a tier ("edge" | "cloud"): the weighted mean, or the
        entry's robust rule and privacy noise (exec/protect.py, set by the round runner as
        `combiner`) on the updates rows - ref, where ref is the model this aggregator sent
        down. `clients`: the rows are clients' uploads (False: lower aggregators')."""
        if self.combiner is None:
            return weighted_mean(rows, weights)
        return self.combiner(tier, rows, weights, ref, clients)

    # ================================================================== stateless rules
    def trainees(self, selected: np.ndarray) -> np.ndarray:
        """Clients that do local work in a flat round: the selected ones. An algorithm may add
        others (pFedMe's published code trains every client): those receive the model and
        compute, but upload nothing and are not aggregated."""
        return selected

    def round_steps(self, t: int, r: int, planned: np.ndarray) -> np.ndarray:
        """The local steps each selected client is planned to take in round (t, r), before
        stragglers and deadlines cut them: the schedule's (train.local steps / epochs) unless
        the algorithm chooses its own (ProxSkip: the steps until its seeded coin says
        communicate). The engine charges the steps actually done."""
        return planned

    def cluster_of(self, up: Upload) -> np.ndarray | None:
        """Per uploading client, the cluster it chose this round (clients.csv's `cluster`
        column, IFCA), or None (the column stays empty)."""
        return None

    def weights(self, clients: torch.Tensor) -> torch.Tensor:
        n = self.setup.counts[clients].double()
        return n / n.sum()

    def partial(self, clients: torch.Tensor, up: Upload) -> tuple[tuple[torch.Tensor, ...], float]:
        """An edge's weighted partial sum of its clients' uploads (linear aggregators only)."""
        n = self.setup.counts[clients].double()
        return ((n @ up.tensors[0].double()),), float(n.sum())

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
        return self.combine("edge", up.tensors[0], weights / weights.sum(), self.edge_model(es),
                            clients is not None)

    def edge_upload(self, es: Any) -> tuple[torch.Tensor, ...]:
        return (es,)

    # ================================================================== the driver
    def init(self, w0: torch.Tensor) -> State:
        self.state = self.init_state(w0)
        return self.state

    def _now(self) -> State:
        if self.state is None:
            raise RuntimeError(f"{self.name}: init(w0) first")
        return self.state

    def set_global(self, w: torch.Tensor) -> None:
        """Asynchronous rounds: the server's model after mixing (the rest of the State kept)."""
        self.state = replace(self._now(), w=w)

    def global_model(self) -> torch.Tensor:
        return self._now().w

    def personal_models(self) -> torch.Tensor | None:
        return self.personal(self._now())

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor of the algorithm's state, by stable name (checkpoints)."""
        return self._now().tensors()

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        self.state = self._now().with_tensors(tensors)

    def downlink(self) -> tuple[torch.Tensor, ...]:
        return self.broadcast(self._now())

    def program(self, clients: torch.Tensor, start: torch.Tensor, ctx: RoundCtx) -> LocalProgram:
        return self.local(self._now(), clients, start, ctx)

    def finish(self, clients: torch.Tensor, start: torch.Tensor, res: SolveResult,
               ctx: RoundCtx, doomed: np.ndarray | None = None) -> Upload:
        """client_update; the clients marked `doomed` (they crash before they finish their
        steps) keep the rows they had in every client table."""
        saved = {}
        if doomed is not None and doomed.any():
            gone = clients[torch.from_numpy(np.asarray(doomed, bool))]
            n = self.setup.n_clients
            saved = {k: v[gone].clone() for k, v in self._now().tensors().items()
                     if k.startswith("clients.") and v.dim() and v.shape[0] == n}
        self.state, up = self.client_update(self._now(), clients, start, res, ctx)
        if saved:
            tables = self._now().tensors()
            for k, rows in saved.items():
                tables[k][gone] = rows
        check_upload(self, up, len(clients))
        return up

    def upload_reference(self, clients: torch.Tensor, start: torch.Tensor,
                         up: Upload) -> torch.Tensor:
        """compress.up: the model each client started from ((P,) or (C, P)), which its upload
        is coded against (the receiver sent it, so holds it): the broadcast start."""
        return start

    def aggregate(self, clients: torch.Tensor, up: Upload, ctx: RoundCtx) -> None:
        self.state = self.server_update(self._now(), clients, up, ctx)

    def aggregate_partials(self, parts: list[tuple[tuple[torch.Tensor, ...], float]],
                           ctx: RoundCtx) -> None:
        self.state = self.partials_update(self._now(), parts, ctx)

    def cloud_aggregate(self, nodes: list[str], uploads: list[tuple[torch.Tensor, ...]],
                        weights: torch.Tensor, ctx: RoundCtx) -> None:
        self.state = self.cloud_update(self._now(), uploads, weights, ctx)


def _derive_flags(cls: type[Algorithm]) -> None:
    for f in dataclasses.fields(Capabilities):
        setattr(cls, f.name, getattr(cls.caps, f.name))


_derive_flags(Algorithm)


def check_upload(algo: Algorithm, up: Upload, c: int) -> None:
    """An upload holds `upload_tensors` model-sized (C, P) tensors, then `header` others: the
    planner's byte estimate (caps.upload_tensors) and what is sent cannot drift apart."""
    p = algo.global_model().numel()
    body = up.tensors[:len(up.tensors) - up.header]
    if len(body) != algo.upload_tensors or any(tuple(t.shape) != (c, p) for t in body):
        raise RuntimeError(f"{algo.name}: upload of {[tuple(t.shape) for t in up.tensors]} "
                           f"(header {up.header}) is not {algo.upload_tensors} x ({c}, {p})")


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_k weights_k rows_k, accumulated in float64."""
    return (weights.double() @ rows.double()).to(rows.dtype)


def stack_start(start: torch.Tensor, c: int) -> torch.Tensor:
    """A (C, P) start from a shared (P,) model or per-client rows."""
    return start.expand(c, -1).clone() if start.dim() == 1 else start.clone()


def set_rows(table: torch.Tensor, clients: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """A donated (N, ...) client table with the rows of `clients` replaced: written in place
    (see the module docstring), returned for the new State."""
    table[clients] = rows
    return table
