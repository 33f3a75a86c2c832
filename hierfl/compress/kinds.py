"""The codecs: each encodes a (n, P) batch of messages (one row per sender) in one torch op per
kind and returns what the receiver decodes and what each row costs in bytes. docs/compression.md
gives every rule with its reference; the byte counts here are the ones documented there.

    compress(x, spec, noise) -> Coded(decoded (n, P), bytes (n,), wire (encoding name))

`noise` is a (n, P) tensor of uniform [0, 1) draws for the random kinds (randk, qsgd), made by
`uniform` from a key and each row's sender, so a row's result does not depend on which other
rows share its batch."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..config.compress import CodecSpec
from ..sim import messages

SEED_BYTES = 4          # randk: the receiver regenerates the indices from a 4-byte seed
SCALE_BYTES = 4         # qsgd's norm, sign's and int8's scale: one float32 per tensor
RANDOM_KINDS = ("randk", "qsgd")


@dataclass
class Coded:
    decoded: torch.Tensor       # (n, P) what the receiver reconstructs
    bytes: np.ndarray           # (n,) float64, the encoded size of each row
    wire: list[str]             # per row: the encoding on the wire (clients.csv `encoding`)


def kept(spec: CodecSpec, p: int) -> int:
    """topk / randk: entries sent per row of P entries (k, or ceil(ratio * P), at most P)."""
    k = spec.k if spec.k is not None else math.ceil(spec.ratio * p - 1e-9)
    return max(1, min(p, int(k)))


def qsgd_bits(levels: int) -> int:
    """Bits per entry of QSGD with s levels: a sign bit and the level 0..s."""
    return 1 + math.ceil(math.log2(levels + 1))


def row_bytes(spec: CodecSpec, p: int) -> float:
    """The encoded size of one row of P entries (it never depends on the values)."""
    kind = spec.kind
    if kind == "none":
        return float(messages.DENSE * p)
    if kind == "randk":
        return float(messages.DENSE * kept(spec, p) + SEED_BYTES)
    if kind == "qsgd":
        return float(-(-p * qsgd_bits(spec.levels) // 8) + SCALE_BYTES)
    if kind == "sign":
        return float(-(-p // 8) + SCALE_BYTES)
    if kind == "int8":
        return float(p + SCALE_BYTES)
    if kind == "fp16":
        return float(2 * p)
    if kind == "topk":
        return messages.tensor_bytes(p, float(kept(spec, p)), spec.encoding)
    raise ValueError(f"unknown compression kind {kind!r}")


def compress(x: torch.Tensor, spec: CodecSpec, noise: torch.Tensor | None = None) -> Coded:
    """Encode and decode every row of `x` (n, P) with `spec`."""
    n, p = x.shape
    kind = spec.kind
    if kind == "topk":
        k = kept(spec, p)
        idx = x.abs().topk(k, dim=1, sorted=False).indices
        out = torch.zeros_like(x).scatter_(1, idx, x.gather(1, idx))
        nnz = [np.full(n, float(k))]
        return Coded(out, messages.row_bytes([p], nnz, n, spec.encoding),
                     messages.row_encodings([p], nnz, n, spec.encoding))
    wire = [kind] * n
    nb = np.full(n, row_bytes(spec, p))
    if kind == "none":
        return Coded(x, nb, ["dense"] * n)
    if kind == "randk":
        k = kept(spec, p)
        idx = noise.topk(k, dim=1, sorted=False).indices          # k uniform coordinates
        vals = x.gather(1, idx) * (p / k)                           # scaled: E[out] = x
        return Coded(torch.zeros_like(x).scatter_(1, idx, vals), nb, wire)
    if kind == "qsgd":
        return Coded(_qsgd(x, spec.levels, noise), nb, wire)
    if kind == "sign":
        scale = x.abs().mean(1, keepdim=True)                       # ||x||_1 / P
        return Coded(torch.copysign(scale.expand_as(x), x), nb, wire)   # -0.0 -> -scale
    if kind == "int8":
        scale = x.abs().amax(1, keepdim=True) / 127.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        return Coded((x / safe).round().clamp(-127, 127) * scale, nb, wire)
    if kind == "fp16":
        return Coded(x.to(torch.float16).to(x.dtype), nb, wire)
    raise ValueError(f"unknown compression kind {kind!r}")


def _qsgd(x: torch.Tensor, s: int, noise: torch.Tensor) -> torch.Tensor:
    """QSGD (Alistarh et al. 2017): |x_i| / ||x|| * s rounded up with probability its
    fractional part (floor(level + u), u uniform), so E[out] = x."""
    norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    safe = torch.where(norm > 0, norm, torch.ones_like(norm))
    level = x.abs().mul_(s / safe)
    return torch.copysign(level.add_(noise).floor_().mul_(norm / s), x)


_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B1          # spreads the sender's key
_C1, _C2 = 0x21F0AAAD, 0x735A2D97   # a 32-bit integer hash (Wellons' hash prospector)


def _mix(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit hash of int64 values in [0, 2^32), in place (products stay below 2^63: no
    overflow); its high bits are the well-mixed ones."""
    h.bitwise_xor_(h >> 16).mul_(_C1).bitwise_and_(_M32)
    return h.bitwise_xor_(h >> 15).mul_(_C2).bitwise_and_(_M32)


def uniform(key: int, senders: np.ndarray, p: int) -> torch.Tensor:
    """(n, P) float32 draws in [0, 1) (24 bits each): a hash of (key, sender, entry index),
    one row per sender, in a few vectorised integer ops (counter-based, as Philox: no generator
    state, so any row can be regenerated alone)."""
    rows = _mix((torch.from_numpy(np.asarray(senders, np.int64)) * _GOLDEN + key) & _M32)
    cols = (torch.arange(p, dtype=torch.int64) * _GOLDEN) & _M32
    h = _mix(rows.unsqueeze(1) ^ cols)             # both below 2^32
    return h.bitwise_right_shift_(8).to(torch.float32).mul_(1.0 / 16777216)
