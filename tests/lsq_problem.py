"""A small heterogeneous least-squares problem and numpy recursions of local full-batch GD, for
the tests of FedOpt and of the splitting methods (FedSplit, FedDR, FedPD).

Four clients with different feature scales and shifts (different Hessians) and different true
models. Loss of the `linear` model (one output, no bias): F_k(w) = (1/n_k) ||X_k w - y_k||^2, so
grad F_k(w) = H_k w - b_k with H_k = (2/n_k) X_k^T X_k, b_k = (2/n_k) X_k^T y_k."""
from __future__ import annotations

import numpy as np

from conftest import make_scenario

D = 3
COUNTS = (5, 8, 12, 20)


def lsq_data() -> list[tuple[np.ndarray, np.ndarray]]:
    g = np.random.default_rng(0)
    out = []
    for k, n in enumerate(COUNTS):
        x = g.normal(size=(n, D)) @ np.diag(g.uniform(0.3, 1.5, D)) + 0.5 * k
        y = x @ (2.0 * g.normal(size=D)) + 0.1 * g.normal(size=n)
        # the simulator holds float32: the references use exactly those numbers
        out.append((x.astype(np.float32).astype(np.float64),
                    y.astype(np.float32).astype(np.float64)))
    return out


def hessians(data) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(2.0 / len(x) * x.T @ x, 2.0 / len(x) * x.T @ y) for x, y in data]


def minimiser(data, weights) -> np.ndarray:
    """argmin sum_k weights_k F_k."""
    hb = hessians(data)
    return np.linalg.solve(sum(w * h for w, (h, _) in zip(weights, hb)),
                           sum(w * b for w, (_, b) in zip(weights, hb)))


def local_gd(w: np.ndarray, h: np.ndarray, b: np.ndarray, steps: int, lr: float,
             mu: float = 0.0, anchor: np.ndarray | None = None,
             linear: np.ndarray | None = None) -> np.ndarray:
    """`steps` GD steps from w on F_k(w) + (mu/2) ||w - anchor||^2 + <linear, w>."""
    for _ in range(steps):
        g = h @ w - b
        if mu:
            g = g + mu * (w - anchor)
        if linear is not None:
            g = g + linear
        w = w - lr * g
    return w


def fedavg_round(hb, x: np.ndarray, steps: int, lr: float) -> np.ndarray:
    p = np.array(COUNTS, float) / sum(COUNTS)
    return sum(pk * local_gd(x, h, b, steps, lr) for pk, (h, b) in zip(p, hb))


def lsq_scenario(tmp_path, data, algorithms: list[dict], *, steps: int, lr: float, rounds: int,
                 edges: int = 1, name: str = "lsq", eval_every: int = 1,
                 per_round: int | str = "all") -> str:
    """Full-batch GD from w = 0; every client every round unless `per_round` says otherwise."""
    train = {"rounds": rounds, "clients_per_round": per_round, "eval_every": eval_every,
             "local": {"steps": steps, "batch_size": "full", "lr": lr}}
    return make_scenario(tmp_path, name=name, clients=data, seed=1,
                         topology={"clients": {"count": len(data)}, "edges": {"count": edges}},
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         train=train, algorithms=algorithms, output=f"out_{name}")
