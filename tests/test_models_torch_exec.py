"""The batched executor equals the sequential reference on a CNN (as tests/test_executors_agree.py
checks for the closed-form models): every algorithm with stragglers (budgets that differ within
a call; FedAvg, FedProx and SCAFFOLD on both gradient paths) and FedProx with a gamma target
(early stops); and a small CNN learns on digits through `hierfl run`.

The sequential executor takes each client's model through `model.reference()` (plain
per-client autograd; for a TorchModel the loop path, whatever `batching` the batched run
uses)."""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from hierfl.algorithms.registry import REGISTRY
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

CASES = [(name, batching, "stragglers") for name in sorted(REGISTRY)
         for batching in (("vmap", "loop") if name in ("fedavg", "fedprox", "scaffold")
                          else ("vmap",))]
CASES += [("fedprox", "vmap", "gamma"), ("fedprox", "loop", "gamma")]


def _scenario(tmp_path, name: str, case: str, rounds: int = 2):
    local = {"epochs": 2, "batch_size": 4, "lr": 0.1}
    doc = {
        "name": "agree_cnn", "seed": 3,
        "topology": {"edges": {"count": 2}, "clients": {"count": 6, "compute_flops": 1.0e9}},
        "data": {"name": "synthetic", "alpha": 0.5, "beta": 0.5, "dim": 16, "classes": 3,
                 "samples": {"dist": "uniform", "low": 9, "high": 30}},
        "model": {"name": "cnn", "channels": [2, 3], "dense": 4, "kernel": 3},
        "train": {"rounds": rounds, "clients_per_round": 4, "local": local},
        # ProxSkip's steps are its coin's: p = 0.1 draws 27 in round 1 (stragglers then differ)
        "algorithms": [{"name": name, **({"p": 0.1} if name == "proxskip" else {})}],
    }
    if case == "stragglers":
        doc["stragglers"] = {"fraction": 0.5, "drop": "never"}
    else:
        local.update(gamma=0.6, check_every=2, epochs=3, lr=0.3)
    path = tmp_path / "agree.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load(str(path), out=str(tmp_path / "out"))


def _run(sc, world, kind: str, out):
    ex = dataclasses.replace(sc.train.executor, kind=kind)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False)
    with open(out / "clients.csv") as fh:
        return dict(np.load(out / "final_params.npz")), list(csv.DictReader(fh))


@pytest.mark.parametrize("name,batching,case", CASES)
def test_cnn_batched_equals_sequential(tmp_path, name, case, batching):
    core = name in ("fedavg", "fedprox", "scaffold")
    sc = _scenario(tmp_path, name, case, rounds=2 if core else 1)
    world = build_world(sc)
    assert world.model.name == "cnn" and world.model.batching == "vmap"     # auto: small
    world.model.batching = batching
    pb, cb = _run(sc, world, "batched", tmp_path / "batched")
    ps, cs = _run(sc, world, "sequential", tmp_path / "sequential")
    w0 = world.w0.double().numpy()
    assert np.abs(pb["global"] - w0).max() > 1e-3                          # it trained
    assert sorted(pb) == sorted(ps)
    for key in pb:                                    # the global model and personal ones
        assert np.isfinite(pb[key]).all(), key
        np.testing.assert_allclose(pb[key], ps[key], rtol=1e-5, atol=1e-6, err_msg=key)
    steps_b = [int(r["steps"]) for r in cb]
    assert steps_b == [int(r["steps"]) for r in cs]
    np.testing.assert_allclose([float(r["gamma"] or "nan") for r in cb],
                               [float(r["gamma"] or "nan") for r in cs], rtol=1e-5, atol=1e-6)
    if case == "stragglers":
        assert any(r["straggler"] == "1" for r in cb)
        assert len(set(steps_b)) > 1
    else:
        assert any(s < int(r["budget"]) for s, r in zip(steps_b, cb))       # early stops


def test_digits_cnn_learns(tmp_path):
    """The shipped digits_cnn scenario (FedAvg only, 8 rounds) through `hierfl run`."""
    from hierfl.cli import main

    root = Path(__file__).resolve().parent.parent
    doc = yaml.safe_load((root / "scenarios" / "digits_cnn.yaml").read_text())
    doc["topology"] = str(root / "topologies" / "three_tier_small.yaml")
    doc["algorithms"] = [{"name": "fedavg"}]
    doc["train"]["local"]["lr"] = 0.3
    path = tmp_path / "cnn.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--rounds", "6", "--out", str(tmp_path / "out"),
                 "--no-report"]) == 0
    with open(tmp_path / "out" / "fedavg" / "metrics.csv") as fh:
        acc = [float(r["test_acc"]) for r in csv.DictReader(fh)]
    assert acc[0] < 0.2 and max(acc[-2:]) > 0.5 and acc[-1] > acc[0] + 0.3
