"""Secure aggregation's arithmetic (hierfl/secagg/field.py): the server's decoded weighted mean
is within the stated bound n R / ((2^(bits-1) - 1 - n) sum w) of the float one, exact on the
grid, never wraps at the extremes, is unchanged by masks that cancel mod 2^bits, and loses
precision as the field narrows."""
from __future__ import annotations

import pytest
import torch

from hierfl.secagg.field import decode, encode, error_bound, field_mean, field_sum, scale


def _data(c: int = 10, p: int = 2000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(c, p, generator=g, dtype=torch.float64) * 0.1
    w = torch.rand(c, generator=g, dtype=torch.float64) + 0.1
    return x, w / w.sum()


def _ref(x, w, r=None):
    x = x if r is None else x.clamp(-r, r)
    return (w[:, None] * x).sum(0) / w.sum()


def test_scale_and_bound_by_hand():
    # bits 8: H = 127; 4 clients leave 123 levels for R = 2
    assert scale(8, 4, 2.0) == 123 / 2
    assert error_bound(8, 4, 2.0) == 4 / (123 / 2)
    assert error_bound(8, 4, 2.0, 0.5) == 4 / (123 / 2 * 0.5)   # survivors' weights 0.5
    assert scale(8, 126, 1.0) == 1.0                               # the last level
    with pytest.raises(ValueError, match="no levels"):
        scale(8, 127, 1.0)
    with pytest.raises(ValueError):
        scale(49, 4, 1.0)


@pytest.mark.parametrize("bits", [12, 16, 24, 32, 48])
def test_within_the_bound(bits):
    x, w = _data()
    r = float(x.abs().max())
    got = field_mean(x, w, bits)
    assert (got - _ref(x, w)).abs().max() <= error_bound(bits, 10, r)


def test_error_grows_as_bits_shrink():
    x, w = _data()
    err = [float((field_mean(x, w, b) - _ref(x, w)).abs().max()) for b in (32, 24, 16, 12, 8)]
    assert err == sorted(err) and err[0] < 1e-8 < 1e-3 < err[-1]
    assert err[-1] > 100 * err[2]


def test_exact_on_the_grid():
    # bits 16, 4 clients: 32763 levels; R = 32763 / 1024 makes s = 1024, w = 1/4: a step of
    # x is 4 / 1024 = 1/256, and x = q / 256 encodes exactly
    r, w = 32763 / 1024, torch.full((4,), 0.25, dtype=torch.float64)
    assert scale(16, 4, r) == 1024
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-8000, 8001, (4, 500), generator=g).to(torch.float64) / 256
    assert torch.equal(field_mean(x, w, 16, r), _ref(x, w))


def test_the_extremes_do_not_wrap():
    # bits 8, 4 clients, R = 1: s = 123; each client at +-R with w = 1/4 has s z = 30.75,
    # rounded to 31: the sum 124 <= 127 is read back with its sign
    w = torch.full((4,), 0.25, dtype=torch.float64)
    for sign in (1.0, -1.0):
        x = torch.full((4, 3), sign, dtype=torch.float64)
        q = encode(x, w, 8, 1.0)
        assert q.tolist()[0] == [31 if sign > 0 else 256 - 31] * 3
        assert field_sum(q, 8).tolist() == [124 if sign > 0 else 256 - 124] * 3
        assert field_mean(x, w, 8, 1.0).tolist() == [sign * 124 / 123] * 3
    # one client holding all the weight at +R, at the largest n the field allows
    n = 126
    w = torch.zeros(n, dtype=torch.float64)
    w[0] = 1.0
    x = torch.ones(n, 2, dtype=torch.float64)
    assert field_mean(x, w, 8, 1.0).tolist() == [1.0, 1.0]         # s = 1: q = 1


@pytest.mark.parametrize("bits", [16, 32, 48])
def test_masks_that_cancel_change_nothing(bits):
    x, w = _data(c=5, p=300)
    q = encode(x, w, bits, 0.5)
    g = torch.Generator().manual_seed(2)
    masked = q.clone()
    mod = 1 << bits
    for u in range(5):
        for v in range(u + 1, 5):           # pairwise masks: + at u, - at v
            m = torch.randint(0, mod, (300,), generator=g)
            masked[u] = (masked[u] + m) % mod
            masked[v] = (masked[v] - m) % mod
    assert not torch.equal(masked, q)
    assert torch.equal(field_sum(masked, bits), field_sum(q, bits))


def test_clipping_and_the_agreed_range():
    x, w = _data()
    assert (field_mean(x, w, 32, 0.05) - _ref(x, w, 0.05)).abs().max() <= \
        error_bound(32, 10, 0.05)
    assert (field_mean(x, w, 32, 0.05) - _ref(x, w)).abs().max() > 1e-3     # clipped


def test_survivors_weights_and_starters():
    # 10 started, 3 dropped: the survivors' shares of the starters' weights sum below 1
    x, w = _data()
    xs, ws = x[:7], w[:7]
    got = field_mean(xs, ws, 24, 1.0, n=10)
    bound = error_bound(24, 10, 1.0, float(ws.sum()))
    assert (got - _ref(xs, ws)).abs().max() <= bound
    total = field_sum(encode(xs, ws, 24, 1.0, n=10), 24)
    assert torch.equal(decode(total, 24, 1.0, 10, float(ws.sum())), got)


def test_dtype_and_zeros():
    x, w = _data(p=50)
    assert field_mean(x.float(), w, 32).dtype == torch.float32
    z = torch.zeros(3, 7)
    assert torch.equal(field_mean(z, torch.full((3,), 1 / 3), 16), torch.zeros(7))
