"""Every registered algorithm through the real CLI on one tiny scenario: the output contract
(files, columns, finite numbers, personal models saved for personalised algorithms)."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np

from hierfl.algorithms.registry import REGISTRY

from conftest import make_scenario, outputs_of, read_csv

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
    path = make_scenario(tmp_path, name="conformance", algorithms=algos,
                         topology={"edges": {"count": 2},
                                   "clients": {"count": 6, "compute_flops": 1e8}},
                         data={"name": "synthetic", "samples": 30, "dim": 6, "classes": 3},
                         train={"rounds": 2, "clients_per_round": 4,
                                "local": {"steps": 3, "batch_size": 5, "lr": 0.05}})
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "hierfl", "run", path, "--out", str(out),
                        "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert os.path.isfile(out / "report.md")
    report = (out / "report.md").read_text()
    p_model = 6 * 3 + 3
    parsed = outputs_of(str(out), list(REGISTRY))
    for name, cls in REGISTRY.items():
        folder = out / name
        assert name in report
        rows = parsed.metrics[name]
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
        z = parsed.params[name]
        assert z["global"].shape == (p_model,) and np.isfinite(z["global"]).all(), name
        personal = sorted(k for k in z if k.startswith("client_"))
        assert len(personal) == (6 if cls.personalised else 0), name
        crow = parsed.clients[name]
        assert crow and {"client", "steps", "budget", "compute_s", "gamma"} <= set(crow[0])
        kinds = {x["kind"] for x in read_csv(folder / "trace.csv")}
        assert {"send", "recv", "compute_start", "compute_end", "aggregate"} <= kinds, name
