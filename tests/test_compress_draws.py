"""The random codecs' draws (hierfl/compress/draws.py) and the batched codecs against per-client
references written out entry by entry: the vectorised uint32 hash gives the numbers of a plain
integer hash of (key, sender, counter); QSGD on a batch equals QSGD client by client, bit for
bit; randk's subsets are k distinct coordinates, the same whichever batch a sender is in, and
uniform (each coordinate and each pair of coordinates as often as a uniform k-subset gives)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hierfl.compress import Draws, compress
from hierfl.compress.spec import CodecSpec

M32 = 0xFFFFFFFF


def _mix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x21F0AAAD) & M32
    h ^= h >> 15
    return (h * 0x735A2D97) & M32


def _hash(key: int, sender: int, i: int) -> int:
    """The reference: plain Python integers, one entry at a time."""
    row = _mix((sender * 0x9E3779B1 + key) & M32)
    return _mix(row ^ ((i * 0x9E3779B1) & M32))


def test_hash_and_uniform_equal_the_plain_integer_reference():
    key, senders, p = 0xDEADBEEF, np.array([0, 5, 999, 123456]), 37
    d = Draws(key, senders)
    want = np.array([[_hash(key, int(s), i) for i in range(p)] for s in senders], np.uint32)
    assert np.array_equal(d.hashes(p), want)
    u = d.uniform(p)
    assert u.dtype == torch.float32
    assert torch.equal(u, torch.tensor((want >> 8) / 2.0 ** 24, dtype=torch.float32))
    assert 0 <= float(u.min()) and float(u.max()) < 1


def test_qsgd_batch_equals_client_by_client_reference():
    """The batched codec, bit for bit, against QSGD written per client with the reference
    draws: level = |x| s / ||x||, floor(level + u), times ||x|| / s, with x's sign."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 41, generator=g) * torch.tensor([1, 0.01, 100, 1, 3, 0.5]).unsqueeze(1)
    x[3] = 0.0                                              # an all-zero row stays zero
    key, senders, s = 77, np.array([4, 9, 1, 30, 2, 8]), 4
    got = compress(x, CodecSpec(kind="qsgd", levels=s), Draws(key, senders)).decoded
    for row, sender, out in zip(x, senders, got):
        u = torch.tensor([(_hash(key, int(sender), i) >> 8) / 2.0 ** 24 for i in range(41)],
                         dtype=torch.float32)
        norm = torch.linalg.vector_norm(row)
        level = row.abs() * (s / norm) if norm > 0 else row.abs()
        want = torch.copysign(torch.floor(level + u) * (norm / s), row)
        assert torch.equal(out, want)


@pytest.mark.parametrize("k,p", [(1, 10), (7, 610), (61, 610), (5, 10), (6, 10), (9, 10),
                                 (10, 10), (300, 650)])
def test_subset_is_k_distinct_coordinates_independent_of_the_batch(k, p):
    senders = np.arange(0, 400, 7)
    idx = Draws(99, senders).subset(k, p)
    assert idx.shape == (len(senders), k) and idx.dtype == torch.int64
    assert all(len(set(r.tolist())) == k for r in idx)
    assert int(idx.min()) >= 0 and int(idx.max()) < p
    part = Draws(99, senders[3:9]).subset(k, p)          # another batch, the same rows
    assert torch.equal(part, idx[3:9])


def test_subset_draws_further_for_rows_short_of_k():
    """With too few draws most rows fall short and draw again: the same subsets."""
    d = Draws(5, np.arange(50))
    short = d._first_distinct(20, 40, m=21)
    assert np.array_equal(short, d._first_distinct(20, 40))
    rows = np.asarray(short)
    assert all(len(set(r.tolist())) == 20 for r in rows)      # k distinct coordinates
    assert rows.min() >= 0 and rows.max() < 40


