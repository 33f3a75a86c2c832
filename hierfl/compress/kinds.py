"""The codecs: each encodes a (n, P) batch of messages (one row per sender) in a few whole-batch
torch ops per kind (no Python per sender) and returns what the receiver decodes and what each
row costs in bytes. docs/compression.md gives every rule with its reference; the byte counts here
are the ones documented there, computed from the sizes alone (nothing is serialised).

    compress(x, spec, draws) -> Coded(decoded (n, P), bytes (n,), wire (encoding name))

`draws` (draws.Draws) holds the random kinds' (randk, qsgd) counter-based draws, keyed on each
row's sender, so a row's result does not depend on which other rows share its batch."""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..config.compress import CodecSpec
from ..sim import messages
from .draws import UNIT24, Draws
from .select import top_abs

SEED_BYTES = 4          # randk: the receiver regenerates the indices from a 4-byte seed
SCALE_BYTES = 4         # qsgd's norm, sign's and int8's scale: one float32 per tensor
RANDOM_KINDS = ("randk", "qsgd")


class Coded:
    """An encoded batch: each row's bytes and wire name (clients.csv `encoding`) and what the
    receiver reconstructs: `decoded` (n, P), made on demand for the sparse kinds (topk, randk),
    whose rows hold only `vals` at `idx` (n, k) and are added to a reference without it."""

    def __init__(self, decoded: torch.Tensor | None, nbytes: np.ndarray, wire: list[str],
                 idx: torch.Tensor | None = None, vals: torch.Tensor | None = None,
                 shape: tuple[int, int] | None = None, fresh: bool = True):
        self._dense, self.bytes, self.wire = decoded, nbytes, wire
        self.fresh = fresh              # `decoded` is a new tensor (not the input's)
        self.idx, self.vals, self.shape = idx, vals, shape

    @property
    def decoded(self) -> torch.Tensor:
        if self._dense is None:
            self._dense = torch.zeros(self.shape, dtype=self.vals.dtype).scatter_(
                1, self.idx, self.vals)
        return self._dense

    def rows(self, lo: int, hi: int) -> "Coded":
        """Rows lo..hi-1 (one message of a batch that stacks several)."""
        if self._dense is not None or self.idx is None:
            return Coded(self.decoded[lo:hi], self.bytes[lo:hi], self.wire[lo:hi],
                         fresh=self.fresh)
        return Coded(None, self.bytes[lo:hi], self.wire[lo:hi], self.idx[lo:hi],
                     self.vals[lo:hi], (hi - lo, self.shape[1]))

    def plus(self, ref: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        """decoded + ref (ref (P,) or (n, P)), a new tensor; the sparse kinds add their values
        to a copy of ref (the same sums, one pass fewer). `inplace`: a dense decoded that is a
        new tensor becomes the sum (the same values, no new tensor; decoded is then spent)."""
        if self._dense is not None or self.idx is None:
            if inplace and self.fresh:
                return self.decoded.add_(ref)
            return self.decoded + ref
        return ref.expand(self.shape).clone().scatter_add_(1, self.idx, self.vals)

    def left_(self, msg: torch.Tensor) -> torch.Tensor:
        """msg - decoded, in place on msg (the error-feedback residual)."""
        if self._dense is not None or self.idx is None:
            return msg.sub_(self.decoded)
        return msg.scatter_add_(1, self.idx, self.vals.neg())


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


def compress(x: torch.Tensor, spec: CodecSpec, draws: Draws | None = None) -> Coded:
    """Encode and decode every row of `x` (n, P) with `spec`; `draws`: the random kinds' draws
    (one row per sender of x)."""
    n, p = x.shape
    kind = spec.kind
    nb, wire = sizes(spec, n, p)
    if kind == "topk":
        idx = top_abs(x, kept(spec, p))                             # torch.topk's set
        return Coded(None, nb, wire, idx, x.gather(1, idx), (n, p))
    if kind == "none":
        return Coded(x, nb, wire, fresh=False)
    if kind == "randk":
        k = kept(spec, p)
        idx = draws.subset(k, p)                                    # a uniform k-subset
        return Coded(None, nb, wire, idx, x.gather(1, idx).mul_(p / k), (n, p))  # E = x
    if kind == "qsgd":
        return Coded(_qsgd(x, spec.levels, draws.ints24(p)), nb, wire)
    if kind == "sign":
        scale = x.abs().mean(1, keepdim=True)                       # ||x||_1 / P
        return Coded(torch.copysign(scale, x), nb, wire)          # -0.0 -> -scale
    if kind == "int8":
        scale = x.abs().amax(1, keepdim=True) / 127.0
        safe = torch.where(scale > 0, scale, 1.0)
        return Coded(torch.div(x, safe).round_().clamp_(-127, 127).mul_(scale), nb, wire)
    if kind == "fp16":
        # copy: a float16 message would convert to itself, and error feedback's residual
        # (msg - decoded, in place on msg) would then zero what the receiver decodes
        return Coded(x.to(torch.float16, copy=True).to(x.dtype), nb, wire)
    raise ValueError(f"unknown compression kind {kind!r}")


def sizes(spec: CodecSpec, n: int, p: int) -> tuple[np.ndarray, list[str]]:
    """n rows' bytes and wire names (clients.csv `encoding`) under `spec`: alike for all."""
    if spec.kind == "topk":
        nbytes, name = _topk_row(p, kept(spec, p), spec.encoding)
        return np.full(n, nbytes), [name] * n
    return np.full(n, row_bytes(spec, p)), ["dense" if spec.kind == "none" else spec.kind] * n


@functools.lru_cache(maxsize=64)
def _topk_row(p: int, k: int, encoding: str) -> tuple[float, str]:
    """A top-k row's size and wire name (every row keeps k: the same for all)."""
    one = [np.array([float(k)])]
    return (float(messages.row_bytes([p], one, 1, encoding)[0]),
            messages.row_encodings([p], one, 1, encoding)[0])


def _qsgd(x: torch.Tensor, s: int, u24: torch.Tensor) -> torch.Tensor:
    """QSGD (Alistarh et al. 2017): |x_i| / ||x|| * s rounded up with probability its
    fractional part (floor(level + u), u = u24 * 2^-24 uniform; u24 the 24-bit integers, int32
    or float32: the add converts them exactly), so E[out] = x. In place on one new tensor."""
    norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    safe = torch.where(norm > 0, norm, 1.0)
    level = x.abs().mul_(s / safe)
    level.add_(u24, alpha=UNIT24).floor_().mul_(norm / s)
    return torch.copysign(level, x, out=level)
