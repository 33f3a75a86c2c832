"""What `hierfl validate` checks of a scenario's world without building it for training: the
topology is built, the data loaded (as numpy arrays), the model sized, the resource guard
applied; no torch is imported for the built-in stacked models (logreg, linear, mlp), whose
size follows from their spec. A torch model (cnn, char_lstm, a plugin's) is built to be sized.
`run.world.build_world` makes the same checks through the same functions, then the model."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..config.errors import ScenarioError
from ..config.limits import guard_resources, model_params
from ..config.schema import Scenario
from ..data import FederatedData, load_arrays, model_data_problem
from ..topology.graph import Topology, build_topology
from ..topology.moves import read_moves
from ..topology.traces import read_availability

SIZED_FROM_SPEC = ("logreg", "linear", "mlp")     # hierfl.models.registry's stacked models


@dataclass
class WorldFacts:
    """The checked world: its topology, its data (numpy) and the model's parameter count."""

    topo: Topology
    data: FederatedData
    n_params: int


def scenario_topology(sc: Scenario, graph: Any = None) -> Topology:
    """The scenario's topology (or `graph`), with algorithms' tier_rounds checked against it."""
    tfile = sc.topology_file
    topo = Topology.from_graph(graph, tfile) if graph is not None else \
        build_topology(sc.topology, sc.seed, tfile)
    tiers = topo.n_tiers                                          # aggregator tiers
    for i, entry in enumerate(sc.algorithms):
        rounds = entry.tier_rounds
        if rounds is not None and len(rounds) != tiers:
            raise ScenarioError.one(sc.file, f"algorithms[{i}].tier_rounds", list(rounds),
                                    f"one entry per aggregator tier, from the top: this "
                                    f"topology has {tiers}")
    check_compress_tiers(sc, tiers)
    return topo


def check_compress_tiers(sc: Scenario, tiers: int) -> None:
    """down / edge_down of a hierarchical algorithm code the model of a single aggregator tier
    (cloud, edges, clients): refused on a deeper tree before anything runs."""
    from ..algorithms.registry import REGISTRY

    if tiers <= 1:
        return
    for i, entry in enumerate(sc.algorithms):
        comp = entry.compress
        if comp is None or not REGISTRY.info(entry.name).hierarchical:
            continue
        for d in ("down", "edge_down"):
            codec = getattr(comp, d)
            if codec.active:
                raise ScenarioError.one(sc.file, f"algorithms[{i}].compress.{d}.kind",
                                        codec.kind, f"{d} compression of a hierarchical "
                                        "algorithm needs one aggregator tier (cloud, edges, "
                                        f"clients): this topology has {tiers}")


def guard(sc: Scenario, topo: Topology, data: FederatedData, n_params: int | None) -> None:
    guard_resources(sc, topo.n_clients, topo.n_nodes - topo.n_clients, data.dim,
                    data.out_dim, len(data.x), n_params)
    if n_params is not None:
        check_compress_k(sc, n_params)


def check_compress_k(sc: Scenario, n_params: int) -> None:
    """A topk / randk `k` above the model's parameter count (it was capped at P, silently:
    top-k then sent every entry, in a sparse encoding dearer than dense)."""
    for i, entry in enumerate(sc.algorithms):
        comp = entry.compress
        for d in ("up", "down", "edge_up", "edge_down") if comp is not None else ():
            k = getattr(comp, d).k
            if k is not None and k > n_params:
                raise ScenarioError.one(sc.file, f"algorithms[{i}].compress.{d}.k", k,
                                        f"more entries than the model's {n_params} parameters")


def availability_trace(sc: Scenario, topo: Topology) -> tuple[dict | None, str | None]:
    """The measured availability intervals of `availability: {kind: trace, path: ...}`, read
    and checked (a bad line is a ScenarioError naming file and line), and the file; or
    (None, None)."""
    avail = getattr(sc.topology, "availability", None)
    if avail is None or avail.kind != "trace":
        return None, None
    base = os.path.dirname(os.path.abspath(sc.topology_file or sc.file))
    path = os.path.join(base, avail.path)
    return read_availability(path, list(topo.clients)), path


def mobility_moves(sc: Scenario, entry: Any, topo: Topology) -> dict | None:
    """The moves of an entry's `mobility: {kind: trace, path: ...}` (its own, relative to the
    scenario file, else the topology's, relative to the topology file), read and checked (a bad
    line is a ScenarioError naming file and line); None for other kinds."""
    path = moves_path(sc, entry)
    if path is None:
        return None
    own = getattr(entry, "mobility", None) is not None
    key = f"algorithms[{sc.algorithms.index(entry)}].mobility.path" if own else "mobility.path"
    return read_moves(path, list(topo.clients), list(topo.edges),
                      [int(e) for e in topo.edge_of], key)


def moves_path(sc: Scenario, entry: Any) -> str | None:
    """The moves file of an entry's trace mobility, or None."""
    spec = entry.mobility_spec(sc.topology)
    if spec is None or spec.kind != "trace":
        return None
    own = getattr(entry, "mobility", None) is not None
    base = os.path.dirname(os.path.abspath(sc.file if own else (sc.topology_file or sc.file)))
    return os.path.join(base, spec.path)


def model_size(sc: Scenario, data: FederatedData) -> int:
    """The model's parameter count: from the spec for the stacked built-ins (no torch), else
    from the built model."""
    from ..models.registry import MODELS, scenario_model

    data = model_data_problem(sc, data)    # (load_arrays checks the sets it loads, not these)
    entry = MODELS.get(sc.model.name)
    if entry is not None and sc.model.name in SIZED_FROM_SPEC and \
            getattr(entry.target, "__module__", "") == "hierfl.models.registry":
        if entry.task == "classification" and data.n_classes == 0:
            raise ScenarioError.one(sc.file, "model.name", sc.model.name,
                                    "classification model on regression targets")
        n = model_params(sc.model, data.dim, data.out_dim)
        assert n is not None
        return n
    return scenario_model(sc.file, sc.model, data).n_params


def data_facts(sc: Scenario, n_clients: int) -> FederatedData:
    """The data as far as the checks need it: a generated set's counts and shapes alone (its
    declared layout, drawn without a row: a million clients' rows took a minute), every other
    set loaded."""
    from ..data.registry import DATASETS, is_registered

    layout = None if is_registered(sc.data) else DATASETS.facts(sc.data.name).layout
    if layout is not None:
        return layout(sc.data, n_clients, sc.seed)
    return load_arrays(sc, n_clients)


def check_world(sc: Scenario, graph: Any = None) -> WorldFacts:
    """The checks of `build_world` but the device's (`train.executor.device`: the caller's, as
    exec/ is above this layer), without torch for the stacked built-in models."""
    topo = scenario_topology(sc, graph)
    availability_trace(sc, topo)                    # a bad trace: exit 2, file and line
    for entry in sc.algorithms:
        mobility_moves(sc, entry, topo)
    data = data_facts(sc, topo.n_clients)
    n_params = model_size(sc, data)
    guard(sc, topo, data, n_params)
    return WorldFacts(topo, data, n_params)
