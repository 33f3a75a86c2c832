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

from hierfl.algorithms.fedopt.algorithm import FedOpt
from hierfl.algorithms.hierfavg.algorithm import HierFAVG
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
    # up to 30 samples: 30 x 6 x 3 products, above torch's small size: one call per edge
    # (exec/edges.company_free), as many as the per-edge path
    assert calls == slow_calls


@pytest.mark.parametrize("algo", list(ALGOS))
def test_equal_budgets_train_every_edge_in_one_call(tmp_path, monkeypatch, algo):
    """Without stragglers and with K local steps every edge of a small model shares one call
    per edge round (regional rounds x edge rounds a cloud round) instead of one per edge and
    round."""
    doc = _doc(algo)
    doc.pop("stragglers")
    doc["data"]["samples"] = {"dist": "uniform", "low": 8, "high": 20}    # 20 x 6 x 3 < 400
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


def _small_lone_edges(model: dict, dim: int, classes: int, stragglers: bool,
                      samples=None, algo: str = "hierfavg", local: dict | None = None) -> dict:
    """8 clients under 4 edges, 5 a round, of at most 12 samples: about one client per edge,
    and every matrix product under torch's small-product size (lone calls round as shared)."""
    doc = _doc(algo)
    doc["data"] = {"name": "synthetic", "dim": dim, "classes": classes,
                   "samples": samples or {"dist": "uniform", "low": 5, "high": 12}}
    doc["model"] = model
    doc["topology"]["clients"]["count"] = 8
    doc["train"]["clients_per_round"] = 5
    if local:
        doc["train"]["local"] = local
    if not stragglers:
        doc.pop("stragglers")
    else:               # kept: a lone client dropped leaves its edge nothing to aggregate,
        doc["stragglers"]["drop"] = "never"   # a round for the event loop (hier._every_...)
    return doc


SMALL = {"logreg": ({"name": "logreg"}, 5, 3, "hierfavg", None),
         "mlp": ({"name": "mlp", "hidden": [4]}, 3, 2, "hierfavg", None),
         "2x3": ({"name": "logreg"}, 5, 3, "hierfavg_2x3", None),
         "fedadam": ({"name": "logreg"}, 5, 3, "fedadam", None),
         "full_batch": ({"name": "logreg"}, 5, 3, "hierfavg",
                        {"steps": 2, "batch_size": "full", "lr": 0.1})}


@pytest.mark.parametrize("case", list(SMALL))
@pytest.mark.parametrize("stragglers", [False, True])
@pytest.mark.parametrize("samples", [None, 10])
def test_small_models_train_lone_edges_together_byte_for_byte(tmp_path, monkeypatch, case,
                                                              stragglers, samples):
    """A model whose products are all small (exec/edges.company_free) puts one-client
    edges into the shared call, in measured rounds too (grouped by full-batch width): fewer
    calls than one per edge, and every output byte of the per-edge path. With equal sizes
    (one width) every edge round is one call, measured or not."""
    model, dim, classes, algo, local = SMALL[case]
    doc = _small_lone_edges(model, dim, classes, stragglers, samples, algo, local)
    fast, calls, res = _run(tmp_path, "fast", monkeypatch, True, doc, algo=algo)
    slow, slow_calls, _ = _run(tmp_path, "slow", monkeypatch, False, doc, algo=algo)
    assert res.closed_form_rounds == ROUNDS
    for name in fast:
        assert fast[name] == slow[name], name
    rows = [line.split(",") for line in fast["clients.csv"].decode().splitlines()[1:]]
    assert any(r[9] not in ("", "nan") for r in rows)          # measured rounds' gammas
    if stragglers:
        assert 0 < sum(r[8] == "1" for r in rows) < len(rows)  # some straggled
    per_round = ALGOS[algo][2]
    for t in range(1, ROUNDS + 1):
        assert calls[t] <= slow_calls[t]
        if (t % 2 and local is None) or samples:   # one call per edge round
            assert calls[t] == per_round, (t, calls)
    assert sum(calls.values()) < sum(slow_calls.values())