def test_subset_is_uniform_over_coordinates_and_pairs():
    """n = 20,000 senders draw k = 3 of p = 8 coordinates: each coordinate is kept with
    probability k / p = 3/8 and each pair with k (k - 1) / (p (p - 1)) = 3/28 (a uniform
    k-subset; randk's scaling p / k makes it unbiased); counts within 5 standard errors. The
    complement branch (k = 6 > p / 2) likewise."""
    n, p = 20000, 8
    for k in (3, 6):
        idx = Draws(2024, np.arange(n)).subset(k, p).numpy()
        hit = np.zeros((n, p), bool)
        hit[np.arange(n)[:, None], idx] = True
        q = k / p
        assert np.all(np.abs(hit.mean(0) - q) <= 5 * math.sqrt(q * (1 - q) / n))
        pair = (hit[:, :, None] & hit[:, None, :]).mean(0)[np.triu_indices(p, 1)]
        q2 = k * (k - 1) / (p * (p - 1))
        assert np.all(np.abs(pair - q2) <= 5 * math.sqrt(q2 * (1 - q2) / n))


def test_randk_scales_the_kept_values_and_counts_k_values_and_a_seed():
    x = torch.arange(1.0, 21.0).reshape(2, 10)
    coded = compress(x, CodecSpec(kind="randk", k=4), Draws(3, np.array([0, 1])))
    dec = coded.decoded
    assert ((dec != 0).sum(1) == 4).all()
    kept_ = dec != 0
    assert torch.equal(dec[kept_], x[kept_] * 2.5)            # p / k = 10 / 4
    assert coded.bytes.tolist() == [4 * 4 + 4] * 2
    ref = torch.full((10,), 100.0)
    assert torch.equal(coded.plus(ref), dec + ref)           # the sparse add == dense add
    msg = x.clone()
    assert torch.equal(coded.left_(msg), x - dec)


def _first_k_distinct(key: int, sender: int, k: int, p: int) -> list[int]:
    """The reference subset: draw coordinates (hash * p) >> 32 for counters 0, 1, ... and keep
    the first k distinct, in draw order."""
    out: list[int] = []
    i = 0
    while len(out) < k:
        c = (_hash(key, sender, i) * p) >> 32
        if c not in out:
            out.append(c)
        i += 1
    return out


@pytest.mark.parametrize("k,p", [(1, 10), (5, 10), (7, 610), (61, 610), (20, 40), (8, 10)])
def test_subset_equals_the_plain_first_distinct_reference(k, p):
    """Each row, exactly (in order; above p / 2 the complement of the p - k drawn, ascending)."""
    senders = np.array([0, 3, 77, 999, 65536, 4000000])
    got = Draws(0xC0FFEE, senders).subset(k, p).numpy()
    for row, s in zip(got, senders):
        if 2 * k <= p:
            assert row.tolist() == _first_k_distinct(0xC0FFEE, int(s), k, p)
        else:
            left = set(_first_k_distinct(0xC0FFEE, int(s), p - k, p))
            assert row.tolist() == [c for c in range(p) if c not in left]
    short = Draws(0xC0FFEE, senders)._first_distinct(20, 40, m=21)     # rows that draw again
    assert [r.tolist() for r in short] == [_first_k_distinct(0xC0FFEE, int(s), 20, 40)
                                            for s in senders]


@pytest.mark.parametrize("k,p,m", [(7, 610, None), (61, 610, None), (20, 40, 21), (1, 10, None)])
def test_first_distinct_by_sort_equals_by_table(k, p, m):
    """Large rows x p (a big model) find first draws by sorting, not by an (n, p) table: the
    same coordinates, rows that draw again included, and both equal the plain reference."""
    senders = np.array([0, 3, 77, 999, 65536, 4000000])
    d = Draws(0xBEEF, senders)
    by_table = d._first_distinct(k, p, m, table_max=1 << 30)
    by_sort = d._first_distinct(k, p, m, table_max=0)
    assert np.array_equal(by_table, by_sort)
    assert by_sort[2].tolist() == _first_k_distinct(0xBEEF, 77, k, p)
