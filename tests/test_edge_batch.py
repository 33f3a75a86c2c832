"""HierFAVG's closed-form rounds train every edge of a tier round in one executor call
(sim/edge_plan.py, exec/edges.py), and that changes no byte of any output.

A small 3-tier system (2 regions, 4 edges, 16 clients) with half the clients straggling
(HierFAVG drops them) and clients of unequal sizes: the batched path against the per-edge path
(HierFAVG with `batch_edges` off), and the executor calls counted through a real executor."""
from __future__ import annotations

import collections
import io
import os

import numpy as np
import yaml

import pytest

from hierfl.algorithms.fedopt import FedOpt
from hierfl.algorithms.hierfavg import HierFAVG
from hierfl.exec.local import BatchedExecutor
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

ROUNDS = 4


ALGOS = {"hierfavg": (HierFAVG, {"name": "hierfavg", "tier_rounds": [1, 2]}, 2),
         "hierfavg_2x3": (HierFAVG, {"name": "hierfavg", "tier_rounds": [2, 3]}, 6),
         "fedadam": (FedOpt, {"name": "fedadam", "edge_rounds": 2, "server_lr": 0.1}, 2)}


def _doc(algo: str = "hierfavg", **train) -> dict:
    return {"name": "eb", "seed": 5,
            "topology": {"tiers": [{"name": "regional", "count": 2,
                                    "link": {"latency_s": 0.03, "bandwidth_Bps": 2e4}},
                                   {"name": "edge", "count": 4,
                                    "link": {"latency_s": 0.01, "bandwidth_Bps": 5e3}}],
                         "clients": {"count": 16,
                                     "compute_flops": {"dist": "lognormal", "median": 1e6,
                                                       "sigma": 0.6},
                                     "link": {"latency_s": 0.02, "bandwidth_Bps": 2e3}}},
            "data": {"name": "synthetic", "dim": 5, "classes": 3,
                     "samples": {"dist": "uniform", "low": 8, "high": 30}},
            "model": {"name": "logreg"},
            "stragglers": {"fraction": 0.5},
            "train": {"rounds": ROUNDS, "clients_per_round": 12, "eval_every": 2,
                      "local": {"epochs": 1, "batch_size": 4, "lr": 0.05}, **train},
            "algorithms": [ALGOS[algo][1]]}