def test_company_free_counts_the_widest_batch(tmp_path):
    """The rule: functional models whose every layer's (width x (inputs + 1) x outputs) is
    below SMALL_PRODUCT, width the larger of the minibatch and a client's whole data."""
    from hierfl.exec.edges import SMALL_PRODUCT, company_free
    from hierfl.exec.round import RoundRunner
    from hierfl.run.world import make_algorithm

    def alike(doc) -> bool:
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump(doc))
        sc = load(str(path), out=str(tmp_path / "r"))
        world = build_world(sc)
        entry = sc.algorithms[0]
        runner = RoundRunner(sc, entry, world.topo, world.data, world.model,
                             make_algorithm(sc, entry, world), BatchedExecutor())
        width = max(int(runner.counts.max()), 4)
        products = [width * (l.n_in + 1) * l.n_out for l in runner.model.layers]
        assert company_free(runner) == (max(products) < SMALL_PRODUCT)
        return company_free(runner)

    assert alike(_small_lone_edges({"name": "logreg"}, 5, 3, False))       # 12 x 6 x 3
    assert not alike(_doc())                            # up to 30 samples: 30 x 6 x 3 = 540
    assert not alike(_one_client_edges())               # 65 features, 10 classes
    assert not alike(_small_lone_edges({"name": "mlp", "hidden": [40]}, 3, 2, False))


def _batch_of_one_differs(lo: int, hi: int, shapes: int) -> tuple[int, int]:
    """The bmm and baddbmm of a step (models/functional.py: z = x W^T, z^T = W x^T,
    W - lr dz^T x, dz^T x) for random (rows B, inputs d, outputs o) with lo <= B d o < hi, on
    batches of 2-17 items whose inputs are strided as in a chunk of steps: how many items
    came out differently computed alone, of how many."""
    import random

    import torch

    rnd, gen = random.Random(lo), torch.Generator().manual_seed(lo)
    tried = differ = 0
    for _ in range(shapes):
        while True:
            b, d, o = rnd.randint(1, 60), rnd.randint(1, 70), rnd.randint(1, 12)
            if lo <= b * d * o < hi:
                break
        c, t = rnd.choice([2, 3, 17]), rnd.choice([1, 2])
        x = torch.randn(c, t, b, d, generator=gen)[:, t - 1]
        dz = torch.randn(c, t, b, o, generator=gen)[:, t - 1]
        w, keep = torch.randn(c, o, d, generator=gen), torch.randn(c, o, d, generator=gen)
        ops = [lambda s: torch.bmm(x[s], w[s].transpose(1, 2)),
               lambda s: torch.bmm(w[s], x[s].transpose(1, 2)),
               lambda s: torch.baddbmm(keep[s], dz[s].transpose(1, 2), x[s], alpha=-0.07),
               lambda s: torch.bmm(dz[s].transpose(1, 2), x[s])]
        for op in ops:
            together = op(slice(None))
            for k in range(c):
                tried += 1
                differ += not torch.equal(together[k:k + 1], op(slice(k, k + 1)))
    return differ, tried


def test_torch_rounds_a_batch_of_one_alike_exactly_below_the_small_product():
    """What the rule stands on, checked on torch itself (a new torch that changed it fails
    here): below SMALL_PRODUCT every item of a batch comes out as it does alone (torch's
    per-entry loop); above it a batch of one often rounds differently (a plain mm)."""
    from hierfl.exec.edges import SMALL_PRODUCT
    import torch

    saved = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            differ, tried = _batch_of_one_differs(1, SMALL_PRODUCT, 150)
            assert differ == 0 and tried > 2000, (threads, differ, tried)
        torch.set_num_threads(1)
        differ, tried = _batch_of_one_differs(SMALL_PRODUCT, 3000, 150)
        assert differ > tried // 20, (differ, tried)
    finally:
        torch.set_num_threads(saved)


