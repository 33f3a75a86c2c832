"""Energy in the summary tables (issue 18): a report's table.csv and a sweep's points.csv and
sweep.csv end with the clients' energy — energy_total_j, the sum of clients.csv's energy_j over
the run (= metrics.csv's last energy_total_j), and energy_to_target_j, the cumulative energy at
the first evaluation reaching the target; empty where a run recorded no energy."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from hierfl import sweep as sw
from hierfl.report.write import write_report

from conftest import make_scenario, run_outputs
from test_energy import _doc, _f


def _table(path) -> dict[tuple[str, str], dict[str, str]]:
    with open(path, newline="") as fh:
        return {(r["algorithm"], r["metric"]): r for r in csv.DictReader(fh)}


def test_table_csv_energy_is_the_sum_of_the_clients_joules(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])
    doc["train"]["eval_every"] = 1
    out = tmp_path / "out"
    o = run_outputs(make_scenario(tmp_path, doc), out=out)
    target = _f(o.metrics["fedavg"][1], "test_mse")           # reached by fedavg at round 1
    write_report(str(out), target=target)
    table = _table(out / "table.csv")
    metrics = [r["metric"] for r in csv.DictReader(open(out / "table.csv", newline=""))
               if r["algorithm"] == "fedavg"]
    assert metrics[-2:] == ["energy_total_j", "energy_to_target_j"]      # the last rows
    for label in ("fedavg", "hierfavg"):
        joules = math.fsum(_f(r, "energy_j") for r in o.clients[label])
        assert joules > 0
        row = table[label, "energy_total_j"]
        assert float(row["mean"]) == pytest.approx(joules, rel=1e-12)
        assert float(row["mean"]) == pytest.approx(_f(o.metrics[label][-1], "energy_total_j"),
                                                   rel=1e-12)
        assert row["count"] == "1" and row["std"] == ""
    first = next(m for m in o.metrics["fedavg"] if _f(m, "test_mse") <= target)
    assert float(table["fedavg", "energy_to_target_j"]["mean"]) == _f(first, "energy_total_j")
    assert 0 < _f(first, "energy_total_j") < float(table["fedavg", "energy_total_j"]["mean"])


def test_table_csv_energy_is_empty_without_powers(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}], powers=False)
    out = tmp_path / "out"
    run_outputs(make_scenario(tmp_path, doc), out=out)
    write_report(str(out))
    table = _table(out / "table.csv")
    for m in ("energy_total_j", "energy_to_target_j"):
        assert (table["fedavg", m]["mean"], table["fedavg", m]["count"]) == ("", "0")


def test_sweep_summary_ends_with_energy(tmp_path):
    """Two seeds of one point, metrics by hand: round, time, accuracy, round joules."""
    out = tmp_path / "out"
    runs = {0: [(0, 0.2, 0.0), (1, 0.5, 2.0), (2, 0.6, 3.0)],
            1: [(0, 0.2, 0.0), (1, 0.9, 1.0), (2, 0.7, 5.0)]}
    points = []
    for seed, rows in runs.items():
        folder = out / f"seed={seed}"
        (folder / "fedavg").mkdir(parents=True)
        total, lines = 0.0, []
        for t, acc, joules in rows:
            total += joules
            lines.append(f"{t},{t},{100 * t},{50 * t},{acc},{joules},{total}\n")
        (folder / "fedavg" / "metrics.csv").write_text(
            "round,sim_time_s,bytes_up,bytes_down,test_acc,energy_j,energy_total_j\n"
            + "".join(lines))
        (folder / sw.DONE).write_text("{}\n")
        points.append(sw.Point(folder.name, (("seed", seed),), "", 1))
    s = sw.Sweep(str(tmp_path / "sw.yaml"), ("seed",), tuple(points), str(out), 0.8, ("fedavg",))
    sw.summarize(s)
    with open(out / "points.csv", newline="") as fh:
        head, *pts = list(csv.reader(fh))
    assert head[-2:] == ["energy_total_j", "energy_to_target_j"]
    assert [p[-2:] for p in pts] == [["5.0", ""], ["6.0", "1.0"]]   # seed 1 reaches 0.8 at t=1
    with open(out / "sweep.csv", newline="") as fh:
        head, row = list(csv.reader(fh))
    assert head[-4:] == ["energy_total_j_mean", "energy_total_j_std", "energy_to_target_j_mean",
                         "energy_to_target_j_std"]
    assert float(row[-4]) == 5.5
    assert float(row[-3]) == pytest.approx(np.std([5.0, 6.0], ddof=1), abs=1e-12)
    assert row[-2:] == ["1.0", ""]
