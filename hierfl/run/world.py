"""The simulated system and data shared by every algorithm of a scenario, built once per run."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import seeding
from ..algorithms.base import Algorithm, Setup
from ..algorithms.registry import get
from ..config.errors import ScenarioError
from ..config.limits import guard_resources
from ..config.schema import AlgorithmEntry, Scenario
from ..data import FederatedData, load_data
from ..exec.device import resolve as resolve_device
from ..models.functional import Model
from ..models.registry import scenario_model
from ..topology.graph import Topology, build_topology


@dataclass
class World:
    """The simulated system and data shared by every algorithm of a scenario."""

    topo: Topology
    data: FederatedData
    model: Model
    w0: torch.Tensor
    device: str = "cpu"     # where the batched executor trains (train.executor.device, resolved)


def build_world(sc: Scenario, graph=None) -> World:
    tfile = sc.topology_file
    topo = Topology.from_graph(graph, tfile) if graph is not None else \
        build_topology(sc.topology, sc.seed, tfile)
    tiers = max(topo.depth[c] for c in topo.clients) - 1          # aggregator tiers
    for i, entry in enumerate(sc.algorithms):
        rounds = entry.tier_rounds
        if rounds is not None and len(rounds) != tiers:
            raise ScenarioError.one(sc.file, f"algorithms[{i}].tier_rounds", list(rounds),
                                    f"one entry per aggregator tier, from the top: this "
                                    f"topology has {tiers}")
    device = resolve_device(sc.train.executor.device, sc.file)   # cuda without CUDA: exit 2
    data = load_data(sc, topo.n_clients)
    model = scenario_model(sc.file, sc.model, data)
    guard_resources(sc, topo.n_clients, topo.n_nodes - topo.n_clients, data.dim,
                    data.out_dim, len(data.x), model.n_params)  # before the states are allocated
    w0 = model.init(seeding.torch_gen(sc.seed, "model-init"), zeros=sc.model.init == "zeros")
    return World(topo, data, model, w0, device.type)


def make_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World) -> Algorithm:
    cls = get(entry.name)
    setup = Setup(world.model, world.topo.n_clients,
                  torch.from_numpy(world.data.counts.astype(np.float64)), entry.local, sc.seed,
                  world.topo.n_edges)
    algo = cls(entry.params, setup)
    algo.init(world.w0)
    return algo
