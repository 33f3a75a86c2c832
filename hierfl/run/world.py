"""The simulated system and data shared by every algorithm of a scenario, built once per run."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import seeding
from ..algorithms.base import Algorithm, Setup
from ..algorithms.guard import guard as guard_plugin
from ..algorithms.registry import REGISTRY, get
from ..algorithms.state_size import check_states
from ..config.errors import ScenarioError
from ..config.schema import AlgorithmEntry, Scenario
from ..data import FederatedData, load_data
from ..exec.device import resolve as resolve_device
from ..models.functional import Model
from ..models.registry import scenario_model
from ..scenario.checks import availability_trace, guard, scenario_topology
from ..topology.graph import Topology


@dataclass
class World:
    """The simulated system and data shared by every algorithm of a scenario."""

    topo: Topology
    data: FederatedData
    model: Model
    w0: torch.Tensor
    device: str = "cpu"     # where the batched executor trains (train.executor.device, resolved)
    availability: dict | None = None    # availability trace: client -> (starts, ends)
    availability_file: str | None = None


def build_world(sc: Scenario, graph=None) -> World:
    topo = scenario_topology(sc, graph)
    device = resolve_device(sc.train.executor.device, sc.file)   # cuda without CUDA: exit 2
    data = load_data(sc, topo.n_clients, topo.edge_of)
    model = scenario_model(sc.file, sc.model, data)
    guard(sc, topo, data, model.n_params)                 # before the states are allocated
    stateful_model_fits(sc, model)
    w0 = model.init(seeding.torch_gen(sc.seed, "model-init"), zeros=sc.model.init == "zeros")
    avail, avail_file = availability_trace(sc, topo)
    world = World(topo, data, model, w0, device.type, avail, avail_file)
    guard_state(sc, world)                      # before any algorithm allocates its state
    return world


ASYNC = ("fedasync", "fedbuff")


def stateful_model_fits(sc: Scenario, model: Model) -> None:
    """Refuse (exit 2) a model with per-client state (BatchNorm statistics, dropout) where the
    algorithm's local program cannot carry it (not a plain TermsProgram: the same algorithms
    that take no optimizer), and BatchNorm statistics averaged under asynchronous rounds
    (no rule for mixing them is defined)."""
    if not getattr(model, "stateful", False):
        return
    what = "BatchNorm running statistics" if model.n_buffers else "dropout"
    for i, entry in enumerate(sc.algorithms):
        caps = REGISTRY.caps(entry.name)
        if not caps.optimizers or not caps.model_state:
            why = caps.optimizers_why if not caps.optimizers else \
                "its program runs the model outside a client's steps"
            raise ScenarioError.one(sc.file, f"algorithms[{i}].name", entry.name,
                                    f"model {sc.model.name!r} has {what} (per-client state "
                                    f"each local step carries): {entry.name} cannot carry it, "
                                    f"{why}; use a model without them (GroupNorm or no norm: "
                                    "resnet norm: group, cnn batch_norm: false; dropout 0)")
        if entry.local.solver is not None:
            raise ScenarioError.one(sc.file, f"algorithms[{i}].local.solver", entry.local.solver,
                                    f"model {sc.model.name!r} has {what}: a local training "
                                    "plugin runs its own copy of the module, whose statistics "
                                    "and masks would not be the client's (use the built-in "
                                    "solver, or a model without them)")
        priv = getattr(entry, "privacy", None)
        if priv is not None and priv.kind == "sample_level":
            raise ScenarioError.one(sc.file, f"algorithms[{i}].privacy.kind", "sample_level",
                                    f"model {sc.model.name!r} has {what}: a sample's gradient "
                                    "then depends on the other rows of its batch (BatchNorm) "
                                    "or on shared masks, so per-sample clipping bounds nothing; "
                                    "use GroupNorm or no norm and dropout 0 with DP-SGD")
        policies = (entry.round_policy(sc.train).policy, sc.train.edge_round.policy)
        if model.n_buffers and not caps.local_norm and any(p in ASYNC for p in policies):
            raise ScenarioError.one(sc.file, f"algorithms[{i}].name", entry.name,
                                    f"model {sc.model.name!r} has BatchNorm running statistics:"
                                    " averaging them under asynchronous rounds (fedasync, "
                                    "fedbuff) is not defined; use GroupNorm or no norm (resnet "
                                    "norm: group, cnn batch_norm: false)")


def make_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World) -> Algorithm:
    cls = get(entry.name)
    setup = Setup(world.model, world.topo.n_clients,
                  torch.from_numpy(world.data.counts.astype(np.float64)), entry.local, sc.seed,
                  world.topo.n_edges)
    algo = cls(entry.params, setup)
    if not REGISTRY.declaration(entry.name).builtin:    # a plugin's hooks: errors named
        guard_plugin(algo, sc.file, _entry_key(sc, entry), entry.label)
    algo.init(world.w0)
    return algo


def state_bytes(sc: Scenario, entry: AlgorithmEntry, world: World) -> float | None:
    """Bytes of the tensors an algorithm keeps between rounds (State.tensors: the model, the
    server's and every client's), for this scenario's clients, found without allocating them:
    the algorithm is initialised for 1 and for 2 clients, and the difference is one client's.
    None where it cannot be initialised that small (a plugin's): not guarded."""
    cls = get(entry.name)
    sizes = []
    for n in (1, 2):
        setup = Setup(world.model, n, torch.ones(n, dtype=torch.float64), entry.local, sc.seed,
                      world.topo.n_edges)
        try:
            state = cls(entry.params, setup).init(world.w0)
        except Exception:       # noqa: BLE001 - its own run reports what is wrong with it
            return None
        seen: dict[int, int] = {}
        for t in state.tensors().values():
            seen[t.data_ptr()] = max(seen.get(t.data_ptr(), 0), t.numel() * t.element_size())
        sizes.append(sum(seen.values()))
    return sizes[0] + (world.topo.n_clients - 1) * max(sizes[1] - sizes[0], 0)


def guard_state(sc: Scenario, world: World) -> None:
    """Refuse (exit 2), before any state is allocated, an algorithm whose state exceeds
    train.max_state_gb (default: half of this machine's memory), naming its size."""
    stats = 4 * int(getattr(world.model, "n_buffers", 0)) * (world.topo.n_clients + 1)

    def size(entry: AlgorithmEntry) -> float | None:      # + BatchNorm statistics per client
        b = state_bytes(sc, entry, world)
        return None if b is None else b + stats
    check_states(sc, world.topo.n_clients, world.model.n_params, size)


def _entry_key(sc: Scenario, entry: AlgorithmEntry) -> str:
    """algorithms[i].name of `entry` in the scenario."""
    i = next((j for j, e in enumerate(sc.algorithms) if e is entry), None)
    if i is None and entry in sc.algorithms:
        i = sc.algorithms.index(entry)
    return "algorithms.name" if i is None else f"algorithms[{i}].name"
