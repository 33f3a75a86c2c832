"""minibatch_plan against its contract written client by client: step j of client k uses rows
perm[pB:(p+1)B] of epoch e's permutation (j = e * per_epoch + p), the permutation sorting the
client's positions by their hash; a short last batch weighs its rows 1/len; padding holds the
client's first row, steps beyond the budget row 0, both with weight 0. The cases cover both of
its paths: whole batches with every step live (no padding, no mask) and the general one."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hierfl.learn.batches import _GOLDEN, _mix, client_keys, minibatch_plan


def reference(offsets, clients, b, steps, seed, t, r):
    c, s_max = len(clients), max(int(max(steps, default=0)), 1)
    rows = np.zeros((c, s_max, b), np.int64)
    wts = np.zeros((c, s_max, b), np.float32)
    keys = client_keys(seed, t, r, np.asarray(clients, np.int64))
    for i, k in enumerate(clients):
        lo, n = int(offsets[k]), int(offsets[k + 1] - offsets[k])
        if n == 0:
            continue
        per_epoch = -(-n // b)
        for j in range(int(steps[i])):
            e, p = divmod(j, per_epoch)
            counter = (np.uint64(e) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
            with np.errstate(over="ignore"):
                h = _mix(keys[i] + counter * _GOLDEN)
            chunk = np.argsort(h.view(np.int64))[p * b:(p + 1) * b]
            rows[i, j] = lo
            rows[i, j, :len(chunk)] = lo + chunk
            wts[i, j, :len(chunk)] = 1.0 / len(chunk)
    return rows, wts


@pytest.mark.parametrize("sizes,steps,b", [
    ([80] * 6, [8] * 6, 10),                  # whole batches, every step live (W2)
    ([80] * 6, [8, 8, 3, 8, 16, 8], 10),      # whole batches, budgets differ (masked)
    ([40, 80, 40, 80], [4, 8, 4, 8], 10),     # two sizes, each whole and live
    ([37, 80, 12, 0, 80], [4, 8, 2, 3, 0], 10),   # short last batches, no data, no steps
    ([30] * 3, [7, 7, 7], 10),                # more than one epoch, whole
    ([25] * 3, [7, 7, 7], 10),                # more than one epoch, short
])
def test_minibatch_plan_is_its_contract(sizes, steps, b):
    offsets = np.concatenate([[0], np.cumsum([5] + sizes)])      # client 0: 5 rows, unused
    clients = np.arange(1, len(sizes) + 1)
    x = torch.arange(int(offsets[-1]), dtype=torch.float32).unsqueeze(1)
    y = torch.zeros(int(offsets[-1]), dtype=torch.long)
    steps = np.array(steps)
    for t in (1, 2):
        plan = minibatch_plan(offsets, clients, b, steps, 3, t, 0, x, y)
        rows, wts = reference(offsets, clients, b, steps, 3, t, 0)
        assert np.array_equal(plan.rows.numpy(), rows)
        assert plan.weights.dtype == torch.float32
        assert np.array_equal(plan.weights.numpy(), wts)
