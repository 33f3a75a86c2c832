"""Compressor.uploads codes a round's alike tensors (SCAFFOLD's two) in one call on their rows
stacked, with each tensor's draw key made for a block of rounds at once on arrays: checked here
against the plain recipe, one codec call per tensor with its key from its own seeded generator
(decoded values, bytes, wire names and error-feedback residuals, bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hierfl.compress import Compressor, Draws, compress
from hierfl.compress.registry import seeded
from hierfl.compress.layer import KEY_BLOCK
from hierfl.compress.spec import CodecSpec, CompressSpec
from hierfl.data import streams
from hierfl.seeding import rng

N, P, SEED = 9, 37, 11


def _key(t: int, r: int, j: int) -> int:
    return int(rng(SEED, "compress.up", t, r, j).integers(0, 2 ** 32))


def test_block_keys_are_the_seeded_generators_first_draws():
    ids = np.array([[0, 0, 0], [2 ** 32 - 1, 5, 1], [123456, 0, 2 ** 31], [7, 9, 3]])
    for seed in (0, SEED, 2 ** 40 + 3):
        got = streams.first_u32(streams.seed_words(seed, "compress.up", ids))
        want = [int(rng(seed, "compress.up", *map(int, row)).integers(0, 2 ** 32)) for row in ids]
        assert got.tolist() == want
    comp = Compressor(CompressSpec(up=CodecSpec(kind="qsgd", levels=4)), SEED, N, P, 3)
    for t in (0, 1, KEY_BLOCK - 1, KEY_BLOCK, 3 * KEY_BLOCK + 5):
        for r in (0, 4):
            assert comp._up_keys(t, r, 3).tolist() == [_key(t, r, j) for j in range(3)]


def _reference(spec: CodecSpec, as_is: tuple[int, ...], residual: dict, t: int,
               clients: np.ndarray, start: torch.Tensor, tensors: tuple, silent: np.ndarray):
    """The plain recipe: each tensor alone, its own generator's key."""
    out, nbytes, wires = [], np.zeros(len(clients)), []
    for j, x in enumerate(tensors):
        ref = None if j in as_is else start
        msg = x.clone() if ref is None else x - ref
        res = residual.get(j)
        if res is not None:
            msg.add_(res[torch.from_numpy(clients)])
        draws = Draws(_key(t, 0, j), clients) if seeded(spec.kind) else None
        coded = compress(msg, spec, draws)
        out.append(coded.decoded if ref is None else coded.decoded + ref)
        if res is not None:
            left = msg - coded.decoded
            res[torch.from_numpy(clients[~silent])] = left[torch.from_numpy(~silent)]
        nbytes += coded.bytes
        wires.append(coded.wire)
    return out, nbytes, ["+".join(w) for w in zip(*wires)]


CODECS = [dict(kind="topk", ratio=0.1, error_feedback=True), dict(kind="randk", ratio=0.2),
          dict(kind="randk", k=30, error_feedback=True), dict(kind="qsgd", levels=4),
          dict(kind="qsgd", levels=2, error_feedback=True), dict(kind="sign", error_feedback=True),
          dict(kind="int8"), dict(kind="fp16"), dict(kind="topk", k=3, encoding="auto")]


@pytest.mark.parametrize("kw", CODECS)
@pytest.mark.parametrize("as_is", [(0, 1), (1,), ()])
def test_stacked_uploads_equal_one_call_per_tensor(kw, as_is):
    spec = CodecSpec(**kw)
    comp = Compressor(CompressSpec(up=spec), SEED, N, P, 2, as_is)
    residual = {j: torch.zeros(N, P) for j in range(2)} if spec.error_feedback else {}
    g = torch.Generator().manual_seed(5)
    for t in (1, 2, KEY_BLOCK + 1):
        clients = np.sort(np.random.default_rng(t).choice(N, 6, replace=False))
        silent = np.arange(6) == t % 6
        start = torch.randn(P, generator=g)
        tensors = tuple(start + torch.randn(6, P, generator=g) for _ in range(2))
        header = torch.randn(6, 2, generator=g)
        sent = comp.uploads(t, 0, clients, start, tensors + (header,), 1, silent)
        out, nbytes, wire = _reference(spec, as_is, residual, t, clients, start, tensors, silent)
        for a, b in zip(sent.tensors, out + [header]):
            assert a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()
        assert sent.bytes.tolist() == (nbytes + 4 * 2).tolist()
        assert sent.wire == [w + "+dense" for w in wire]
        for j, res in residual.items():
            assert comp.tensors()[f"up.{j}"].numpy().tobytes() == res.numpy().tobytes()
