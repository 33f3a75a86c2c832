"""benchmarks/floor_w1.py, the W1 floor of issue 19, does the arithmetic it claims: its stacked
step with the shrinking batch equals each client's own plain SGD loop (autograd through
`F.cross_entropy`) on the same minibatches, and its batches are epoch-wise permutations."""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import floor_w1  # noqa: E402


def test_batches_are_epochwise_permutations_with_a_short_last_batch():
    n, first = np.array([7, 4]), np.array([10, 0])
    rows, wts = floor_w1.batches(torch.Generator().manual_seed(1), n, first, 2, 3)
    assert rows.shape == (2, 6, 3)                     # 2 epochs x ceil(7 / 3) batches
    for k, (size, lo) in enumerate(zip(n, first)):
        pe = -(-size // 3)
        for e in range(2):
            r, w = rows[k, e * pe:(e + 1) * pe].reshape(-1), wts[k, e * pe:(e + 1) * pe]
            assert sorted(r[w.reshape(-1) > 0].tolist()) == list(range(lo, lo + size))
            assert torch.allclose(w.sum(1), torch.ones(pe))      # a mean over each batch
    assert wts[1, 4:].sum() == 0                       # client 1 has only 4 steps


def test_stacked_steps_equal_each_clients_plain_sgd():
    g = torch.Generator().manual_seed(0)
    x1 = torch.cat([torch.randn(40, 4, generator=g), torch.ones(40, 1)], 1)
    y = torch.randint(0, 3, (40,), generator=g)
    w0 = torch.randn(3, 5, generator=g) * 0.1
    n, first = np.array([17, 9, 5]), np.array([0, 17, 26])      # sorted by budget
    epochs, b, lr = 2, 4, 0.3
    rows, wts = floor_w1.batches(torch.Generator().manual_seed(2), n, first, epochs, b)
    steps = epochs * -(-n // b)
    got = floor_w1.local_sgd(w0, x1, y, rows, wts, steps, lr, chunk=3)   # chunks cut budgets
    for k in range(3):
        w = w0.clone()
        for s in range(int(steps[k])):
            keep = wts[k, s] > 0
            r = rows[k, s][keep]
            w = w.detach().requires_grad_(True)
            loss = F.cross_entropy(x1[r] @ w.T, y[r])
            (grad,) = torch.autograd.grad(loss, w)
            w = w - lr * grad
        assert torch.allclose(got[k], w.detach(), atol=1e-6), k
