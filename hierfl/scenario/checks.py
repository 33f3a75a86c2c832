"""The scenario layer's checks, beyond what a single key's field checks: first what the file
says across fields (scenario/load.py calls these while loading: round policies against the
clients per round, hyperparameters that only apply to another kind, learning rates that would
overflow over the run, labels that would collide with report files, the output folder, the
guard on work (config/work)); then the world it describes, checked without building it for
training (`check_world`, what `hierfl validate` runs): the topology is built, the data loaded
(as numpy arrays), the model sized, the trace files read, the resource guard applied. No torch
is imported for the built-in stacked models (logreg, linear, mlp), whose size follows from
their spec; a torch model (cnn, char_lstm, a plugin's) is built to be sized.
`run.world.build_world` makes the same world checks through the same functions, then builds
the model, so validate and run refuse the same scenarios before any round runs."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ..algorithms.registry import REGISTRY, get
from ..config.asynchrony import ASYNC_POLICIES
from ..config.errors import Problem, Problems, ScenarioError
from ..config.fields import seed_range
from ..config.limits import guard_resources, model_params
from ..config.mobility import mobility_problem
from ..config.paths import output_problem
from ..config.schema import AlgorithmEntry, Scenario, TrainSpec, dist_mean as mean_of
from ..config.work import MAX_AVAILABILITY_EVENTS, availability_problem, work_problems
from ..data import FederatedData, load_arrays, model_data_problem
from ..data.registry import DATASETS, is_registered
from ..models.registry import MODELS, scenario_model
from ..topology.check import dist_problem
from ..topology.graph import Topology, build_topology
from ..topology.moves import read_moves
from ..topology.traces import read_availability

# ============================================================================ the file, across fields
MAX_LR = 1e6        # the local learning rate, at any round (lr x lr_decay ** (rounds - 1))
REPORT_SUFFIXES = (".md", ".html", ".png", ".svg", ".pdf", ".csv", ".json", ".yaml", ".yml",
                   ".npz", ".txt", ".tmp", ".log")
REPORT_NAMES = ("DONE", "compare", "figures", "checkpoints")


def label_problem(label: str) -> str | None:
    """Why an algorithm label would collide with a file the run or its report writes."""
    if label.lower().endswith(REPORT_SUFFIXES) or label in REPORT_NAMES:
        return ("a label is a folder next to the report's files: it may not end in "
                f"{', '.join(REPORT_SUFFIXES)} or be {', '.join(REPORT_NAMES)}")
    return None


def check_overrides(p: Problems, seed: Any, rounds: Any) -> None:
    """The command line's --seed and --rounds (the file's keys are checked by their fields)."""
    if rounds is not None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 1e7:
            p.add("--rounds", rounds, "must be an integer in 1..10000000")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or
                             seed_range(seed)):
        p.add("--seed", seed, seed_range(seed) if isinstance(seed, int) else "not an integer")


def check_rounds(p: Problems, train: TrainSpec, clients_per_round: int,
                 entries: list[AlgorithmEntry] = ()) -> None:
    pols = [("train.round", train.round)] + [(f"algorithms[{i}].round", e.round)
                                             for i, e in enumerate(entries) if e.round]
    for key, r in pols:
        if r.policy == "first_k" and r.k is not None and r.k > clients_per_round:
            p.add(f"{key}.k", r.k, f"more than the {clients_per_round} clients per round: the "
                  "round would wait for all (use wait_all, or raise clients_per_round)")


def check_asynchrony(p: Problems, train: TrainSpec, entries: list[AlgorithmEntry]) -> None:
    """Asynchronous policies (fedasync, fedbuff) at the cloud tier (train.round or an entry's
    round:), for the algorithms that declare them (Capabilities.asynchronous), and at the
    bottom aggregator tier (train.edge_round, Capabilities.async_edges)."""
    edge = train.edge_round.policy
    if train.edge_round.drain_every is not None:
        p.add("train.edge_round.drain_every", train.edge_round.drain_every, "applies to the "
              "cloud tier (train.round): an edge's period already ends with its upload")
    if edge in ASYNC_POLICIES and train.edge_preaggregate:
        p.add("train.edge_preaggregate", True, "does not apply to asynchronous edges "
              f"(train.edge_round {edge!r}): each client update is mixed in on its own")
    for i, e in enumerate(entries if edge in ASYNC_POLICIES else []):
        caps = get(e.name).caps
        if caps.hierarchical and not caps.async_edges:
            p.add(f"algorithms[{i}].name", e.name, f"cannot run with train.edge_round "
                  f"{edge!r}: its edge rule is not a mean of client models (asynchronous "
                  "edges: hierfavg, pfedmac_sh)")
    check_preaggregate(p, train, entries)
    for i, e in enumerate(entries):
        pol = e.round_policy(train).policy
        if pol not in ASYNC_POLICIES:
            continue
        key = "train.round.policy" if e.round is None else f"algorithms[{i}].round.policy"
        if train.edge_preaggregate:
            p.add("train.edge_preaggregate", True, f"does not apply to {pol!r} ({key}): each "
                  "update travels to the cloud on its own")
        caps = get(e.name).caps
        if not caps.asynchronous:
            what = "aggregator" if caps.hierarchical else "client"
            p.add(f"algorithms[{i}].name", e.name, f"cannot run with {key} {pol!r}: its cloud "
                  f"step is not a weighted mean of {what} models, or it keeps other server or "
                  "client state (asynchronous: fedavg, fedprox, hierfavg)")


def check_preaggregate(p: Problems, train: TrainSpec, entries: list[AlgorithmEntry]) -> None:
    """first_k at the cloud keeps the first k client updates; with train.edge_preaggregate the
    cloud receives edges' partial sums, and each edge would keep its own first k clients and
    the cloud its first k edges (up to k x k updates, not k): refused."""
    if not train.edge_preaggregate:
        return
    for i, e in enumerate(entries):
        caps = get(e.name).caps
        if caps.hierarchical or not caps.linear_aggregate:
            continue                            # edge_preaggregate does not apply to it
        if e.round_policy(train).policy == "first_k":
            key = "train.round.policy" if e.round is None else f"algorithms[{i}].round.policy"
            p.add(key, "first_k", "does not apply with train.edge_preaggregate (each edge "
                  "would keep its own first k clients and the cloud its first k partial sums, "
                  "not the first k clients): relay the updates, or use wait_all or a deadline")


def _lr_problem(lr: float, decay: float, rounds: int) -> str | None:
    top = math.log10(lr) + max(rounds - 1, 0) * max(math.log10(decay), 0.0)
    if top <= math.log10(MAX_LR):
        return None
    return (f"the learning rate reaches 10^{top:.3g} by round {rounds} (lr x lr_decay^(rounds-1)"
            f"), more than {MAX_LR:g}")


def check_algorithms(p: Problems, entries: list[AlgorithmEntry], rounds: int,
                     n_top: int | None) -> None:
    for i, e in enumerate(entries):
        key = f"algorithms[{i}]"
        msg = _lr_problem(e.local.lr, e.local.lr_decay, rounds)
        if msg:
            which = "lr" if e.local.lr > MAX_LR or e.local.lr_decay <= 1 else "lr_decay"
            p.add(f"{key}.local.{which}", getattr(e.local, which), msg)
        sched = e.local.lr_schedule
        if sched is not None and sched.gamma is not None and e.local.lr <= MAX_LR:
            clock = rounds if sched.every == "round" else \
                rounds * e.edge_rounds * (e.local.steps or 1)
            times = (clock - 1) // (sched.step_size or 1) + 1     # as lr_decay's rounds - 1
            msg = _lr_problem(e.local.lr, sched.gamma, times)
            if msg:
                p.add(f"{key}.local.lr_schedule.gamma", sched.gamma,
                      msg.replace("lr_decay", "gamma"))
        sp = getattr(e.params, "sparsity", None)
        if sp is not None and sp.kind == "none" and sp.gamma != 0.0:
            p.add(f"{key}.sparsity.gamma", sp.gamma, "applies to kind l1 or logcosh; "
                  "sparsity.kind is none (set kind:)")
        s = getattr(e.params, "edges_per_round", "all")
        if s != "all" and n_top is not None and int(s) > n_top:
            p.add(f"{key}.edges_per_round", s, f"more than the {n_top} edges under the cloud")


def check_output(p: Problems, key: str, path: str) -> None:
    """The output folder (`output:` of the file, or `--out`: a command-line option, no file)."""
    msg = output_problem(path)
    if msg and key.startswith("--"):
        p.items.append(Problem("", key, path, msg))
    elif msg:
        p.add(key, path, msg)


def check_work(p: Problems, train: TrainSpec, entries: list[AlgorithmEntry], c: int,
               n_clients: int, rows: float, n_params: int | None, topo: Any,
               topo_file: str) -> None:
    _mean = mean_of
    runs = [(f"algorithms[{i}]", e.local, math.prod(e.tier_rounds or (e.edge_rounds,)))
            for i, e in enumerate(entries)]
    clients = getattr(topo, "clients", None)
    flops = _mean(clients.compute_flops) if clients is not None else 1e9
    probs, sim_s = work_problems(train.rounds, c, runs, rows, n_params, flops)
    for key, value, msg in probs:
        p.add(key, value, msg)
    if clients is not None:     # every round: a download and an upload over the client link
        bw = _mean(clients.link.bandwidth_Bps)
        sim_s += train.rounds * 2 * (_mean(clients.link.latency_s) +
                                     4.0 * (n_params or 0) / max(bw, 1.0))
    _mobility_guard(p, entries, topo, topo_file, n_clients, sim_s)
    _mobility_async(p, train, entries, topo, topo_file)
    avail = getattr(topo, "availability", None)
    msg = availability_problem(avail, n_clients, sim_s)
    if msg:
        shown = {"kind": "markov", "mean_on_s": avail.mean_on_s, "mean_off_s": avail.mean_off_s}
        if topo_file == p.file:
            p.add("topology.availability", shown, msg)
        else:
            p.items.append(Problem(topo_file, "availability", shown, msg))


def _mobility_async(p: Problems, train: TrainSpec, entries: list[AlgorithmEntry], topo: Any,
                    topo_file: str) -> None:
    """Mobility runs with synchronous rounds only: an asynchronous cloud (train.round or an
    entry's round:) or asynchronous edges (train.edge_round, for a hierarchical algorithm)
    with clients moving is refused before anything runs (the engine refused the first only
    when that entry's turn came, and asynchronous edges kept re-sending to a client that
    had moved away, without end)."""
    for i, e in enumerate(entries):
        spec = e.mobility_spec(topo)
        if spec is None:
            continue
        cloud = e.round_policy(train).policy
        edge = train.edge_round.policy if get(e.name).caps.hierarchical else None
        if cloud in ASYNC_POLICIES:
            why = f"{e.label}: round policy {cloud!r}"
        elif edge in ASYNC_POLICIES:
            why = f"{e.label}: train.edge_round {edge!r}"
        else:
            continue
        msg = (f"mobility runs with synchronous rounds only ({why} is asynchronous); give "
               "this algorithm `mobility: {kind: none}` or a synchronous policy")
        if e.mobility is not None:
            p.add(f"algorithms[{i}].mobility.kind", spec.kind, msg)
        elif topo_file == p.file:
            p.add("topology.mobility.kind", spec.kind, msg)
        else:
            p.items.append(Problem(topo_file, "mobility.kind", spec.kind, msg))


def _mobility_guard(p: Problems, entries: list[AlgorithmEntry], topo: Any, topo_file: str,
                    n_clients: int, sim_s: float) -> None:
    """Markov mobility drawing too many handovers (config/mobility.py), where it is given."""
    for i, e in enumerate(entries):
        own = getattr(e, "mobility", None)
        msg = mobility_problem(e.mobility_spec(topo), n_clients, sim_s, MAX_AVAILABILITY_EVENTS)
        if not msg:
            continue
        if own is not None:
            p.add(f"algorithms[{i}].mobility.handover_rate_per_s", own.handover_rate_per_s, msg)
        elif topo_file == p.file:
            p.add("topology.mobility.handover_rate_per_s", topo.mobility.handover_rate_per_s,
                  msg)
        else:
            p.items.append(Problem(topo_file, "mobility.handover_rate_per_s",
                                   topo.mobility.handover_rate_per_s, msg))
        return


# ============================================================================ the world
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
    check_augment(sc, data)


def check_augment(sc: Scenario, data: FederatedData) -> None:
    """train.local.augment (or an entry's own) on rows that are not images: crop and flip
    need rows of shape (channels, height, width) or (height, width)."""
    shape = tuple(data.input_shape)
    if len(shape) in (2, 3):
        return
    for i, entry in enumerate(sc.algorithms):
        aug = entry.local.augment
        if aug is None:
            continue
        key = "train.local.augment" if aug == sc.train.local.augment else \
            f"algorithms[{i}].local.augment"
        raise ScenarioError.one(sc.file, key, {"crop": aug.crop, "flip": aug.flip},
                                f"augmentation needs image rows; data {sc.data.name} has rows "
                                f"of shape {shape}")


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
    data = model_data_problem(sc, data)    # (load_arrays checks the sets it loads, not these)
    decl = MODELS.declaration(sc.model.name) if sc.model.name in MODELS else None
    if decl is not None and sc.model.name in SIZED_FROM_SPEC and \
            decl.origin == "hierfl.models.stacked":
        if decl.facts.task == "classification" and data.n_classes == 0:
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
