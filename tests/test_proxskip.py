"""ProxSkip / Scaffnew through the engine against a numpy recursion of the paper's Algorithm 1
on the heterogeneous least squares of test_algorithms_drift (full-batch GD, every client every
round), with the same coin flips; its fixed point; and the engine charging the steps the coin
chose (compute time, clients.csv).

grad F_k(x) = H_k x - b_k (test_algorithms_drift's docstring)."""
from __future__ import annotations

import numpy as np

from hierfl.algorithms.proxskip.algorithm import communication_steps

from conftest import run_outputs
from test_algorithms_drift import COUNTS, fedavg_fixed_point, hess, minimiser, quad_data, scenario

SEED = 1      # test_algorithms_drift.scenario's seed
D = 3


def proxskip_recursion(data, p: float, lr: float, rounds: int) -> np.ndarray:
    """Algorithm 1 (psi = consensus), one round per communication: the local steps of round t
    are the coin's (communication_steps, one coin per step for all clients)."""
    hb = hess(data)
    n = len(data)
    xbar, h = np.zeros(D), np.zeros((n, D))
    for t in range(1, rounds + 1):
        steps = communication_steps(SEED, t, p)
        xhat = np.tile(xbar, (n, 1))
        for _ in range(steps):
            for k, (hk, bk) in enumerate(hb):
                xhat[k] = xhat[k] - lr * (hk @ xhat[k] - bk - h[k])
        xbar = np.mean(xhat - (lr / p) * h, axis=0)
        h = h + (p / lr) * (xbar - xhat)
    return xbar


def test_coin_is_geometric_seeded_and_shared():
    draws = [communication_steps(SEED, t, 0.25) for t in range(1, 401)]
    assert draws == [communication_steps(SEED, t, 0.25) for t in range(1, 401)]
    assert min(draws) >= 1 and len(set(draws)) > 4
    assert abs(np.mean(draws) - 4.0) < 0.6            # mean 1/p (sd of the mean ~0.17)
    assert all(communication_steps(SEED, t, 1.0) == 1 for t in range(1, 20))


def test_proxskip_follows_algorithm_1_and_charges_the_coins_steps(tmp_path):
    data = quad_data()
    p, lr, rounds = 0.3, 0.02, 5
    path = scenario(tmp_path, data, [{"name": "proxskip", "p": p}], steps=7, lr=lr,
                    rounds=rounds, name="short")
    out = run_outputs(path)
    want = proxskip_recursion(data, p, lr, rounds)
    got = out.final("proxskip")
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
    # the round's steps are the coin's, for every client (not train.local.steps = 7)
    coins = [communication_steps(SEED, t, p) for t in range(1, rounds + 1)]
    assert len(set(coins)) > 1
    rows = out.clients["proxskip"]
    assert len(rows) == rounds * len(COUNTS)
    per_step = {}       # compute seconds per step: the client's full batch, the same each round
    for r in rows:
        t, k = int(r["round"]), int(r["client"])
        assert int(r["steps"]) == int(r["budget"]) == coins[t - 1]
        per_step.setdefault(k, []).append(float(r["compute_s"]) / coins[t - 1])
    for k, v in per_step.items():
        assert max(v) - min(v) <= 1e-12 * max(v), (k, v)
    for r in rows:
        assert r["cluster"] == ""


def test_proxskip_reaches_the_exact_minimiser_where_fedavg_is_biased(tmp_path):
    data = quad_data()
    lr = 0.05
    path = scenario(tmp_path, data, [{"name": "fedavg"}, {"name": "proxskip", "p": 0.4}],
                    steps=5, lr=lr, rounds=120, extra_train={"eval_every": 1000}, name="long")
    out = run_outputs(path)
    w_uniform = minimiser(data, np.full(len(data), 1 / len(data)))   # argmin sum_k F_k
    fa = out.final("fedavg")
    np.testing.assert_allclose(fa, fedavg_fixed_point(data, 5, lr), atol=1e-4)
    assert np.linalg.norm(fa - w_uniform) > 0.25
    np.testing.assert_allclose(out.final("proxskip"), w_uniform, rtol=0, atol=1e-4)
