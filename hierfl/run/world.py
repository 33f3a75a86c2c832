"""The simulated system and data shared by every algorithm of a scenario, built once per run."""
from __future__ import annotations

import os
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
from ..topology.graph import Topology, build_graph
from ..topology.traces import read_availability


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
    tfile = sc.topology_file
    topo = Topology.from_graph(graph if graph is not None else build_graph(sc.topology, sc.seed,
                                                                          tfile), tfile)
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
    guard_resources(sc, topo.n_clients, topo.graph.number_of_nodes() - topo.n_clients, data.dim,
                    data.out_dim, len(data.x), model.n_params)  # before the states are allocated
    w0 = model.init(seeding.torch_gen(sc.seed, "model-init"), zeros=sc.model.init == "zeros")
    avail, avail_file = _availability_trace(sc, topo)
    return World(topo, data, model, w0, device.type, avail, avail_file)


def _availability_trace(sc: Scenario, topo: Topology) -> tuple[dict | None, str | None]:
    """The measured availability intervals of `availability: {kind: trace, path: ...}`, read
    and checked (a bad line is a ScenarioError naming file and line), or (None, None)."""
    avail = getattr(sc.topology, "availability", None)
    if avail is None or avail.kind != "trace":
        return None, None
    base = os.path.dirname(os.path.abspath(sc.topology_file or sc.file))
    path = os.path.join(base, avail.path)
    return read_availability(path, list(topo.clients)), path


def make_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World) -> Algorithm:
    cls = get(entry.name)
    setup = Setup(world.model, world.topo.n_clients,
                  torch.from_numpy(world.data.counts.astype(np.float64)), entry.local, sc.seed,
                  world.topo.n_edges)
    algo = cls(entry.params, setup)
    algo.init(world.w0)
    return algo
