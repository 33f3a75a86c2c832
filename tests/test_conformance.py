"""Every registered algorithm through the real CLI on one tiny scenario: the output contract
(files, columns, finite numbers, personal models saved for personalised algorithms)."""
from __future__ import annotations

import csv
import math
import os
import subprocess
import sys

import numpy as np
import yaml

from hierfl.algorithms.registry import REGISTRY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTRACT = ["round", "sim_time_s", "bytes_up", "bytes_down", "bytes_client_edge",
            "bytes_edge_cloud", "train_loss", "test_acc"]


def test_every_algorithm_honours_the_output_contract(tmp_path):
    algos = []
    for name, cls in sorted(REGISTRY.items()):
        entry = {"name": name}
        if cls.hierarchical:
            entry["edge_rounds"] = 2
        algos.append(entry)
    doc = {"name": "conformance", "seed": 0,
           "topology": {"edges": {"count": 2}, "clients": {"count": 6, "compute_flops": 1e8}},
           "data": {"name": "synthetic", "samples": 30, "dim": 6, "classes": 3},
           "model": {"name": "logreg"},
           "train": {"rounds": 2, "clients_per_round": 4,
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.05}},
           "algorithms": algos}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "hierfl", "run", str(path), "--out", str(out),
                        "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert os.path.isfile(out / "report.md")
    report = (out / "report.md").read_text()
    p_model = 6 * 3 + 3
    for name, cls in REGISTRY.items():
        folder = out / name
        assert name in report
        with open(folder / "metrics.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert set(CONTRACT) <= set(rows[0]), name
        assert [int(x["round"]) for x in rows] == [0, 1, 2], name
        for row in rows:
            for key in CONTRACT:
                assert math.isfinite(float(row[key])), (name, key, row[key])
            assert row["diverged"] == "0", name
            if cls.personalised:
                assert math.isfinite(float(row["personal_test_acc"])), name
        times = [float(x["sim_time_s"]) for x in rows]
        assert times[0] == 0 and times[1] > 0 and times[2] > times[1], name
        assert float(rows[-1]["bytes_up"]) > 0 and float(rows[-1]["bytes_down"]) > 0, name
        with np.load(folder / "final_params.npz") as z:
            assert z["global"].shape == (p_model,) and np.isfinite(z["global"]).all(), name
            personal = sorted(k for k in z.files if k.startswith("client_"))
            assert len(personal) == (6 if cls.personalised else 0), name
        with open(folder / "clients.csv", newline="") as fh:
            crow = list(csv.DictReader(fh))
        assert crow and {"client", "steps", "budget", "compute_s", "gamma"} <= set(crow[0])
        with open(folder / "trace.csv", newline="") as fh:
            kinds = {x["kind"] for x in csv.DictReader(fh)}
        assert {"send", "recv", "compute_start", "compute_end", "aggregate"} <= kinds, name
