"""The simulated system and data shared by every algorithm of a scenario, built once per run."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import seeding
from ..algorithms.base import Algorithm, Setup
from ..algorithms.registry import get
from ..config.schema import AlgorithmEntry, Scenario
from ..data import FederatedData, load_data
from ..exec.device import resolve as resolve_device
from ..models.functional import Model
from ..models.registry import scenario_model
from ..scenario.world_check import guard, scenario_topology
from ..topology.graph import Topology


@dataclass
class World:
    """The simulated system and data shared by every algorithm of a scenario."""

    topo: Topology
    data: FederatedData
    model: Model
    w0: torch.Tensor
    device: str = "cpu"     # where the batched executor trains (train.executor.device, resolved)


def build_world(sc: Scenario, graph=None) -> World:
    topo = scenario_topology(sc, graph)
    device = resolve_device(sc.train.executor.device, sc.file)   # cuda without CUDA: exit 2
    data = load_data(sc, topo.n_clients)
    model = scenario_model(sc.file, sc.model, data)
    guard(sc, topo, data, model.n_params)                 # before the states are allocated
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
