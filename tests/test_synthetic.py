"""The Synthetic(alpha, beta) generator follows FedProx's recipe (../shared/papers.md):
n_k = int(lognormal(4, 2)) + 50; x ~ N(v_k, Sigma), Sigma_jj = j^-1.2; v_k ~ N(B_k, 1),
B_k ~ N(0, beta); y = argmax(x W_k + b_k) (one W, b for all clients and v = 0 when IID).
It is seeded: the same seed gives the same data, another seed other data."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from hierfl.data import synthetic
from hierfl.data.synthetic import sample_counts
from hierfl.config.schema import DistSpec
from hierfl.data.registry import data_spec


def generate(*a, **kw):
    """The loader's data as tensors (loaders give numpy arrays; load_data wraps them)."""
    return synthetic.generate(*a, **kw).as_tensors()


def _rows(data, k):
    """All rows (train and test) of client k."""
    tr = slice(int(data.offsets[k]), int(data.offsets[k + 1]))
    te = slice(int(data.test_offsets[k]), int(data.test_offsets[k + 1]))
    x = torch.cat([data.x[tr], data.x_test[te]]).double().numpy()
    y = torch.cat([data.y[tr], data.y_test[te]]).numpy()
    return x, y


def test_sizes_follow_the_recipe():
    c = sample_counts(data_spec(name="synthetic"), 20000, seed=5)
    assert c.dtype.kind == "i" and c.min() >= 50
    # n - 50 = floor(L), L ~ lognormal(4, 2): P(n - 50 < e^4) = P(L < 55) ~ 0.5015 and
    # P(n - 50 < e^6) ~ Phi(1) = 0.841; the std of each fraction over 20000 draws is <= 0.0036.
    assert np.mean(c - 50 < math.exp(4)) == pytest.approx(0.5015, abs=0.015)
    assert np.mean(c - 50 < math.exp(6)) == pytest.approx(0.8413, abs=0.015)
    assert np.median(c) == pytest.approx(math.exp(4) + 50, abs=4.0)
    # the generator uses exactly these sizes, split 80/20 per client
    spec = data_spec(name="synthetic", test_fraction=0.2)
    data = generate(spec, 12, seed=5)
    want = sample_counts(spec, 12, seed=5)
    np.testing.assert_array_equal(data.counts + data.test_counts, want)
    np.testing.assert_array_equal(data.test_counts, np.round(0.2 * want).astype(int))


def test_iid_features_and_labels():
    spec = data_spec(name="synthetic_iid", samples=DistSpec(dist="constant", value=600.0),
                    test_fraction=0.1)
    data = generate(spec, 10, seed=1)
    parts = [_rows(data, k) for k in range(10)]
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    assert x.shape == (6000, 60)
    j = np.arange(1, 61)
    # v = 0 and Sigma_jj = j^-1.2 (std of each variance ratio: sqrt(2/6000) = 0.018)
    np.testing.assert_allclose(x.var(0) / j ** -1.2, 1.0, atol=0.08)
    assert np.all(np.abs(x.mean(0)) < 5 * np.sqrt(j ** -1.2 / 6000))
    # one linear argmax labels every client: a single multinomial logreg fits them nearly all
    assert y.min() >= 0 and y.max() <= 9 and len(np.unique(y)) >= 3
    assert _fit_score(x, y) > 0.95


def _fit_score(x, y) -> float:
    """Training accuracy of a nearly unregularised multinomial logistic regression (one BLAS
    thread: the machine is shared, and oversubscribed BLAS is 30x slower here)."""
    with threadpool_limits(1):
        return LogisticRegression(C=100.0, max_iter=2000).fit(x, y).score(x, y)


def test_non_iid_features_and_labels():
    beta = 2.0
    spec = data_spec(name="synthetic", alpha=1.0, beta=beta,
                    samples=DistSpec(dist="constant", value=300.0))
    data = generate(spec, 100, seed=2)
    j = np.arange(1, 61)
    within, spread, centre = [], [], []
    for k in range(data.n_clients):
        x, _ = _rows(data, k)
        within.append(x.var(0))
        v_hat = x.mean(0)                      # ~ v_k, coordinates ~ N(B_k, 1)
        spread.append(v_hat.var(ddof=1))       # ~ 1
        centre.append(v_hat.mean())            # ~ B_k ~ N(0, beta)
    # Sigma_jj = j^-1.2 inside every client (100 x 300 rows)
    np.testing.assert_allclose(np.mean(within, 0) / j ** -1.2, 1.0, atol=0.08)
    assert np.mean(spread) == pytest.approx(1.0, abs=0.1)
    # var(B_k + mean of 60 N(0,1)) = beta^2 + 1/60; std of the estimate over 100 clients ~ 0.57
    assert np.var(centre, ddof=1) == pytest.approx(beta ** 2, abs=1.6)
    # each client's labels come from its own linear argmax. Synthetic clients are often nearly
    # one class, so check the clients whose majority class holds <= 80% of their rows: a
    # multinomial logreg fits >= 98% of 1500 rows (with shuffled labels it fits ~55%).
    big = generate(dataclasses.replace(spec, beta=1.0,
                                       samples=DistSpec(dist="constant", value=1500.0)),
                   12, seed=2)
    mixed = 0
    for k in range(12):
        x, y = _rows(big, k)
        c = np.bincount(y)
        if c.max() <= 0.8 * c.sum():
            mixed += 1
            assert _fit_score(x, y) > 0.98
    assert mixed >= 2


@pytest.mark.parametrize("name", ["synthetic", "synthetic_iid"])
def test_seeded(name):
    spec = data_spec(name=name, samples=DistSpec(dist="uniform", low=50, high=80))
    a, b, c = generate(spec, 6, 9), generate(spec, 6, 9), generate(spec, 6, 10)
    for f in ("x", "y", "x_test", "y_test", "offsets", "test_offsets"):
        assert np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f))), f
    assert not np.array_equal(a.offsets, c.offsets) or not torch.equal(a.x, c.x)
    n = min(len(a.x), len(c.x))
    assert not torch.allclose(a.x[:n], c.x[:n])
