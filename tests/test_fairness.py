"""Issue 44, item 1: how accuracy is spread over clients. metrics.csv's client_acc_* columns
against a hand computation from the same run's clients_eval.csv; the weighted mean is test_acc;
personal columns for a personalised algorithm only; a paused and resumed run writes the same
clients_eval.csv; the report's section and CDF figure where the data is."""
from __future__ import annotations

import csv
import math
import os

import numpy as np
import pytest
import yaml

from conftest import make_scenario, run_outputs
from hierfl.outputs.fairness import FAIRNESS_COLUMNS, spread
from hierfl.run import run_scenario
from hierfl.scenario.load import load

STATS = ("mean", "std", "min", "p10", "p50", "p90", "worst10", "jain")


def _scenario(tmp_path, algorithms, rounds=4, every=2, eval_every=1):
    topo = {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
            "clients": {"count": 13, "compute_flops": {"dist": "uniform", "low": 1e6,
                                                       "high": 4e6},
                        "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}}}
    data = {"name": "synthetic", "samples": {"dist": "uniform", "low": 12, "high": 60},
            "dim": 8, "classes": 3}
    doc = {"name": "fair", "seed": 5, "topology": topo, "data": data,
           "model": {"name": "logreg"},
           "train": {"rounds": rounds, "clients_per_round": 5, "checkpoint_every": every,
                     "eval_every": eval_every,
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.3}},
           "algorithms": algorithms}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _f(cell):
    return float(cell) if cell != "" else math.nan


def _hand(acc):
    """The statistics recomputed here, from their definitions (docs/reference/outputs.md)."""
    x = sorted(acc)
    n = len(x)

    def pct(q):                      # numpy's default 'linear': position q/100 * (n - 1)
        pos = q / 100 * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return x[lo] + (x[hi] - x[lo]) * (pos - lo)
    mean = sum(x) / n
    k = math.ceil(0.1 * n)
    return {"mean": mean, "std": math.sqrt(sum((v - mean) ** 2 for v in x) / n), "min": x[0],
            "p10": pct(10), "p50": pct(50), "p90": pct(90), "worst10": sum(x[:k]) / k,
            "jain": sum(x) ** 2 / (n * sum(v * v for v in x))}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fair")
    path = _scenario(tmp, [{"name": "fedavg"}, {"name": "ditto"}])
    sc = load(path, out=str(tmp / "out"))
    run_scenario(sc, progress=False)
    return str(tmp / "out")


def _by_round(rows, key):
    out = {}
    for r in rows:
        out.setdefault(int(r["round"]), []).append(r)
    return out


@pytest.mark.parametrize("label,prefix,key", [("fedavg", "client_acc_", "test_acc"),
                                              ("ditto", "client_acc_", "test_acc"),
                                              ("ditto", "personal_client_acc_",
                                               "personal_test_acc")])
def test_columns_match_a_hand_computation_from_clients_eval(small_run, label, prefix, key):
    metrics = _rows(os.path.join(small_run, label, "metrics.csv"))
    per = _by_round(_rows(os.path.join(small_run, label, "clients_eval.csv")), key)
    evaluated = [r for r in metrics if r[key] != ""]
    assert [int(r["round"]) for r in evaluated] == sorted(per) == [0, 1, 2, 3, 4]
    spread_seen = False
    for r in evaluated:
        rows = per[int(r["round"])]
        assert len(rows) == 13 and all(int(c["test_rows"]) > 0 for c in rows)
        acc = [float(c[key]) for c in rows]
        want = _hand(acc)
        for s in STATS:
            assert _f(r[prefix + s]) == pytest.approx(want[s], rel=1e-12, abs=1e-15), (s, r)
        # the weighted mean: correct rows over test rows, the file's numbers weighted
        n = [int(c["test_rows"]) for c in rows]
        wm = sum(a * m for a, m in zip(acc, n)) / sum(n)
        assert _f(r[prefix + "wmean"]) == pytest.approx(wm, rel=1e-12)
        spread_seen |= max(acc) > min(acc)
    assert spread_seen          # not a degenerate run where every client scores the same


@pytest.mark.parametrize("label", ["fedavg", "ditto"])
def test_weighted_mean_is_test_acc(small_run, label):
    """The test set is the union of the clients' test rows: the weighted mean is test_acc to
    the last bit (both are correct rows over all test rows)."""
    metrics = _rows(os.path.join(small_run, label, "metrics.csv"))
    for r in metrics:
        assert r["client_acc_wmean"] == r["test_acc"]
        assert r["personal_client_acc_wmean"] == r["personal_test_acc"]


def test_personal_columns_only_for_a_personalised_algorithm(small_run):
    fedavg = _rows(os.path.join(small_run, "fedavg", "metrics.csv"))
    ditto = _rows(os.path.join(small_run, "ditto", "metrics.csv"))
    assert all(r[f"personal_client_acc_{s}"] == "" for r in fedavg for s in STATS)
    assert all(r[f"personal_client_acc_{s}"] != "" for r in ditto for s in STATS)
    assert all(c["personal_test_acc"] == ""
               for c in _rows(os.path.join(small_run, "fedavg", "clients_eval.csv")))
    assert list(fedavg[0])[-len(FAIRNESS_COLUMNS):] == FAIRNESS_COLUMNS   # appended at the end


def test_rows_only_at_evaluations(tmp_path):
    path = _scenario(tmp_path, [{"name": "fedavg"}], rounds=5, eval_every=2)
    run_scenario(load(path, out=str(tmp_path / "o")), progress=False)
    metrics = _rows(str(tmp_path / "o" / "fedavg" / "metrics.csv"))
    per = _by_round(_rows(str(tmp_path / "o" / "fedavg" / "clients_eval.csv")), "test_acc")
    assert sorted(per) == [0, 2, 4, 5]
    for r in metrics:
        assert (r["client_acc_mean"] != "") == (int(r["round"]) in per)


def test_regression_leaves_the_columns_empty(tmp_path):
    """The linear model scores an MSE: no client_acc_* cells and no clients_eval.csv rows."""
    path = make_scenario(tmp_path, clients=[([[1.0], [2.0]], [1.0, 2.0]),
                                            ([[1.0], [3.0], [2.0]], [1.0, 2.0, 2.5])],
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         **{"topology.clients.count": 2})
    out = run_outputs(path, out=tmp_path / "o")
    metrics = out.metrics["fedavg"]
    assert all(r["test_mse"] != "" for r in metrics)
    assert all(r[c] == "" for r in metrics for c in FAIRNESS_COLUMNS)
    assert _rows(str(tmp_path / "o" / "fedavg" / "clients_eval.csv")) == []


@pytest.mark.parametrize("name", ["fedavg", "ditto"])
def test_pause_and_resume_gives_the_same_clients_eval(tmp_path, name):
    path = _scenario(tmp_path, [{"name": name}], rounds=6, every=2)
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    res = run_scenario(sc, progress=False, stop_after=3)
    assert next(iter(res.values())).paused_at == 3
    # a crash after the checkpoint leaves rows past its offsets: the resume cuts them off
    with open(tmp_path / "cut" / name / "clients_eval.csv", "a") as fh:
        fh.write("4,0,9,0.5,\r\n")
    run_scenario(sc, progress=False, resume=True)
    for f in ("clients_eval.csv", "metrics.csv"):
        a = open(tmp_path / "ref" / name / f, "rb").read()
        b = open(tmp_path / "cut" / name / f, "rb").read()
        assert a == b, f
    assert len(_rows(str(tmp_path / "cut" / name / "clients_eval.csv"))) == 7 * 13


def test_spread_edge_cases():
    s = spread(np.array([0.0, 0.0]))
    assert s["mean"] == 0 and math.isnan(s["jain"])       # 0/0: left empty
    s = spread(np.array([0.5]))
    assert s["p10"] == s["p90"] == s["worst10"] == 0.5 and s["jain"] == 1.0
    assert all(math.isnan(v) for v in spread(np.array([])).values())
    # ceil(10%): 11 clients -> the lowest 2
    assert spread(np.arange(11) / 10)["worst10"] == pytest.approx(0.05)


def _table(md, heading="## Accuracy across clients"):
    """The section's table rows as cell lists."""
    part = md.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in part.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]


