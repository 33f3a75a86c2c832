"""The batched executor (all clients of a call at once, clients leaving the batch as their
budgets run out or their gamma target is met) and the sequential reference (one client at a
time, autograd gradients instead of the closed forms) agree on every registered algorithm:
same final global and personal models to 1e-5, same steps, same achieved gamma.

Cases per algorithm (default hyperparameters, tiny synthetic data, clients of different sizes
so local epochs give different step budgets):
- stragglers: half of the selected clients do a random number of epochs (budgets differ);
- gamma (algorithms with supports_gamma): local gamma 0.5 checked every 2 steps, so clients
  stop at different steps.
Algorithms added later are picked up from the registry."""
from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest
import yaml

from hierfl.algorithms.registry import REGISTRY
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

CASES = [(name, case) for name in sorted(REGISTRY) for case in ("stragglers", "gamma")
         if case == "stragglers" or REGISTRY[name].supports_gamma]


def _scenario(tmp_path, name: str, case: str):
    local = {"epochs": 3, "batch_size": 4, "lr": 0.05}
    doc = {
        "name": "agree", "seed": 3,
        "topology": {"edges": {"count": 2},
                     "clients": {"count": 6, "compute_flops": 1.0e9}},
        "data": {"name": "synthetic", "alpha": 0.5, "beta": 0.5, "dim": 5, "classes": 3,
                 "samples": {"dist": "uniform", "low": 9, "high": 30}},
        "model": {"name": "logreg"},
        "train": {"rounds": 2, "clients_per_round": 4, "local": local},
        "algorithms": [{"name": name}],
    }
    if case == "stragglers":
        doc["stragglers"] = {"fraction": 0.5, "drop": "never"}
    else:
        local.update(gamma=0.5, check_every=2, epochs=4, lr=0.2)
    path = tmp_path / "agree.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load(str(path), out=str(tmp_path / "out"))


def _run(sc, world, kind: str, out):
    ex = dataclasses.replace(sc.train.executor, kind=kind)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False)
    params = dict(np.load(out / "final_params.npz"))
    with open(out / "clients.csv") as fh:
        clients = list(csv.DictReader(fh))
    return params, clients


@pytest.mark.parametrize("name,case", CASES)
def test_batched_equals_sequential(tmp_path, name, case):
    sc, topo = _scenario(tmp_path, name, case)
    world = build_world(sc, topo)
    pb, cb = _run(sc, world, "batched", tmp_path / "batched")
    ps, cs = _run(sc, world, "sequential", tmp_path / "sequential")
    assert sorted(pb) == sorted(ps)
    w0 = world.w0.double().numpy()
    assert np.abs(pb["global"] - w0).max() > 1e-3            # it trained
    for key in pb:
        assert np.isfinite(pb[key]).all(), key
        np.testing.assert_allclose(pb[key], ps[key], rtol=0, atol=1e-5, err_msg=key)
    assert len(cb) == len(cs) > 0
    steps_b = np.array([int(r["steps"]) for r in cb])
    budget_b = np.array([int(r["budget"]) for r in cb])
    assert (steps_b == np.array([int(r["steps"]) for r in cs])).all()
    gb = np.array([float(r["gamma"] or "nan") for r in cb])
    gs = np.array([float(r["gamma"] or "nan") for r in cs])
    np.testing.assert_allclose(gb, gs, rtol=0, atol=1e-5)
    # the cases exercise what they are for: budgets that differ within one executor call
    # (epochs over clients of different sizes, stragglers) and, with gamma, early stops
    per_call: dict[tuple[str, str], set[int]] = {}
    for r in cb:
        per_call.setdefault((r["round"], r["edge_round"]), set()).add(int(r["steps"]))
    assert any(len(v) > 1 for v in per_call.values())
    if case == "stragglers":
        assert any(r["straggler"] == "1" for r in cb)
    elif REGISTRY[name].supports_gamma:
        assert (steps_b < budget_b).any()
