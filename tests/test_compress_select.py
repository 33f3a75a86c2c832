"""The topk codec's selection (hierfl/compress/select.py) against torch.topk: the same set of
coordinates on every row, with ties for the last place, zeros, -0.0, infinities and NaNs (the
rows it leaves to torch.topk), for any batch; and rows without ties never reach torch.topk."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hierfl.compress.select import top_abs


def _torch_set(x: torch.Tensor, k: int) -> torch.Tensor:
    return x.abs().topk(k, dim=1, sorted=False).indices.sort(1).values


def _matrix(g: torch.Generator, n: int, p: int, mode: int) -> torch.Tensor:
    x = torch.randn(n, p, generator=g) * torch.rand(n, 1, generator=g)
    if mode == 1:                                   # few distinct magnitudes: ties
        x = torch.round(x * 2) / 2
    elif mode == 2:                                 # sparse: most entries tie at zero
        x[x.abs() < 1.2] = 0.0
    elif mode == 3:                                 # non-finite entries
        x[0, : min(3, p)] = float("nan")
        x[-1, p // 2] = float("inf")
        x[n // 2, 0] = -float("inf")
    elif mode == 4:                                 # -0.0 and +0.0 only, but for one entry
        x = torch.zeros(n, p)
        x[:, ::2] = -0.0
        x[0, -1] = 1.0
    return x


@pytest.mark.parametrize("mode", range(5))
def test_the_same_set_as_torch_topk(mode):
    g = torch.Generator().manual_seed(mode)
    for _ in range(40):
        n = int(torch.randint(1, 30, (1,), generator=g))
        p = int(torch.randint(1, 700, (1,), generator=g))
        k = int(torch.randint(1, p + 1, (1,), generator=g)) if p < 20 else \
            int(torch.randint(1, p // 4, (1,), generator=g))
        x = _matrix(g, n, p, mode)
        got = top_abs(x, k)
        assert got.shape == (n, k) and got.dtype == torch.int64
        assert torch.equal(got.sort(1).values, _torch_set(x, k))


def test_a_row_does_not_depend_on_its_batch():
    g = torch.Generator().manual_seed(9)
    x = torch.cat([_matrix(g, 8, 610, mode) for mode in range(4)])
    whole = top_abs(x, 7).sort(1).values
    for lo in range(0, len(x), 5):
        part = top_abs(x[lo:lo + 5].contiguous(), 7).sort(1).values
        assert torch.equal(part, whole[lo:lo + 5])


def test_rows_without_ties_never_reach_torch_topk(monkeypatch):
    x = torch.randn(50, 610, generator=torch.Generator().manual_seed(3))
    want = _torch_set(x, 7)

    def refuse(*a, **k):
        raise AssertionError("torch.topk called")

    monkeypatch.setattr(torch.Tensor, "topk", refuse)
    assert torch.equal(top_abs(x, 7).sort(1).values, want)


def test_float64_and_empty_batches_go_to_torch_topk():
    x = torch.randn(4, 100, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert torch.equal(top_abs(x, 5).sort(1).values, _torch_set(x, 5))
    assert top_abs(torch.zeros(0, 100), 5).shape == (0, 5)
    assert np.array_equal(top_abs(torch.ones(2, 3), 3).sort(1).values.numpy(), [[0, 1, 2]] * 2)
