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

import dataclasses

import numpy as np
import pytest

from hierfl.algorithms.registry import REGISTRY
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario, read_csv

CASES = [(name, case) for name in sorted(REGISTRY) for case in ("stragglers", "gamma")
         if case == "stragglers" or REGISTRY[name].supports_gamma]


def _scenario(tmp_path, name: str, case: str):
    local = {"epochs": 3, "batch_size": 4, "lr": 0.05}
    extra = {}
    if case == "stragglers":
        extra["stragglers"] = {"fraction": 0.5, "drop": "never"}
    else:
        local.update(gamma=0.5, check_every=2, epochs=4, lr=0.2)
    path = make_scenario(
        tmp_path, name="agree", seed=3,
        topology={"edges": {"count": 2}, "clients": {"count": 6, "compute_flops": 1.0e9}},
        data={"name": "synthetic", "alpha": 0.5, "beta": 0.5, "dim": 5, "classes": 3,
              "samples": {"dist": "uniform", "low": 9, "high": 30}},
        train={"rounds": 2, "clients_per_round": 4, "local": local},
        algorithms=[{"name": name}], **extra)
    return load(path, out=str(tmp_path / "out"))


def _run(sc, world, kind: str, out):
    ex = dataclasses.replace(sc.train.executor, kind=kind)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False)
    params = dict(np.load(out / "final_params.npz"))
    return params, read_csv(out / "clients.csv")


@pytest.mark.parametrize("name,case", CASES)
def test_batched_equals_sequential(tmp_path, name, case):
    sc = _scenario(tmp_path, name, case)
    world = build_world(sc)
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


@pytest.mark.parametrize("task,bias,out", [("classification", True, 3),
                                           ("classification", False, 3),
                                           ("regression", True, 1), ("regression", False, 2)])
def test_fused_steps_equal_reference_on_every_affine_model(task, bias, out):
    """The fused SGD of one-layer models (both tasks, with and without bias, prox with a
    per-client mu plus a linear term, budgets that differ) against the sequential reference."""
    import torch

    from hierfl.exec.local import BatchedExecutor, SequentialExecutor
    from hierfl.learn.batches import full_plan, minibatch_plan
    from hierfl.learn.solver import TermsProgram
    from hierfl.learn.terms import Linear, Prox
    from hierfl.models.functional import Layer, Model

    g = torch.Generator().manual_seed(5)
    counts = np.array([7, 12, 5, 9])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    n, d = int(offsets[-1]), 4
    x = torch.randn(n, d, generator=g)
    if task == "classification":
        y = torch.randint(0, out, (n,), generator=g)
    else:
        y = torch.randn(n, generator=g) if out == 1 else torch.randn(n, out, generator=g)
    model = Model([Layer(d, out, bias)], task, "m")
    start = 0.1 * torch.randn(4, model.n_params, generator=g)
    terms = (Prox(torch.tensor([[0.5], [1.0], [0.0], [2.0]]), start[0].clone()),
             Linear(0.05 * torch.randn(4, model.n_params, generator=g)))
    prog = TermsProgram(model, start, terms)
    sel = np.arange(4)
    budgets = np.array([9, 4, 0, 13])
    plan = minibatch_plan(offsets, sel, 3, budgets, 1, 1, 0, x, y)
    full = full_plan(offsets, sel, x, y).at(0)
    assert prog.run_steps((start,), plan.span(0, 2), 0.1) is not None     # the fused path
    args = (torch.from_numpy(budgets), 0.1, None, 5)
    got = BatchedExecutor().run(prog, plan, full, *args)
    ref = SequentialExecutor().run(prog, plan, full, *args)
    assert float((got.state[0] - start).abs().max()) > 1e-2
    torch.testing.assert_close(got.state[0], ref.state[0], rtol=0, atol=1e-6)
    assert got.steps.tolist() == [9, 4, 0, 13]
    torch.testing.assert_close(got.state[0][2], start[2], rtol=0, atol=0)  # no budget: unchanged
