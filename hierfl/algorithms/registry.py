"""Algorithms by scenario name, each declared once next to its code (hierfl/registry.py).

A built-in algorithm is a package `hierfl/algorithms/<name>/`. Its `__init__.py` is the
torch-free declaration: the module docstring states the objective in the paper's notation, and
its Params dataclass (every key with `spec(default, doc, check=...)`) carries the decorator

    @declare_algorithm("fedprox", code="hierfl.algorithms.fedprox.algorithm:FedProx",
                       caps=Capabilities(linear_aggregate=True), state=StateSize(fixed=1))
    @dataclass(frozen=True)
    class FedProxParams: ...

`algorithm.py` holds the transitions (torch); its class takes `Params` and `caps` from the
declaration. `hierfl validate`, `hierfl docs` and the generated reference read declarations and
never import torch; `REGISTRY[name]` imports the class. A plugin registers a class with
`hierfl.register_algorithm(cls)` (its Params and caps on the class), or declares it lazily with
`declare_algorithm` like the built-ins."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ..config.fields import all_of, at_most, each, positive, spec
from ..registry import Declaration, Registry, forward_to_code

if TYPE_CHECKING:
    from .base import Algorithm


@dataclass(frozen=True)
class Capabilities:
    """What the engine may assume of an algorithm (one declaration per algorithm)."""

    hierarchical: bool = False      # edge rounds inside each cloud round (edge_* transitions);
    #                                 its Params then extend EdgeRounds (the schedule's keys)
    linear_aggregate: bool = False  # server_update is the n_k-weighted mean of the uploads
    drops_stragglers: bool = False  # stragglers.drop: auto discards their work
    supports_gamma: bool = True     # the local program has one objective (gamma stops)
    personalised: bool = False      # personal(state) gives one model per client
    upload_tensors: int = 1         # model-sized tensors per client upload (planning, checked)
    asynchronous: bool = False      # train.round fedasync / fedbuff: the upload is the client's
    #                                 model, the server step a weighted mean (no other state)
    async_edges: bool = False       # train.edge_round fedasync / fedbuff: the edge rule is a
    #                                 mean of client models (then the edge's own step)
    codes_down: bool = True         # compress.down codes the model the clients start from
    #                                 (False: they start from models of their own choice, IFCA)
    optimizers: bool = True         # train.local.optimizer applies: the local program is a
    #                                 plain TermsProgram (learn/solver.py) whose steps may be
    #                                 any optimizer's; False: plain SGD only (say why below)
    optimizers_why: str = "its local program is not one objective's gradient steps"
    local_norm: bool = False        # a stateful model's running statistics stay with each
    #                                 client (FedBN), not averaged into the server's (exec/carry)
    model_state: bool = True        # its program carries a stateful model's per-client
    #                                 statistics and dropout streams (needs optimizers too);
    #                                 False: such models are refused (MOON's extra passes)
    optimizer_check: Callable[[Any], tuple[str, str] | None] | None = None
    #                                 optimizers=True but not every one: (key, why) of the
    #                                 first key of a train.local.optimizer (config.schema
    #                                 OptimizerSpec) it cannot take ("name" for the optimizer
    #                                 itself), None when it takes it (FedNova: sgd, momentum)
    robust: bool = False            # its aggregations are weighted means of the model uploads
    #                                 through Algorithm.combine (base.py), so an entry's
    #                                 privacy:, aggregate: and secure_aggregation: apply
    local_train: bool = False       # train.local.solver applies: the local program is plain
    #                                 SGD on F_k (a TermsProgram without terms), which a local
    #                                 training plugin may replace (learn/plugin_program.py)


# the Moreau-envelope algorithms (pFedMe, pFedMac, pFedMac-SH): one personal model per client,
# found by inner steps per outer step, so no single objective (gamma) and no optimizer of ours
ENVELOPE = Capabilities(supports_gamma=False, personalised=True, optimizers=False,
                        optimizers_why="its local program is the Moreau-envelope program (inner "
                        "steps per outer step)")


@dataclass(frozen=True)
class EdgeRounds:
    """The schedule of a hierarchical algorithm (declared here once; its Params extend it)."""

    edge_rounds: int = spec(1, "edge aggregations per cloud round (HierFAVG's kappa2, "
                            "pFedMac-SH's R)", check=all_of(positive, at_most(1e5)))


@dataclass(frozen=True)
class TierRounds(EdgeRounds):
    """EdgeRounds for trees deeper than client -> edge -> cloud."""

    tier_rounds: list[int] | None = spec(
        None, "deeper trees: rounds per aggregator tier, from the top (overrides edge_rounds)",
        check=each(positive))


@dataclass(frozen=True)
class StateSize:
    """The bytes of an algorithm's state (State.tensors: the model, the server's and every
    client's tensors) for N clients and P float32 parameters: 4 P (fixed + N per_client) +
    fixed_bytes + N client_bytes. `hierfl validate` refuses a state over train.max_state_gb
    with it; the tests check it against the state a run initialises."""

    fixed: int = 1              # model-sized float32 tensors kept once (the global model, ...)
    per_client: int = 0         # model-sized float32 tensors per client
    fixed_bytes: int = 0        # other bytes kept once
    client_bytes: int = 0       # other bytes per client

    def bytes(self, n_clients: int, n_params: int) -> int:
        return 4 * n_params * self.fixed + self.fixed_bytes + \
            n_clients * (4 * n_params * self.per_client + self.client_bytes)


@dataclass(frozen=True)
class AlgorithmFacts:
    caps: Capabilities
    state: StateSize | Callable[[Any], StateSize] | None = None   # None: measured (a plugin's)

    def state_size(self, params: Any) -> StateSize | None:
        return self.state(params) if callable(self.state) else self.state


class Info(NamedTuple):
    """What the loader needs of an algorithm, known without importing it."""

    Params: type
    hierarchical: bool
    supports_gamma: bool
    personalised: bool = False
    codes_down: bool = True
    optimizers: bool = True
    optimizers_why: str = ""
    optimizer_check: Callable[[Any], tuple[str, str] | None] | None = None


class AlgorithmRegistry(Registry):
    def info(self, name: str) -> Info:
        """Params and flags of `name` (KeyError when unknown), importing no code."""
        decl = self.declaration(name)
        caps = decl.facts.caps
        return Info(decl.params, caps.hierarchical, caps.supports_gamma, caps.personalised,
                    caps.codes_down, caps.optimizers, caps.optimizers_why,
                    caps.optimizer_check)

    def caps(self, name: str) -> Capabilities:
        return self.declaration(name).facts.caps


def _describe(cls: Any) -> dict[str, Any]:
    return {"params": cls.Params, "facts": AlgorithmFacts(cls.caps),
            "summary": _first_line(cls.__doc__ or "")}


REGISTRY = AlgorithmRegistry("algorithm", __package__, describe=_describe)
ALGORITHMS = REGISTRY


def _first_line(doc: str) -> str:
    return doc.strip().split("\n")[0].strip()


def _check_params(name: str, params: Any, caps: Capabilities) -> None:
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise TypeError(f"algorithm {name!r}: its Params must be a dataclass of its "
                        "hyperparameters (an empty @dataclass(frozen=True) class when it has "
                        "none)")
    if caps.hierarchical != issubclass(params, EdgeRounds):
        raise TypeError(f"algorithm {name!r}: a hierarchical algorithm's Params extend "
                        "hierfl.algorithms.registry.EdgeRounds (or TierRounds), a flat one's "
                        "do not")


def declare_algorithm(name: str, *, code: str, caps: Capabilities = Capabilities(),
                      state: StateSize | Callable[[Any], StateSize] | None = None,
                      summary: str = "") -> Callable[[type], type]:
    """Declare algorithm `name` on its Params dataclass, without importing its class:
    `code` is "module:Class" (imported when the algorithm first runs)."""
    def deco(params: type) -> type:
        _check_params(name, params, caps)
        module = params.__module__
        doc = summary or _first_line(getattr(sys.modules.get(module), "__doc__", "") or "")
        REGISTRY.declare(Declaration("algorithm", name, code, params,
                                     AlgorithmFacts(caps, state), doc, module))
        forward_to_code(module, code)
        return params
    return deco



def declared_for(cls: type) -> Declaration | None:
    """The declaration whose code is class `cls` (a built-in's), or None."""
    name = cls.__dict__.get("name", "")
    decl = REGISTRY.declared(name) if isinstance(name, str) and name else None
    if decl is not None and decl.code == f"{cls.__module__}:{cls.__qualname__}":
        return decl
    return None


def register_algorithm(cls: "type[Algorithm]") -> "type[Algorithm]":
    """Make `cls` (an Algorithm subclass with a `name` and a frozen dataclass `Params`) the
    algorithm of `algorithms: [{name: <cls.name>, ...}]`. Usable as a class decorator; registering
    the same class again is a no-op, another class under a taken name is an error."""
    from .base import Algorithm     # torch: only a class given here needs it

    if not (isinstance(cls, type) and issubclass(cls, Algorithm)) or cls is Algorithm:
        raise TypeError(f"register_algorithm takes a subclass of hierfl.algorithms.base."
                        f"Algorithm, not {cls!r}")
    name = cls.__dict__.get("name", "")
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute name = '<scenario name>'")
    _check_params(name, cls.Params, cls.caps)
    if declared_for(cls) is None:
        REGISTRY[name] = cls
    return cls


def get(name: str) -> "type[Algorithm]":
    return REGISTRY[name]


def predicted_bytes(name: str, params: Any, n_clients: int, n_params: int) -> int | None:
    """Bytes of `name`'s state for n_clients x n_params (float32 models); None: not known
    without building the algorithm (a plugin's that declares no StateSize)."""
    size = REGISTRY.declaration(name).facts.state_size(params)
    return None if size is None else size.bytes(n_clients, n_params)
