"""Same scenario + seed twice: byte-identical outputs. The batched executor (closed-form
gradients, all clients at once) and the sequential one (autograd, one client at a time) agree."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import make_scenario, run_outputs


def _scenario(tmp_path, model: dict, executor: str = "batched", name: str = "det") -> str:
    return make_scenario(
        tmp_path, name=name, seed=4,
        topology={
            "edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.25e8}},
            "clients": {"count": 8, "assignment": "round_robin",
                        "compute_flops": {"dist": "lognormal", "median": 1.0e9, "sigma": 0.5},
                        "link": {"latency_s": {"dist": "uniform", "low": 0.01, "high": 0.1},
                                 "bandwidth_Bps": 2.5e6}}},
        data={"name": "synthetic", "alpha": 1.0, "beta": 1.0, "dim": 10, "classes": 5,
              "samples": {"dist": "uniform", "low": 20, "high": 60}},
        model=model,
        train={"rounds": 3, "clients_per_round": 5,
               "local": {"steps": 6, "batch_size": 7, "lr": 0.05},
               "executor": {"kind": executor}},
        algorithms=[{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])


def test_same_seed_same_bytes(tmp_path):
    path = _scenario(tmp_path, {"name": "logreg"})
    ra, rb = run_outputs(path, out=tmp_path / "a"), run_outputs(path, out=tmp_path / "b")
    for algo in ("fedavg", "hierfavg"):
        for f in ("metrics.csv", "trace.csv", "clients.csv"):
            a = (tmp_path / "a" / algo / f).read_bytes()
            assert a == (tmp_path / "b" / algo / f).read_bytes(), (algo, f)
        rows = (tmp_path / "a" / algo / "metrics.csv").read_text().splitlines()
        assert len(rows) == 1 + 4                      # header + rounds 0..3
    assert np.array_equal(ra.final("fedavg"), rb.final("fedavg"))
    # and another seed gives another run
    run_outputs(path, seed=5, out=tmp_path / "c")
    assert ((tmp_path / "c" / "fedavg" / "metrics.csv").read_bytes()
            != (tmp_path / "a" / "fedavg" / "metrics.csv").read_bytes())


@pytest.mark.parametrize("model", [{"name": "logreg"}, {"name": "mlp", "hidden": [8]}],
                         ids=["logreg", "mlp"])
def test_batched_and_sequential_executors_agree(tmp_path, model):
    params = {}
    for kind in ("batched", "sequential"):
        out = run_outputs(_scenario(tmp_path, model, kind, name=kind), out=tmp_path / kind)
        params[kind] = {a: out.final(a) for a in ("fedavg", "hierfavg")}
    for a in ("fedavg", "hierfavg"):
        assert np.abs(params["batched"][a]).max() > 0.05
        np.testing.assert_allclose(params["sequential"][a], params["batched"][a],
                                   atol=1e-5, rtol=0)
