"""The codecs of hierfl/compress, against hand counts and their defining properties: top-k keeps
exactly the k largest magnitudes; randk and QSGD are unbiased (mean over many seeded draws within
a stated number of standard errors of the input); with error feedback what was sent plus the
final residual is what was meant to be sent; each byte formula by hand on a 650-entry model (the
digits logistic regression: 64 x 10 + 10)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hierfl.compress import Compressor, Draws, compress, kept, row_bytes
from hierfl.compress.spec import CodecSpec, CompressSpec

P = 650


def _spec(**kw) -> CodecSpec:
    return CodecSpec(**kw)


# --------------------------------------------------------------------------- bytes, by hand
@pytest.mark.parametrize("kw,want", [
    ({"kind": "none"}, 2600),                                   # 650 x 4 B
    ({"kind": "topk", "ratio": 0.01}, 56),                       # k = ceil(6.5) = 7: 7 x (4 + 4)
    ({"kind": "topk", "k": 7, "encoding": "bitmap"}, 110),       # ceil(650 / 8) = 82 + 7 x 4
    ({"kind": "topk", "ratio": 0.5, "encoding": "best"}, 1382),  # k 325: bitmap 82 + 1300
    ({"kind": "topk", "ratio": 1.0, "encoding": "best"}, 2600),  # every entry: dense wins
    ({"kind": "randk", "ratio": 0.1}, 264),                      # k = 65 values + a 4-byte seed
    ({"kind": "qsgd", "levels": 4}, 329),                        # (1 + 3) bits x 650 = 325 B + norm
    ({"kind": "qsgd", "levels": 1}, 167),                        # 2 bits: 1300 b = 162.5 -> 163 + 4
    ({"kind": "qsgd", "levels": 255}, 736),                      # 1 + 8 bits: 5850 b -> 732 + 4
    ({"kind": "sign"}, 86),                                      # 82 + a 4-byte scale
    ({"kind": "int8"}, 654),                                     # 650 + a 4-byte scale
    ({"kind": "fp16"}, 1300),                                    # 650 x 2 B
])
def test_bytes_by_hand(kw, want):
    spec = _spec(**kw)
    x = torch.randn(3, P, generator=torch.Generator().manual_seed(0))
    coded = compress(x, spec, Draws(1, np.arange(3)))
    assert coded.bytes.tolist() == [want] * 3
    assert row_bytes(spec, P) == want


def test_kept_entries():
    assert kept(_spec(kind="topk", ratio=0.01), 650) == 7
    assert kept(_spec(kind="topk", ratio=0.01), 100) == 1       # exactly 1 % of 100
    assert kept(_spec(kind="topk", ratio=0.001), 100) == 1      # at least one
    assert kept(_spec(kind="randk", k=900), 650) == 650         # at most P


# --------------------------------------------------------------------------- top-k
def test_topk_keeps_exactly_the_k_largest_magnitudes():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 40, generator=g)
    coded = compress(x, _spec(kind="topk", k=6))
    for row, out in zip(x, coded.decoded):
        want = set(row.abs().argsort(descending=True)[:6].tolist())
        assert set(out.nonzero().flatten().tolist()) == want
        idx = torch.tensor(sorted(want))
        assert torch.equal(out[idx], row[idx])                   # values sent as they are
        assert out.abs().min() == 0 and (out != 0).sum() == 6


def test_topk_hand_example():
    x = torch.tensor([[0.1, -3.0, 2.0, 0.5, -2.5]])
    out = compress(x, _spec(kind="topk", k=2)).decoded
    assert out.tolist() == [[0.0, -3.0, 0.0, 0.0, -2.5]]


# --------------------------------------------------------------------------- unbiased kinds
def _draws(spec: CodecSpec, x: torch.Tensor, n: int) -> torch.Tensor:
    """`n` independently seeded encodings of `x` (as n clients' uploads: the layer's generator
    per client)."""
    comp = Compressor(CompressSpec(up=spec), seed=7, n_clients=n, n_params=x.numel(),
                      upload_tensors=1, as_is=(0,))
    sent = comp.uploads(1, 0, np.arange(n), torch.zeros(x.numel()),
                        (x.expand(n, -1).clone(),), 0)
    return sent.tensors[0]


def test_randk_is_unbiased():
    """E[out] = x; each entry's variance is x_i^2 (P / k - 1): the mean of n = 4000 draws is
    within 5 standard errors of x."""
    x = torch.linspace(-2, 3, 20)
    n, k = 4000, 5
    out = _draws(_spec(kind="randk", k=k), x, n)
    assert ((out != 0).sum(1) <= k).all()
    se = x.abs() * math.sqrt((20 / k - 1) / n)
    assert ((out.mean(0) - x).abs() <= 5 * se + 1e-6).all()
    # and not a trivially exact codec: single draws differ from x
    assert (out[0] - x).abs().max() > 0.5


def test_qsgd_is_unbiased_and_on_its_grid():
    """Each entry is sign(x_i) ||x|| l / s with l in 0..s, rounded up with probability equal to
    the fraction, so its variance is at most (||x|| / s)^2 / 4: the mean of n = 4000 draws lies
    within 5 standard errors of x."""
    x = torch.tensor([0.3, -1.2, 0.05, 2.0, -0.7, 0.0, 1.1, -0.02])
    n, s = 4000, 4
    out = _draws(_spec(kind="qsgd", levels=s), x, n)
    norm = float(x.norm())
    levels = out.abs() / norm * s
    assert torch.allclose(levels, levels.round(), atol=1e-4)
    assert (levels.round() <= s).all()
    assert (out[:, 5] == 0).all()                              # 0 stays 0
    se = norm / s / 2 / math.sqrt(n)
    assert ((out.mean(0) - x).abs() <= 5 * se).all()
    assert (out[0] - x).abs().max() > 0.05


def test_draws_are_per_sender_not_per_batch():
    """A client's encoding does not depend on which other clients share its batch."""
    spec = CompressSpec(up=_spec(kind="qsgd", levels=2))
    x = torch.randn(4, 30, generator=torch.Generator().manual_seed(3))
    comp = Compressor(spec, 5, 10, 30, 1, as_is=(0,))
    both = comp.uploads(2, 1, np.array([3, 8]), torch.zeros(30), (x[:2],), 0).tensors[0]
    one = comp.uploads(2, 1, np.array([8]), torch.zeros(30), (x[1:2],), 0).tensors[0]
    assert torch.equal(both[1], one[0])