def test_report_section_numbers_and_figures(small_run):
    from hierfl.report.write import write_report

    md = open(write_report(small_run)).read()
    assert "Accuracy across clients</h2>" in open(os.path.join(small_run, "report.html")).read()
    rows = {(r[0], r[1]): r for r in _table(md)}
    assert sorted(rows) == [("ditto", "global"), ("ditto", "personal"), ("fedavg", "global")]
    keys = ["mean", "wmean", "std", "min", "p10", "p50", "p90", "worst10", "jain"]
    for (label, model), cells in rows.items():
        last = _rows(os.path.join(small_run, label, "metrics.csv"))[-1]
        prefix = "client_acc_" if model == "global" else "personal_client_acc_"
        assert cells[2] == last["round"] == "4"
        for k, cell in zip(keys, cells[3:]):
            assert float(cell) == pytest.approx(float(last[prefix + k]), abs=5e-5), (label, k)
    for f in ("client_accuracy_cdf", "client_accuracy_spread",
              "client_accuracy_spread_personal"):
        assert f"({f}.png)" in md and os.path.isfile(os.path.join(small_run, f + ".png"))


def test_report_has_no_section_without_the_data(tmp_path):
    """A regression run records no per-client accuracy: no section, no CDF figure."""
    from hierfl.report.write import write_report

    path = make_scenario(tmp_path, clients=[([[1.0], [2.0]], [1.0, 2.0]),
                                            ([[1.0], [3.0], [2.0]], [1.0, 2.0, 2.5])],
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         **{"topology.clients.count": 2})
    run_outputs(path, out=tmp_path / "o")
    md = open(write_report(str(tmp_path / "o"))).read()
    assert "Accuracy across clients" not in md
    assert not (tmp_path / "o" / "client_accuracy_cdf.png").exists()
    assert "client_accuracy" not in md


def test_read_last_eval_reads_only_the_final_round(small_run):
    from hierfl.outputs.fairness import read_last_eval

    f = os.path.join(small_run, "ditto", "clients_eval.csv")
    rows = [r for r in _rows(f) if r["round"] == "4"]
    for block in (16, 100, 1 << 16):           # the tail grown until a round before shows
        rnd, g, p = read_last_eval(f, block=block)
        assert rnd == 4
        assert g.tolist() == [float(r["test_acc"]) for r in rows]
        assert p.tolist() == [float(r["personal_test_acc"]) for r in rows]


def test_per_client_sums_by_chunks_equal_each_clients_rows():
    """global_metrics adds each test chunk's correct rows to the clients it touches (clients
    with no test rows, chunks that cut a client, several clients in one chunk)."""
    from hierfl.learn.evaluate import add_client_sums

    rng = np.random.default_rng(0)
    for _ in range(200):
        counts = rng.integers(0, 5, rng.integers(1, 30))
        off = np.concatenate([[0], np.cumsum(counts)])
        v = rng.integers(0, 2, off[-1]).astype(float)
        out = np.zeros(len(counts))
        step = int(rng.integers(1, 7))
        for i in range(0, len(v), step):
            add_client_sums(out, v[i:i + step], off, i)
        assert out.tolist() == [v[off[k]:off[k + 1]].sum() for k in range(len(counts))]