class CountingExecutor(BatchedExecutor):
    """The default executor, counting its calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def run(self, *args, **kw):
        self.calls += 1
        return super().run(*args, **kw)


def _run(tmp_path, name: str, monkeypatch, batched: bool, doc: dict | None = None,
         algo: str = "hierfavg"):
    monkeypatch.setattr(ALGOS[algo][0], "batch_edges", batched)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc or _doc(algo)))
    sc = load(str(path), out=str(tmp_path / name))
    world = build_world(sc)
    entry = sc.algorithms[0]
    folder = os.path.join(sc.output, entry.label)
    ex = CountingExecutor()
    per_round = collections.Counter()
    from hierfl.exec.round import RoundRunner
    train = RoundRunner.train

    def counted(self, t, *a, **kw):
        before = ex.calls
        work = train(self, t, *a, **kw)
        per_round[t] += ex.calls - before
        return work
    monkeypatch.setattr(RoundRunner, "train", counted)
    res = run_algorithm(sc, entry, world, folder, executor=ex, progress=False)
    files = {f: open(os.path.join(folder, f), "rb").read()
             for f in ("trace.csv", "clients.csv", "metrics.csv")}
    with np.load(os.path.join(folder, "final_params.npz")) as z:
        files.update({k: z[k].tobytes() for k in z.files})
    return files, per_round, res


@pytest.mark.parametrize("algo", list(ALGOS))
def test_batched_edges_equal_per_edge_calls_byte_for_byte(tmp_path, monkeypatch, algo):
    fast, calls, res = _run(tmp_path, "fast", monkeypatch, True, algo=algo)
    slow, slow_calls, _ = _run(tmp_path, "slow", monkeypatch, False, algo=algo)
    assert res.closed_form_rounds == ROUNDS
    assert fast.keys() == slow.keys()
    for name in fast:
        assert fast[name] == slow[name], name
    rows = [line.split(",") for line in fast["clients.csv"].decode().splitlines()[1:]]
    assert 0 < sum(r[8] == "1" for r in rows) < len(rows)    # some clients straggled
    if algo == "hierfavg":                                   # and HierFAVG dropped them
        assert 0 < sum(r[7] == "1" for r in rows) < len(rows)
    if algo == "hierfavg_2x3":                               # regions' second round started
        assert {r[1] for r in rows} == {str(i) for i in range(6)}   # from their aggregates
    # with stragglers an edge whose longest budget is one client's trains alone (its call
    # would end with one client: exec/edges.never_alone); never more calls than per edge
    for t in range(1, ROUNDS + 1):
        assert ALGOS[algo][2] <= calls[t] <= slow_calls[t]


@pytest.mark.parametrize("algo", list(ALGOS))
def test_equal_budgets_train_every_edge_in_one_call(tmp_path, monkeypatch, algo):
    """Without stragglers and with K local steps every edge shares one call per edge round
    (regional rounds x edge rounds a cloud round) instead of one per edge and round."""
    doc = _doc(algo)
    doc.pop("stragglers")
    doc["train"]["local"] = {"steps": 3, "batch_size": 4, "lr": 0.05}
    fast, calls, _ = _run(tmp_path, "fast", monkeypatch, True, doc, algo=algo)
    slow, slow_calls, _ = _run(tmp_path, "slow", monkeypatch, False, doc, algo=algo)
    for name in fast:
        assert fast[name] == slow[name], name
    edge_rounds = ALGOS[algo][2]
    for t in range(1, ROUNDS + 1):
        assert slow_calls[t] > edge_rounds
        if t % 2:                      # unmeasured rounds: the full batch is never evaluated
            assert calls[t] == edge_rounds, (t, calls)
        else:                          # measured: one call per full-batch width at most
            assert edge_rounds <= calls[t] <= slow_calls[t]


def _one_client_edges() -> dict:
    """4 clients under 4 edges, all selected: one client per edge, 65 features, 10 classes."""
    doc = _doc()
    doc.pop("stragglers")
    doc["data"] = {"name": "synthetic", "dim": 65, "classes": 10,
                   "samples": {"dist": "uniform", "low": 20, "high": 40}}
    doc["topology"]["clients"]["count"] = 4
    doc["train"]["clients_per_round"] = "all"
    return doc


def test_one_client_edges_keep_their_own_calls(tmp_path, monkeypatch):
    """torch's bmm of a batch of ONE rounds differently from a batch of two (a plain mm): an
    edge with one client this round (here every edge) keeps its own call, so its bytes are the
    per-edge path's whatever the shapes (test_asynchrony_edges' identity with synchronous
    HierFAVG, one client per edge, differed in the last bits when all edges shared a call)."""
    doc = _one_client_edges()
    fast, calls, _ = _run(tmp_path, "fast", monkeypatch, True, doc)
    slow, slow_calls, _ = _run(tmp_path, "slow", monkeypatch, False, doc)
    for name in fast:
        assert fast[name] == slow[name], name
    assert calls == slow_calls


def test_gamma_target_rounds_stay_identical(tmp_path, monkeypatch):
    """A gamma target evaluates the padded full batch every round: grouped by width."""
    doc = _doc()
    doc["train"]["local"]["gamma"] = 0.5
    doc["train"]["local"]["check_every"] = 2
    fast, _, _ = _run(tmp_path, "fast", monkeypatch, True, doc)
    slow, _, _ = _run(tmp_path, "slow", monkeypatch, False, doc)
    for name in fast:
        assert fast[name] == slow[name], name


def test_fast_edge_batching_trains_all_edges_together_within_float_rounding(tmp_path,
                                                                             monkeypatch):
    """train.executor.edge_batching: fast puts one-client edges into the shared call too (one
    call per edge round even in evaluated rounds of equal widths): the numbers move only in
    the last bits against exact."""
    doc = _one_client_edges()
    exact, exact_calls, _ = _run(tmp_path, "exact", monkeypatch, True, doc)
    doc["train"]["executor"] = {"edge_batching": "fast"}
    fast, calls, _ = _run(tmp_path, "fast", monkeypatch, True, doc)
    assert sum(calls.values()) < sum(exact_calls.values())
    for t in range(1, ROUNDS + 1, 2):              # unevaluated rounds: one call per edge round
        assert calls[t] == ALGOS["hierfavg"][2]
    params = [k for k in fast if not k.endswith(".csv")]
    for k in params:
        assert np.allclose(np.frombuffer(fast[k], np.float32),
                           np.frombuffer(exact[k], np.float32), rtol=1e-5, atol=1e-7), k
    for name in ("metrics.csv", "clients.csv"):
        a, b = (np.genfromtxt(io.BytesIO(f[name]), delimiter=",", names=True)
                for f in (fast, exact))
        for col in ("train_loss", "test_acc") if name == "metrics.csv" else ("gamma",):
            assert np.allclose(a[col], b[col], rtol=1e-5, equal_nan=True), (name, col)
