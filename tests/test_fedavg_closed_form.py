"""FedAvg with full participation, full-batch GD and the `linear` model on a quadratic problem
follows the closed-form trajectory computed here with numpy (float64) to 1e-5.

Client k holds (X_k, Y_k), n_k rows. The loss is torch's mse_loss, mean over samples and outputs:
    F_k(W, b) = 1/(n_k m) sum_i sum_j (x_i W^T + b - y_i)_j^2
    dF/dW = 2/(n_k m) R^T X,  dF/db = 2/(n_k m) 1^T R,  with R = X W^T + 1 b^T - Y.
Each round: K gradient steps w <- w - lr grad F_k(w) from the global w, then
w <- sum_k n_k w_k / sum_k n_k. Parameters are flattened as W (m, d) row-major, then b.
"""
from __future__ import annotations

import numpy as np
import pytest

from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario

COUNTS = (5, 8, 13)
D, K, LR = 3, 3, 0.05


def _data(m: int | None):
    g = np.random.default_rng(123)
    out = []
    for n in COUNTS:
        x = g.normal(size=(n, D))
        shape = (n,) if m is None else (n, m)
        y = g.normal(size=shape) + (x.sum(1) if m is None else x[:, :1])
        out.append((x, y))
    return out


def _write(tmp_path, data, rounds: int) -> str:
    return make_scenario(tmp_path, name="quad", clients=data,
                         tests=[(x[:1], y[:1]) for x, y in data], seed=3,
                         model={"name": "linear", "init": "zeros"},
                         topology={"edges": {"count": 2},
                                   "clients": {"count": len(COUNTS), "compute_flops": 1.0e9}},
                         train={"rounds": rounds, "clients_per_round": "all",
                                "local": {"steps": K, "batch_size": "full", "lr": LR}})


def _numpy_trajectory(data, rounds: int):
    """Flattened global parameters and global training loss after rounds 0..R."""
    m = 1 if data[0][1].ndim == 1 else data[0][1].shape[1]
    ys = [y.reshape(len(y), m) for _, y in data]
    xs = [x for x, _ in data]
    n = np.array([len(x) for x in xs], float)
    W, b = np.zeros((m, D)), np.zeros(m)

    def loss(W, b):
        return sum(((x @ W.T + b - y) ** 2).mean(1).sum() for x, y in zip(xs, ys)) / n.sum()

    params, losses = [np.concatenate([W.ravel(), b])], [loss(W, b)]
    for _ in range(rounds):
        new_W, new_b = np.zeros_like(W), np.zeros_like(b)
        for x, y, nk in zip(xs, ys, n):
            Wk, bk = W.copy(), b.copy()
            for _ in range(K):
                r = x @ Wk.T + bk - y
                gW, gb = 2.0 / (nk * m) * r.T @ x, 2.0 / (nk * m) * r.sum(0)
                Wk, bk = Wk - LR * gW, bk - LR * gb
            new_W += nk / n.sum() * Wk
            new_b += nk / n.sum() * bk
        W, b = new_W, new_b
        params.append(np.concatenate([W.ravel(), b]))
        losses.append(loss(W, b))
    return params, losses


@pytest.mark.parametrize("m", [None, 2], ids=["y(n,)", "y(n,m)"])
def test_fedavg_matches_closed_form(tmp_path, m):
    data = _data(m)
    want_params, want_loss = _numpy_trajectory(data, 3)
    # the trajectory moves: the comparison is not of a fixed point
    assert np.linalg.norm(want_params[3] - want_params[1]) > 1e-2
    for rounds in (1, 2, 3):
        d = tmp_path / f"r{rounds}"
        d.mkdir()
        sc = load(_write(d, data, rounds), out=str(d / "out"))
        world = build_world(sc)
        res = run_algorithm(sc, sc.algorithms[0], world, str(d / "out" / "fedavg"),
                            progress=False)
        got = np.load(d / "out" / "fedavg" / "final_params.npz")["global"]
        assert got.shape == want_params[rounds].shape
        np.testing.assert_allclose(got, want_params[rounds], atol=1e-5, rtol=1e-5)
        losses = [r["train_loss"] for r in res.rows]
        np.testing.assert_allclose(losses, want_loss[:rounds + 1], atol=1e-5, rtol=1e-5)