def test_lone_means_are_weighted_mean_of_one_row_bit_for_bit():
    """exec/edges._lone_means (many one-arrival edges at once) against the base rule's
    weighted_mean of each edge's single row: the same bits (compared as integers: -0.0 in a
    row comes out +0.0 from both), tiny, huge and infinite entries as the matrix product gives
    them; NaN where the weight is 0 (0 / 0) or the entry is NaN."""
    import torch

    from hierfl.algorithms.base import Upload, weighted_mean
    from hierfl.exec.edges import _lone_means
    from hierfl.sim.work import Work

    gen = torch.Generator().manual_seed(0)
    scale = torch.tensor([1e-30, 1.0, 1e30, 3.0, 1.0, 1.0])[:, None]
    rows = torch.randn(6, 9, generator=gen) * scale
    rows[3, 2], rows[4, 5] = float("inf"), float("nan")
    rows[1, 3], rows[2, 0], rows[5, 7] = -0.0, -0.0, 0.0
    counts = np.array([5, 1, 7, 0, 12, 3, 9])
    works = [Work(np.array([(k + 1) % 7, k]), Upload((torch.stack([-rows[k], rows[k]]),), "dense"),
                  np.zeros(2), np.zeros(2), [], np.array([True, False])) for k in range(6)]
    got = _lone_means(works, [1] * 6, counts)
    for k in range(6):
        w = torch.tensor([float(counts[k])], dtype=torch.float64)
        want = weighted_mean(rows[k:k + 1], w / w.sum())
        nan = torch.isnan(want)
        assert torch.equal(torch.isnan(got[k]), nan), k
        assert torch.equal(got[k][~nan].view(torch.int32), want[~nan].view(torch.int32)), k
    assert torch.isnan(got[3]).all() and torch.equal(got[0], rows[0])


def test_mid_size_products_keep_one_call_per_edge(tmp_path, monkeypatch):
    """A reviewer's case: 9 x 9 x 5 products (9 samples, 8 features and the bias, 5 classes)
    are just above the small size, and there torch's baddbmm rounds an item differently in a
    batch of 2, 3 or 7 than in a batch of 6; equal budgets used to let both edges share a call
    and the bytes moved. Each edge now keeps its own call: the per-edge path's bytes."""
    doc = {"name": "midzone", "seed": 0,
           "topology": {"edges": {"count": 2}, "clients": {"count": 6}},
           "data": {"name": "synthetic", "dim": 8, "classes": 5,
                    "samples": {"dist": "constant", "value": 9}, "test_fraction": 0.0},
           "model": {"name": "logreg"},
           "train": {"rounds": 2, "eval_every": 2, "clients_per_round": "all",
                     "local": {"steps": 3, "batch_size": 9, "lr": 0.01}},
           "algorithms": [{"name": "hierfavg", "edge_rounds": 1}]}
    fast, calls, _ = _run(tmp_path, "fast", monkeypatch, True, doc)
    slow, slow_calls, _ = _run(tmp_path, "slow", monkeypatch, False, doc)
    for name in fast:
        assert fast[name] == slow[name], name
    assert calls == slow_calls
    doc["train"]["executor"] = {"edge_batching": "fast"}          # shares the calls; whether
    shared, shared_calls, _ = _run(tmp_path, "shared", monkeypatch, True, doc)  # the bits move
    assert sum(shared_calls.values()) < sum(calls.values())      # is the CPU's: they do on an
    #                           AMD EPYC with AVX2, not on an Intel Xeon with AVX-512


def test_diverging_clients_are_named_alike_batched_and_per_edge(tmp_path, monkeypatch):
    """Features so large that a step overflows float32: the batched call's finite-row check
    (made once in RoundRunner.train, carried on its Work) splits per edge as one call per edge
    would: the same clients named non-finite, and every output byte the per-edge path's."""
    doc = _small_lone_edges({"name": "logreg"}, 5, 3, False, 10,
                            local={"steps": 3, "batch_size": 4, "lr": 1.0})
    doc["data"]["beta"] = 1e30
    fast, calls, res = _run(tmp_path, "fast", monkeypatch, True, doc)
    slow, slow_calls, slow_res = _run(tmp_path, "slow", monkeypatch, False, doc)
    for name in fast:
        assert fast[name] == slow[name], name
    assert res.nonfinite_clients and res.nonfinite_clients == slow_res.nonfinite_clients
    assert sum(calls.values()) < sum(slow_calls.values())
