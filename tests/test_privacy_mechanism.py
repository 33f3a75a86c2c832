"""Clipping, noise, sensitivity and adaptive clipping (hierfl/privacy/mechanism.py): every clipped
norm within the clip (hypothesis over rows), scales and sensitivities by hand, the noise's std
measured over 10^6 draws from 10 seeds, and Andrew et al.'s clip update by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hierfl.privacy.mechanism import (BLOCK, AdaptiveClip, clip_rows, noise, noise_std, row_norms,
                                      sensitivity)
from hierfl.seeding import torch_gen

F32_SLACK = 1 + 2 ** -22    # float32 scale and product roundings: clipped norm <= C (1 + 2^-23)


def _norms64(x: torch.Tensor) -> np.ndarray:
    return np.linalg.norm(x.numpy().astype(np.float64), axis=1)


# --------------------------------------------------------------------------- clipping
@settings(max_examples=200, deadline=None, derandomize=True)
@given(rows=arrays(np.float32, st.tuples(st.integers(1, 6), st.integers(1, 40)),
                   elements=st.floats(-1e6, 1e6, width=32)),
       clip=st.floats(1e-3, 1e3))
def test_clip_bounds_every_norm(rows, clip):
    x = torch.from_numpy(rows)
    out, norms = clip_rows(x, clip)
    assert norms.dtype == torch.float64
    np.testing.assert_allclose(norms.numpy(), _norms64(x), rtol=1e-12)
    after = _norms64(out)
    assert (after <= clip * F32_SLACK).all()
    inside = norms.numpy() <= clip
    assert torch.equal(out[inside], x[inside])                   # unclipped rows: same values
    big = ~inside
    if big.any():                                                # clipped: to the clip, same
        np.testing.assert_allclose(after[big], clip, rtol=1e-6)  # direction
        np.testing.assert_allclose(out[big].numpy() * norms[big].numpy()[:, None] / clip,
                                   rows[big], rtol=1e-5, atol=1e-6 * np.abs(rows).max())


def test_clip_by_hand():
    x = torch.tensor([[6.0, 8.0], [0.0, 0.0], [1.0, 0.0], [-30.0, 40.0]])
    out, norms = clip_rows(x, 5.0)
    assert norms.tolist() == [10.0, 0.0, 1.0, 50.0]
    assert out.tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 0.0], [-3.0, 4.0]]


def test_norms_across_cpu_blocks():
    """Rows longer than one CPU block (3 rows: BLOCK // 3 columns a block, here 3 blocks and a
    remainder): the float64 norm of the whole row."""
    x = torch.randn(3, 3 * (BLOCK // 3) + 17, generator=torch.Generator().manual_seed(0)) * 1e3
    np.testing.assert_allclose(row_norms(x).numpy(), _norms64(x), rtol=1e-13)
    x64, before = x.double(), x.double().clone()
    np.testing.assert_allclose(row_norms(x64).numpy(),
                               torch.linalg.vector_norm(x64, dim=1).numpy(), rtol=1e-13)
    assert torch.equal(x64, before)                     # float64 rows are read, not squared


def test_in_place_clip_is_the_same_clip():
    x = torch.randn(5, 300, generator=torch.Generator().manual_seed(1))
    want, norms = clip_rows(x, 10.0)
    y = x.clone()
    got, norms2 = clip_rows(y, 10.0, inplace=True)
    assert got is y and torch.equal(got, want) and torch.equal(norms, norms2)
    assert not torch.equal(want, x)                     # (some rows were clipped)


def test_infinite_clip_keeps_rows_bit_for_bit():
    x = torch.tensor([[-0.0, 1e30, -7.5e-39], [3.0, float("nan"), -1.0]])
    out, norms = clip_rows(x, math.inf)
    assert out.view(torch.int32).equal(x.view(torch.int32))
    assert norms.shape == (2,) and norms[0] == pytest.approx(1e30)


def test_unclipped_rows_keep_their_bits():
    """Scale 1 multiplies by exactly 1: a -0.0 or subnormal entry of a row within the clip is
    unchanged."""
    x = torch.tensor([[-0.0, 1e-40, 0.5], [30.0, 40.0, 0.0]])
    out, _ = clip_rows(x, 1.0)
    assert out[0].view(torch.int32).equal(x[0].view(torch.int32))
    assert out[1].tolist() == pytest.approx([0.6, 0.8, 0.0])


# --------------------------------------------------------------------------- noise
def test_noise_std_over_seeds():
    """10 seeded streams x 10^5 draws: sample std within 1% of the asked std (the estimate's
    own standard error is std / sqrt(2 n) = 0.07%), mean within 5 standard errors of 0."""
    z, clip, m = 1.3, 0.7, 8
    std = noise_std(z, sensitivity(torch.full((m,), 1 / m, dtype=torch.float64), clip,
                                   "uniform"))
    assert std == pytest.approx(z * clip / m, rel=1e-15)
    draws = torch.cat([noise((100_000,), std, torch_gen(7, "dp_noise", s)).double()
                       for s in range(10)])
    assert draws.std().item() == pytest.approx(std, rel=0.01)
    assert abs(draws.mean().item()) < 5 * std / math.sqrt(draws.numel())
    per_seed = [noise((100_000,), std, torch_gen(7, "dp_noise", s)).std().item()
                for s in range(3)]
    assert all(s == pytest.approx(std, rel=0.02) for s in per_seed)


def test_noise_seeded_and_typed():
    a = noise((3, 5), 2.0, torch_gen(1, "dp_noise", 4), torch.float64)
    b = noise((3, 5), 2.0, torch_gen(1, "dp_noise", 4), torch.float64)
    c = noise((3, 5), 2.0, torch_gen(1, "dp_noise", 5), torch.float64)
    assert a.dtype == torch.float64 and a.shape == (3, 5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(noise((4,), 0.0, torch_gen(1, "x")), torch.zeros(4))
    with pytest.raises(ValueError):
        noise((4,), math.inf, torch_gen(1, "x"))


def test_noise_std_of_zero_multiplier_is_zero_even_unclipped():
    assert noise_std(0.0, math.inf) == 0.0
    assert noise_std(2.0, 0.25) == 0.5


# --------------------------------------------------------------------------- sensitivity
def test_sensitivity_by_hand():
    assert sensitivity(torch.full((4,), 0.25, dtype=torch.float64), 2.0, "uniform") == 0.5
    w = torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64)
    assert sensitivity(w, 2.0, "samples") == pytest.approx(1.4, rel=1e-15)
    assert sensitivity(w, 2.0, "uniform") == pytest.approx(2 / 3, rel=1e-15)
    assert sensitivity(w.numpy(), 2.0, "samples") == pytest.approx(1.4, rel=1e-15)
    assert sensitivity(torch.zeros(0, dtype=torch.float64), 2.0, "uniform") == 0.0
    with pytest.raises(ValueError):
        sensitivity(w, 1.0, "median")


@pytest.mark.parametrize("rule", ["uniform", "samples"])
def test_sensitivity_bounds_one_client(rule):
    """Removing any one clipped update (its term of the fixed-weight aggregate) moves the
    aggregate by at most the sensitivity, and by exactly it for an update at the clip where its
    weight is largest."""
    g = torch.Generator().manual_seed(3)
    rows, _ = clip_rows(torch.randn(6, 50, generator=g, dtype=torch.float64) * 3, 1.5)
    n = torch.tensor([5.0, 9.0, 30.0, 2.0, 7.0, 11.0], dtype=torch.float64)
    w = n / n.sum() if rule == "samples" else torch.full((6,), 1 / 6, dtype=torch.float64)
    s = sensitivity(w / w.sum(), 1.5, rule)
    agg = (w[:, None] * rows).sum(0)
    moves = [torch.linalg.vector_norm(agg - (w[:, None] * rows)[torch.arange(6) != k].sum(0))
             for k in range(6)]
    assert max(moves) <= s * (1 + 1e-12)
    assert max(moves) == pytest.approx(s, rel=1e-12)


# --------------------------------------------------------------------------- adaptive
def test_adaptive_update_by_hand():
    a = AdaptiveClip(2.5, target_quantile=0.25, lr=0.2, count_noise=0.0)
    norms = torch.tensor([1.0, 2.5, 3.0, 4.0], dtype=torch.float64)   # 2.5 <= C: unclipped
    assert a.update(norms, None) == pytest.approx(2.5 * math.exp(-0.2 * (0.5 - 0.25)),
                                                  rel=1e-15)
    b = AdaptiveClip(10.0, target_quantile=0.5, lr=0.5, count_noise=0.0)
    b.update(norms, None)                                   # all unclipped: b = 1, shrink
    assert b.clip == pytest.approx(10.0 * math.exp(-0.25), rel=1e-15)
    c = AdaptiveClip(0.5, count_noise=0.0)                  # none unclipped: b = 0, grow
    assert c.update(norms, None) == pytest.approx(0.5 * math.exp(0.1), rel=1e-15)
    assert c.update(norms[:0], None) == c.clip              # no clients: unchanged


def test_adaptive_count_noise_enters_as_stated():
    """With sigma_b > 0, log(C_new / C) = -eta ((count + N(0, sigma_b^2)) / m - gamma): over
    4000 seeded updates its mean is -eta (b - gamma) and its std eta sigma_b / m (within 5%)."""
    norms = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    steps = []
    for s in range(4000):
        a = AdaptiveClip(3.0, target_quantile=0.5, lr=0.2, count_noise=1.5)
        steps.append(math.log(a.update(norms, torch_gen(2, "dp_count", s)) / 3.0))
    steps = np.array(steps)
    sd = 0.2 * 1.5 / 5
    assert steps.mean() == pytest.approx(-0.2 * (0.6 - 0.5), abs=5 * sd / math.sqrt(4000))
    assert steps.std() == pytest.approx(sd, rel=0.05)


def test_adaptive_default_count_noise_is_m_over_20():
    a = AdaptiveClip(1.0)
    assert a.count_std(40) == 2.0 and a.count_std(7) == 0.35
    assert AdaptiveClip(1.0, count_noise=0.3).count_std(40) == 0.3


def test_adaptive_converges_to_the_target_quantile():
    """Noise-free, the geometric update settles within one step of the gamma-quantile of fixed
    norms 1..100: the fraction unclipped ends within 0.02 of gamma."""
    norms = torch.arange(1, 101, dtype=torch.float64)
    a = AdaptiveClip(500.0, target_quantile=0.3, lr=0.05, count_noise=0.0)
    for _ in range(600):
        a.update(norms, None)
    assert abs((norms <= a.clip).double().mean().item() - 0.3) <= 0.02


def test_update_noise_multiplier_keeps_the_total():
    """z_Delta^-2 + (2 sigma_b)^-2 = z^-2 (Andrew et al., Theorem 1), by hand for z = 1,
    sigma_b = 1: z_Delta = 1 / sqrt(3/4)."""
    a = AdaptiveClip(1.0, count_noise=1.0)
    assert a.noise_multiplier(1.0, 10) == pytest.approx(1 / math.sqrt(0.75), rel=1e-15)
    d = AdaptiveClip(1.0)                                   # sigma_b = 40/20 = 2
    zd = d.noise_multiplier(1.3, 40)
    assert zd ** -2 + 4.0 ** -2 == pytest.approx(1.3 ** -2, rel=1e-14)
    assert d.noise_multiplier(0.0, 40) == 0.0
    with pytest.raises(ValueError, match="must exceed"):
        d.noise_multiplier(1.0, 10)                         # sigma_b = 0.5 = z / 2


def test_adaptive_state_round_trip():
    a = AdaptiveClip(1.0, count_noise=0.0)
    a.update(torch.tensor([0.1, 0.2], dtype=torch.float64), None)
    b = AdaptiveClip(1.0, count_noise=0.0)
    b.load(a.state())
    assert b.clip == a.clip != 1.0
    with pytest.raises(ValueError):
        AdaptiveClip(math.inf)
