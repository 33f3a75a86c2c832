"""Shared test builders: a scenario written from a small default plus overrides (topology
inline), a runner that returns the parsed outputs, one npz writer, one trace builder.

Fixtures `make_scenario` (bound to the test's tmp_path) and `run_outputs`; test modules whose own
helpers need them import the plain functions: `from conftest import make_scenario, ...`.

Parallel runs (`make test` runs pytest-xdist, `-n <cores> --dist loadgroup`): each test process
works in a private copy of the repository root (links to its entries, its own empty reports/), so
two tests that write a scenario's default output `reports/<name>` at the same moment in two
processes cannot mix their files; every test marked `ray` runs in one process (xdist group "ray"),
one Ray cluster at a time.

    path = make_scenario(tmp_path, name="drift", clients=[(x0, y0), (x1, y1)],
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         **{"train.local.lr": 0.1, "topology.edges.count": 2})
    out = run_outputs(path)
    out.metrics["fedavg"][-1]["test_acc"], out.final("fedavg"), out.results["fedavg"].trace
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import os
import shutil
from typing import Any

import numpy as np
import pytest
import yaml

DROP = object()
"""An override value that removes the key from the scenario."""

DEFAULT_SCENARIO: dict[str, Any] = {
    "name": "t", "seed": 0,
    "topology": {"edges": {"count": 1}, "clients": {"count": 4}},
    "data": {"name": "synthetic", "dim": 5, "classes": 3, "samples": 30},
    "model": {"name": "logreg"},
    "train": {"rounds": 2, "clients_per_round": "all",
              "local": {"steps": 2, "batch_size": "full", "lr": 0.1}},
    "algorithms": [{"name": "fedavg"}],
}


# a small two-edge scenario whose links and compute make rounds take simulated time, checkpointed
# every `checkpoint_every` rounds: the resume, sealed-checkpoint and output-lock tests run it
CHECKPOINTED: dict[str, Any] = {
    "name": "rc", "seed": 3,
    "topology": {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
                 "clients": {"count": 6, "compute_flops": 1e6,
                             "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}}},
    "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 40},
             "dim": 8, "classes": 3},
    "model": {"name": "logreg"},
    "train": {"rounds": 6, "clients_per_round": 4, "checkpoint_every": 2,
              "local": {"steps": 3, "batch_size": 5, "lr": 0.05}},
    "algorithms": [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}]}


# 12 clients under 3 edges whose links and compute make rounds take simulated time, 8 a round:
# the privacy / robustness tests (test_protect, test_report_protect) build on it
PROTECT_BASE: dict[str, Any] = {
    "name": "p", "seed": 5,
    "topology": {"edges": {"count": 3, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e6}},
                 "clients": {"count": 12, "compute_flops": 1e7,
                             "link": {"latency_s": 0.02, "bandwidth_Bps": 1e5}}},
    "data": {"name": "synthetic", "samples": 40, "dim": 6, "classes": 3},
    "model": {"name": "logreg"},
    "train": {"rounds": 4, "clients_per_round": 8,
              "local": {"steps": 4, "batch_size": 8, "lr": 0.1}},
    "algorithms": [{"name": "fedavg"}]}


# ----------------------------------------------------------------------------- scenarios
def set_key(doc: dict, dotted: str, value: Any) -> None:
    """doc["a"]["b"]["c"] = value for "a.b.c", creating the mappings on the way; DROP removes
    the key."""
    *parents, last = dotted.split(".")
    node = doc
    for p in parents:
        node = node.setdefault(p, {})
    if value is DROP:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def scenario_doc(base: dict | None = None, **overrides: Any) -> dict:
    """A copy of `base` (default: DEFAULT_SCENARIO) with overrides applied in order. A key is a
    top-level key (replaces the whole value) or a dotted path ("train.local.lr", written as
    **{...} or with "__" for the dots: train__local__lr=0.1) that replaces one leaf."""
    doc = copy.deepcopy(DEFAULT_SCENARIO if base is None else base)
    for key, value in overrides.items():
        set_key(doc, key.replace("__", "."), value)
    return doc


def write_npz(path: str | os.PathLike, clients: list, tests: Any = None,
              labels: bool = False) -> str:
    """Client k's (x, y) as x_k (rows x features, float64) and y_k (float64, or int64 labels).
    tests: None (no test arrays: the loader splits off data.test_fraction), "train" (each
    client's training set is also its test set) or a list of (x, y) per client."""
    ytype = np.int64 if labels else np.float64
    arrays = {}
    for k, (x, y) in enumerate(clients):
        x = np.asarray(x, np.float64)
        arrays[f"x_{k}"] = x.reshape(len(x), -1)
        arrays[f"y_{k}"] = np.asarray(y, ytype)
        if tests is not None:
            xt, yt = (x, y) if tests == "train" else tests[k]
            xt = np.asarray(xt, np.float64)
            arrays[f"x_test_{k}"] = xt.reshape(len(xt), -1)
            arrays[f"y_test_{k}"] = np.asarray(yt, ytype)
    np.savez(path, **arrays)
    return str(path)


def make_scenario(folder: str | os.PathLike, doc: dict | None = None, *, name: str = "s",
                  clients: list | None = None, tests: Any = "train", labels: bool = False,
                  **overrides: Any) -> str:
    """Write folder/<name>.yaml from `doc` (default DEFAULT_SCENARIO) and the overrides (see
    scenario_doc); "name" is set to `name` unless an override sets it. With `clients`, their data
    go to folder/<name>.npz (see write_npz) and data becomes {name: npz, path: <name>.npz}
    (override data.* keys to add to it). Returns the scenario's path."""
    os.makedirs(folder, exist_ok=True)
    doc = scenario_doc(doc, name=name) if doc is None else scenario_doc(doc)
    if clients is not None:
        write_npz(os.path.join(folder, f"{name}.npz"), clients, tests, labels)
        doc["data"] = {"name": "npz", "path": f"{name}.npz"}
    doc = scenario_doc(doc, **overrides)
    path = os.path.join(folder, f"{name}.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    return path


# ----------------------------------------------------------------------------- running
def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@dataclasses.dataclass
class Outputs:
    """What a run wrote, parsed: per label the metrics.csv and clients.csv rows (strings, as
    csv.DictReader gives them) and the arrays of final_params.npz; `results` are the AlgoResults
    run_scenario returned (trace events, rows as numbers)."""
    folder: str
    labels: list[str]
    results: dict[str, Any]
    metrics: dict[str, list[dict[str, str]]]
    clients: dict[str, list[dict[str, str]]]
    params: dict[str, dict[str, np.ndarray]]

    def final(self, label: str) -> np.ndarray:
        return self.params[label]["global"]


def outputs_of(folder: str, labels: list[str], results: dict | None = None) -> Outputs:
    """Parse the output files of `labels` under `folder`."""
    def params(label: str) -> dict[str, np.ndarray]:
        with np.load(os.path.join(folder, label, "final_params.npz")) as z:
            return dict(z)
    return Outputs(folder, labels, results or {},
                   {la: read_csv(os.path.join(folder, la, "metrics.csv")) for la in labels},
                   {la: read_csv(os.path.join(folder, la, "clients.csv")) for la in labels},
                   {la: params(la) for la in labels})


def run_outputs(path: str | os.PathLike, *, out: str | os.PathLike | None = None,
                rounds: int | None = None, seed: int | None = None, graph: Any = None,
                **run_kw: Any) -> Outputs:
    """Load and run every algorithm of the scenario at `path` (in process), parse its outputs."""
    import hierfl

    sc = hierfl.load(str(path), seed=seed, rounds=rounds, out=None if out is None else str(out))
    results = hierfl.run_scenario(sc, progress=False, graph=graph, **run_kw)
    return outputs_of(sc.output, [e.label for e in sc.algorithms], results)


# ----------------------------------------------------------------------------- traces
class TraceBuilder:
    """Expected trace events (time, node, kind, peer, value) for models of `model_bytes` bytes,
    as the simulator's Trace records them."""

    def __init__(self, model_bytes: float) -> None:
        self.model_bytes = model_bytes

    def send(self, t: float, node: str, peer: str) -> tuple:
        return (t, node, "send", peer, self.model_bytes)

    def recv(self, t: float, node: str, peer: str) -> tuple:
        return (t, node, "recv", peer, self.model_bytes)

    @staticmethod
    def compute_start(t: float, node: str, steps: int = 1) -> tuple:
        return (t, node, "compute_start", "", steps)

    @staticmethod
    def compute_end(t: float, node: str, steps: int = 1) -> tuple:
        return (t, node, "compute_end", "", steps)


def canonical_trace(events) -> list[tuple]:
    """Events sorted by (time rounded to 1e-9 s, node, kind, peer, value)."""
    return sorted((round(float(t), 9), n, k, p, float(v)) for t, n, k, p, v in events)


def assert_trace(got, want) -> None:
    """The whole trace, event by event. Events at the same simulated instant may be emitted in
    any order (simpy's tie order is an implementation detail), so each instant is compared as a
    multiset; the recorded times must not decrease."""
    got_c, want_c = canonical_trace(got), canonical_trace(want)
    assert [e[1:] for e in got_c] == [e[1:] for e in want_c]
    for g, w in zip(got_c, want_c):
        assert g[0] == pytest.approx(w[0], abs=1e-9), (g, w)
    times = [float(e[0]) for e in got]
    assert times == sorted(times), "events must be emitted in time order"


# ----------------------------------------------------------------------------- test processes
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shares_a_fixture(item) -> bool:
    """Whether the test uses a module- or class-scoped fixture (a run made once for many)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(d and d[-1].scope in ("module", "class", "package") for d in defs.values())


@pytest.hookimpl(tryfirst=True)       # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """xdist groups (with --dist loadgroup each group runs in one worker, in order): the tests
    marked `ray` (they start and stop Ray clusters), and per module the tests that use a
    module-scoped fixture (its run is then made once, not once per worker)."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            _join_group(item, "ray")
        elif _shares_a_fixture(item):
            _join_group(item, item.module.__name__)


def _join_group(item, group: str) -> None:
    """Mark the test xdist_group(group). xdist 3.8 tells its scheduler a test's group by the
    suffix "@group" of the node id it sends, written to item._nodeid; pytest 9.2 keeps the id
    in item._id (a NodeId) and ignores _nodeid, so every test became its own group: the suffix
    is written here where pytest keeps it (in a test process with --dist loadgroup only)."""
    item.add_marker(pytest.mark.xdist_group(group))
    if getattr(item.config.option, "loadgroup", False) and hasattr(item, "_id") \
            and not item.nodeid.endswith("@" + group):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.fixture(scope="session", autouse=True)
def private_workdir(tmp_path_factory):
    """The tests run in a folder of links to the repository root's entries (relative paths such
    as scenarios/quickstart.yaml resolve as from the root) with its own reports/: a scenario
    without `output:` writes reports/<name> there, never in the repository nor in another test
    process's folder. Yields the folder; the previous working folder is restored at the end."""
    before = os.getcwd()
    work = str(tmp_path_factory.mktemp("root"))    # pytest's own temp (old ones are pruned)
    for entry in os.listdir(ROOT):
        if entry != "reports":
            os.symlink(os.path.join(ROOT, entry), os.path.join(work, entry))
    os.mkdir(os.path.join(work, "reports"))
    os.chdir(work)
    try:
        yield work
    finally:
        os.chdir(before)
        for entry in os.listdir(work):
            path = os.path.join(work, entry)
            if os.path.islink(path):
                os.unlink(path)
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(name="make_scenario")
def make_scenario_fixture(tmp_path):
    """make_scenario(...) writing under the test's tmp_path (folder= to choose another)."""
    def make(doc: dict | None = None, *, folder: Any = None, **kw: Any) -> str:
        return make_scenario(tmp_path if folder is None else folder, doc, **kw)
    return make


@pytest.fixture(name="run_outputs")
def run_outputs_fixture():
    return run_outputs