# --------------------------------------------------------------------------- deterministic kinds
def test_sign_int8_fp16():
    x = torch.tensor([[1.0, -2.0, 0.0, 4.0]])
    assert compress(x, _spec(kind="sign")).decoded.tolist() == [[1.75, -1.75, 1.75, 1.75]]
    q = compress(x, _spec(kind="int8")).decoded
    scale = 4.0 / 127
    assert q[0, 3] == pytest.approx(4.0) and (q - x).abs().max() <= scale / 2 + 1e-7
    assert compress(torch.tensor([[1.0 / 3]]), _spec(kind="fp16")).decoded.item() == \
        float(np.float16(1.0 / 3))
    zero = torch.zeros(2, 5)
    for kind in ("sign", "int8"):
        assert torch.equal(compress(zero, _spec(kind=kind)).decoded, zero)
    assert torch.equal(compress(zero, _spec(kind="qsgd", levels=3), Draws(5, np.arange(2))).decoded,
                       zero)


# --------------------------------------------------------------------------- error feedback
@pytest.mark.parametrize("kw", [{"kind": "topk", "ratio": 0.1}, {"kind": "sign"},
                                {"kind": "qsgd", "levels": 2}])
def test_error_feedback_conserves_the_sum(kw):
    """Over rounds: sum of what each client sent (decoded) + its final residual == sum of its
    inputs (differences from the start model)."""
    n, p, rounds = 5, 50, 6
    spec = CompressSpec(up=_spec(error_feedback=True, **kw))
    comp = Compressor(spec, 1, n_clients=8, n_params=p, upload_tensors=1)
    g = torch.Generator().manual_seed(4)
    clients = np.array([0, 2, 3, 5, 7])
    total_in = torch.zeros(n, p, dtype=torch.float64)
    total_sent = torch.zeros(n, p, dtype=torch.float64)
    for t in range(1, rounds + 1):
        start = torch.randn(p, generator=g)
        y = start + torch.randn(n, p, generator=g)
        sent = comp.uploads(t, 0, clients, start, (y,), 0).tensors[0]
        total_in += (y - start).double()
        total_sent += (sent - start).double()
    residual = comp.tensors()["up.0"][clients].double()
    assert torch.allclose(total_sent + residual, total_in, atol=1e-4)
    assert residual.abs().max() > 1e-3                # something was held back
    assert (comp.tensors()["up.0"][[1, 4, 6]] == 0).all()      # not selected: untouched


def test_relative_to_start_and_headers():
    """A model upload is coded as its difference from the start; a header passes as it is."""
    start = torch.tensor([10.0, 10.0, 10.0, 10.0])
    y = torch.tensor([[10.0, 13.0, 9.0, 10.5]])
    k = torch.tensor([[5.0]])
    comp = Compressor(CompressSpec(up=_spec(kind="topk", k=1)), 0, 2, 4, 1)
    sent = comp.uploads(1, 0, np.array([1]), start, (y, k), 1)
    assert sent.tensors[0].tolist() == [[10.0, 13.0, 10.0, 10.0]]
    assert sent.tensors[1].tolist() == [[5.0]]
    assert sent.bytes.tolist() == [8 + 4] and sent.wire == ["sparse+dense"]


def test_silent_clients_keep_their_residual():
    """A client that trains but sends nothing (pFedMe's extra trainees) keeps its residual."""
    comp = Compressor(CompressSpec(up=_spec(kind="sign", error_feedback=True)), 0, 4, 6, 1)
    x = torch.arange(12, dtype=torch.float32).reshape(2, 6)
    comp.uploads(1, 0, np.array([1, 3]), torch.zeros(6), (x,), 0, np.array([False, True]))
    res = comp.tensors()["up.0"]
    assert res[1].abs().sum() > 0 and (res[3] == 0).all()


def test_fp16_of_a_float16_message_is_its_own_tensor():
    """fp16 of a message already in float16 decodes to the same values in a new tensor: error
    feedback's residual (msg - decoded, in place on msg) must not zero what the receiver gets."""
    msg = torch.tensor([[0.5, -1.25, 3.0]], dtype=torch.float16)
    coded = compress(msg, CodecSpec(kind="fp16"))
    ref = torch.zeros(3, dtype=torch.float16)
    coded.left_(msg)
    assert torch.equal(msg, torch.zeros_like(msg))
    assert coded.plus(ref, inplace=True).tolist() == [[0.5, -1.25, 3.0]]
