"""Synthetic(alpha, beta) of FedProx (Li et al., MLSys 2020), seeded.

Device k: n_k = int(lognormal(4, 2)) + 50; u_k ~ N(0, alpha), B_k ~ N(0, beta) (standard
deviations); W_k (d x c) and b_k (c) ~ N(u_k, 1); v_k ~ N(B_k, 1) per coordinate;
x ~ N(v_k, Sigma) with Sigma_jj = j^-1.2; y = argmax softmax(x W_k + b_k).
Synthetic-IID: one W, b ~ N(0, 1) for all devices and v = 0."""
from __future__ import annotations

import numpy as np

from .. import seeding
from ..config.schema import DataSpec
from ..topology.dist import draw
from .federated import FederatedData, split_train_test


def sample_counts(spec: DataSpec, n_clients: int, seed: int) -> np.ndarray:
    g = seeding.rng(seed, "data/synthetic/sizes")
    if spec.samples is None:
        n = g.lognormal(4, 2, n_clients).astype(np.int64) + 50
    else:
        n = np.maximum(draw(spec.samples, g, n_clients).astype(np.int64), 2)
    return np.minimum(n, spec.max_samples)


def generate(spec: DataSpec, n_clients: int, seed: int) -> FederatedData:
    d, c = spec.dim, spec.classes
    iid = spec.name == "synthetic_iid"
    counts = sample_counts(spec, n_clients, seed)
    cov_diag = np.arange(1, d + 1, dtype=np.float64) ** -1.2
    shared = seeding.rng(seed, "data/synthetic/shared")
    w_iid, b_iid = shared.normal(0, 1, (d, c)), shared.normal(0, 1, c)
    g_het = seeding.rng(seed, "data/synthetic/heterogeneity")
    u = g_het.normal(0, spec.alpha, n_clients)
    bk = g_het.normal(0, spec.beta, n_clients)
    train, test = [], []
    for k in range(n_clients):
        g = seeding.rng(seed, "data/synthetic/client", k)
        if iid:
            w, b, v = w_iid, b_iid, np.zeros(d)
        else:
            w = g.normal(u[k], 1, (d, c))
            b = g.normal(u[k], 1, c)
            v = g.normal(bk[k], 1, d)
        x = g.normal(0, 1, (counts[k], d)) * np.sqrt(cov_diag) + v
        y = np.argmax(x @ w + b, axis=1)
        tr, te = split_train_test(x, y, spec.test_fraction, seeding.rng(seed, "data/split", k))
        train.append(tr)
        test.append(te)
    return FederatedData.from_arrays(train, test, c)
