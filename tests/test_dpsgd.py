"""DP-SGD in the local steps (learn/dpsgd.py, issue 43's `sample_level`): per-sample clipping
and noise batched across clients, against hand computations and per-client loops; Poisson
sampling (learn/batches.poisson_plan); the round runner's hook (exec/round.py `_with_dp`)."""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from hierfl.config.schema import ModelSpec
from hierfl.exec.local import BatchedExecutor, SequentialExecutor
from hierfl.exec.round import RoundRunner
from hierfl.learn.batches import (Batch, full_plan, minibatch_plan, noise_keys,
                                  poisson_expected, poisson_plan)
from hierfl.learn.dpsgd import DPSGD, clipped_sum, per_sample_grads
from hierfl.learn.solver import TermsProgram
from hierfl.learn.terms import Prox
from hierfl.models.functional import Layer, Model
from hierfl.models.registry import build_model
from hierfl.models.torch_model import TorchModel
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario

INF = math.inf


def _problem(seed=0, counts=(13, 7, 21, 9, 16), d=4, k=3, dtype=torch.float64):
    """Logistic-regression clients of different sizes (offsets, x, y, model, start)."""
    g = torch.Generator().manual_seed(seed)
    counts = np.asarray(counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    x = torch.randn(int(offsets[-1]), d, generator=g, dtype=dtype)
    y = torch.randint(0, k, (int(offsets[-1]),), generator=g)
    model = Model([Layer(d, k, True)], "classification", "logreg")
    start = 0.5 * torch.randn(len(counts), model.n_params, generator=g, dtype=dtype)
    return offsets, x, y, model, start


def _dp(c, clip=1.0, z=0.0, seed=0, expected=None, path="auto"):
    return DPSGD(clip, z, noise_keys(seed, 1, 0, np.arange(c)), expected, path)


def _small_cnn():
    return build_model(ModelSpec(name="cnn", options={"channels": [2, 3], "dense": 5}),
                       64, 3, 3, (1, 8, 8))


class _Norm(nn.Module):
    """A module with no grouped plan (LayerNorm): the "func" path."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Tanh(), nn.Linear(5, 3))

    def forward(self, x):
        return self.net(x)


# ----------------------------------------------------------------------------- one step
def test_no_noise_and_no_clip_is_the_sgd_step():
    """z = 0, C = inf: the DP-SGD step is plain (proximal) SGD's, with a short padded batch."""
    offsets, x, y, model, start = _problem()
    plan = minibatch_plan(offsets, np.arange(5), 4, np.full(5, 3), 1, 1, 0, x, y)
    terms = (Prox(0.3, start[0].clone()),)
    plain = TermsProgram(model, start, terms)
    dp = dataclasses.replace(plain, dp=_dp(5, clip=INF))
    s, sd = plain.init(), dp.init()
    for i in range(3):
        s, sd = plain.step(s, plan.at(i), 0.1), dp.step(sd, plan.at(i), 0.1)
    assert (plan.weights == 0).any()                  # padding was there
    torch.testing.assert_close(sd[0], s[0], rtol=0, atol=1e-12)
    assert sd[1].tolist() == [[3]] * 5                 # the noise's step counter


def test_small_clip_equals_a_hand_computation():
    """One weight, squared error: g_i = 2 (w x_i - y_i) x_i, clipped to |g_i| <= C, averaged
    over the rows of the batch (a short batch: over its own rows), one SGD step."""
    model = Model([Layer(1, 1, False)], "regression", "w")
    x = torch.tensor([[1.0], [2.0], [-1.0], [0.5], [3.0]], dtype=torch.float64)
    y = torch.tensor([[0.0], [1.0], [2.0], [0.2], [-1.0]], dtype=torch.float64)
    w0, clip, lr = 0.4, 0.9, 0.1
    rows = torch.tensor([[[0, 1, 2], [3, 4, 0]]])          # step 2: two rows and padding
    m = torch.tensor([[[1 / 3] * 3, [0.5, 0.5, 0.0]]], dtype=torch.float64)
    plan = minibatch_plan(np.array([0, 5]), np.array([0]), 3, np.array([2]), 0, 1, 0, x, y)
    plan = dataclasses.replace(plan, rows=rows, weights=m)
    prog = TermsProgram(model, torch.tensor([[w0]], dtype=torch.float64), dp=_dp(1, clip))
    s = prog.init()
    w = w0
    for step, idx in enumerate(([0, 1, 2], [3, 4])):
        gs = [2 * (w * float(x[i, 0]) - float(y[i, 0])) * float(x[i, 0]) for i in idx]
        clipped = [g * min(1.0, clip / abs(g)) for g in gs]
        assert any(abs(g) > clip for g in gs)
        w = w - lr * sum(clipped) / len(idx)
        s = prog.step(s, plan.at(step), lr)
        assert float(s[0]) == pytest.approx(w, abs=1e-12)


@pytest.mark.parametrize("case", ["logreg", "mlp", "cnn", "func-only"])
def test_per_sample_gradients_batched_equal_a_per_client_loop(case):
    """sum_i m_i clip(g_i) of C clients at once ("layers" and "func" paths) equals a loop over
    clients and rows, each row's gradient by the model's own one-client gradient."""
    g = torch.Generator().manual_seed(1)
    if case == "cnn":
        model = _small_cnn()
        d = 64
    elif case == "func-only":
        model = TorchModel(_Norm(), (6,), "classification", "norm")
        d = 6
    else:
        layers = [Layer(6, 3, True)] if case == "logreg" else \
            [Layer(6, 5, True), Layer(5, 4, False), Layer(4, 3, True)]
        model = Model(layers, "classification", case)
        d = 6
    c, b = 3, 5
    w = torch.stack([model.init(g) for _ in range(c)]) * 2
    x = torch.rand(c, b, d, generator=g)
    y = torch.randint(0, 3, (c, b), generator=g)
    m = torch.full((c, b), 1 / b)
    m[1, 3:] = 0                                      # padding contributes nothing
    rows = [[model.grad(w[k:k + 1], x[k:k + 1, i:i + 1], y[k:k + 1, i:i + 1],
                        torch.ones(1, 1))[0] for i in range(b)] for k in range(c)]
    clip = float(np.median([float(gi.norm()) for r in rows for gi in r]))  # half clipped
    ref = torch.stack([sum(float(m[k, i]) * gi * min(1.0, clip / float(gi.norm()))
                           for i, gi in enumerate(r)) for k, r in enumerate(rows)])
    paths = ["func"] if case == "func-only" else ["layers", "func"]
    for path in paths:
        got = clipped_sum(model, w, x, y, m, clip, path)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(per_sample_grads(model, w, x, y),
                               torch.stack([torch.stack(r) for r in rows]), rtol=1e-5, atol=1e-6)
    if case == "func-only":
        with pytest.raises(ValueError, match="per-layer"):
            clipped_sum(model, w, x, y, m, clip, "layers")


@pytest.mark.parametrize("sampling", ["fixed", "poisson"])
def test_noise_has_std_z_c_over_the_batch_size(sampling):
    """The noise of a step (the DP gradient less the same with z = 0) has mean 0 and std
    z C / B_k over ~40,000 coordinates: B_k the rows of the step (fixed; a short batch has its
    own) or the expected batch size (Poisson); clients' draws differ."""
    d, k, c = 100, 10, 40
    counts = [23] * (c // 2) + [50] * (c // 2)
    offsets, x, y, _, _ = _problem(2, counts, d, k)
    model = Model([Layer(d, k, True)], "classification", "logreg")
    w = torch.zeros(c, model.n_params, dtype=torch.float64)
    clip, z, batch = 0.7, 1.3, 10
    if sampling == "poisson":
        plan = poisson_plan(offsets, np.arange(c), batch, np.full(c, 3), 0, 1, 0, x, y)
        expected = torch.from_numpy(poisson_expected(np.asarray(counts), batch)).unsqueeze(1)
        den = expected
    else:
        plan = minibatch_plan(offsets, np.arange(c), batch, np.full(c, 3), 0, 1, 0, x, y)
        expected = None
    b = plan.at(2)                                    # 23 rows: a last batch of 3
    if sampling == "fixed":
        den = (b.m > 0).sum(1, keepdim=True).double()
        assert sorted(set(den.flatten().tolist())) == [3.0, 10.0]
    count = torch.full((c, 1), 2)
    noisy = _dp(c, clip, z, expected=expected).grad(model, w, b, count)
    clean = _dp(c, clip, 0.0).grad(model, w, b, count)
    e = (noisy - clean) * den / (z * clip)           # N(0, 1) if the scale is right
    assert abs(float(e.mean())) < 0.02
    assert float(e.std()) == pytest.approx(1.0, abs=0.02)
    assert not torch.allclose(noisy[0] - clean[0], noisy[1] - clean[1])


# ----------------------------------------------------------------------------- executors
def _round(seed=0, executor=None, sampling="poisson", z=1.0, clients=None):
    offsets, x, y, model, start = _problem()
    sel = np.arange(5) if clients is None else np.asarray(clients)
    budgets = np.array([6, 3, 8, 0, 5])[sel]
    make = poisson_plan if sampling == "poisson" else minibatch_plan
    plan = make(offsets, sel, 4, budgets, seed, 2, 1, x, y)
    expected = None if sampling != "poisson" else \
        torch.from_numpy(poisson_expected(offsets[sel + 1] - offsets[sel], 4)).unsqueeze(1)
    dp = DPSGD(0.5, z, noise_keys(seed, 2, 1, sel), expected)
    prog = TermsProgram(model, start[sel], (Prox(0.1, start[0].clone()),), dp=dp)
    full = full_plan(offsets, sel, x, y).at(0)
    ex = executor or BatchedExecutor()
    return ex.run(prog, plan, full, torch.from_numpy(budgets), 0.2, None, 5, measure=False)


@pytest.mark.parametrize("sampling", ["fixed", "poisson"])
def test_batched_equals_sequential_and_company_does_not_matter(sampling):
    got = _round(sampling=sampling)
    ref = _round(sampling=sampling, executor=SequentialExecutor())
    torch.testing.assert_close(got.state[0], ref.state[0], rtol=0, atol=1e-10)
    assert got.steps.tolist() == ref.steps.tolist() == [6, 3, 8, 0, 5]
    alone = _round(sampling=sampling, clients=[2, 4])      # other company, other padding
    torch.testing.assert_close(alone.state[0], got.state[0][[2, 4]], rtol=0, atol=1e-10)


def test_same_seed_same_result_other_seed_other():
    a, b, other = _round(1), _round(1), _round(2)
    assert torch.equal(a.state[0], b.state[0])
    moved = (a.state[0] - other.state[0]).abs().amax(1)
    assert (moved[[0, 1, 2, 4]] > 1e-3).all() and moved[3] == 0   # client 3: no step


# ----------------------------------------------------------------------------- sampling
def test_poisson_batches_have_mean_q_n_and_are_seeded():
    """Rows drawn independently with q = B / n_k: the batch size's mean and variance are the
    binomial's over 3,000 steps; rows are the client's own, distinct, weighted 1 / (q n_k);
    the same (seed, client, round, edge round) gives the same batches, in any company."""
    counts = np.array([40, 8, 25])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    x = torch.zeros(int(offsets[-1]), 2)
    y = torch.zeros(int(offsets[-1]), dtype=torch.long)
    steps = np.array([3000, 3000, 2000])
    plan = poisson_plan(offsets, np.arange(3), 10, steps, 7, 3, 1, x, y)
    sizes = (plan.weights > 0).sum(2).numpy()
    for k, n in enumerate(counts):
        q = min(1.0, 10 / n)
        s = sizes[k, :steps[k]]
        assert s.mean() == pytest.approx(n * q, abs=4 * math.sqrt(n * q * (1 - q) / len(s)) + 1e-9)
        assert s.var() == pytest.approx(n * q * (1 - q), rel=0.15, abs=1e-9)
        live = plan.weights[k, :steps[k]] > 0
        r = plan.rows[k, :steps[k]][live]
        assert ((r >= offsets[k]) & (r < offsets[k + 1])).all()
        assert plan.weights[k, :steps[k]][live].eq(np.float32(1 / (n * q))).all()
        one = plan.rows[k, 5][plan.weights[k, 5] > 0]
        assert len(set(one.tolist())) == len(one)
    assert (sizes[1] == 8).all() and (sizes[2, 2000:] == 0).all()     # q = 1; past the budget
    assert sizes[0].min() < sizes[0].max()                            # sizes vary
    again = poisson_plan(offsets, np.arange(3), 10, steps, 7, 3, 1, x, y)
    assert torch.equal(plan.rows, again.rows) and torch.equal(plan.weights, again.weights)
    alone = poisson_plan(offsets, np.array([2]), 10, steps[2:], 7, 3, 1, x, y)
    wd = alone.rows.shape[2]
    assert torch.equal(alone.weights[0], plan.weights[2, :2000, :wd])
    live = alone.weights[0] > 0
    assert torch.equal(alone.rows[0][live], plan.rows[2, :2000, :wd][live])
    other = poisson_plan(offsets, np.arange(3), 10, steps, 7, 4, 1, x, y)
    assert not torch.equal(plan.weights, other.weights)


# ----------------------------------------------------------------------------- the hook
def _run(tmp_path, monkeypatch, tag, privacy):
    """A small FedAvg run with the entry's `privacy:` (None: without the key)."""
    entry = {"name": "fedavg"} if privacy is None else {"name": "fedavg", "privacy": privacy}
    path = make_scenario(tmp_path, name="dp", seed=4,
                         topology={"edges": {"count": 1}, "clients": {"count": 5}},
                         data={"name": "synthetic", "dim": 5, "classes": 3,
                               "samples": {"dist": "uniform", "low": 9, "high": 30}},
                         train={"rounds": 2, "clients_per_round": 4,
                                "local": {"epochs": 2, "batch_size": 4, "lr": 0.1}},
                         algorithms=[entry])
    sc = load(path, out=str(tmp_path / tag))
    run_algorithm(sc, sc.algorithms[0], build_world(sc), str(tmp_path / tag), progress=False)
    return dict(np.load(tmp_path / tag / "final_params.npz"))["global"]


def _privacy(clip, z, sampling):
    return {"kind": "sample_level", "clip": "inf" if clip == INF else clip,
            "noise_multiplier": z, "sampling": sampling}


def test_runner_hook_z0_c_inf_is_the_run_without_privacy(tmp_path, monkeypatch):
    base = _run(tmp_path, monkeypatch, "none", None)
    flat = _run(tmp_path, monkeypatch, "dp0", _privacy(INF, 0.0, "fixed"))
    np.testing.assert_allclose(flat, base, rtol=0, atol=1e-6)
    noisy = _run(tmp_path, monkeypatch, "dp", _privacy(1.0, 1.0, "poisson"))
    again = _run(tmp_path, monkeypatch, "dp2", _privacy(1.0, 1.0, "poisson"))
    assert np.isfinite(noisy).all() and np.abs(noisy - base).max() > 1e-3
    np.testing.assert_array_equal(noisy, again)


def test_refusals():
    model = build_model(ModelSpec(name="cnn", options={"channels": [2], "dense": 0,
                                                       "dropout": 0.5}), 64, 3, 3, (1, 8, 8))
    prog = TermsProgram(model, torch.zeros(1, model.n_params))
    from hierfl.learn.dpsgd import attach
    with pytest.raises(TypeError, match="per-client state"):
        attach(prog, SimpleNamespace(**_privacy(1.0, 1.0, "fixed")), np.array([10]), 4, 0,
               np.array([0]), 1, 0)
    with pytest.raises(ValueError, match="stateful"):
        TermsProgram(model, prog.start, keys=torch.zeros(1, 1, dtype=torch.long),
                     buffers0=torch.zeros(1, 0), dp=_dp(1))
    with pytest.raises(ValueError, match="finite clip"):
        _dp(1, INF, 1.0)
