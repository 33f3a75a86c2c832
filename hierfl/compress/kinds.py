"""Coding with any declared codec (registry.py; the built-ins in codecs/): each encodes a (n, P)
batch of messages (one row per sender) in a few whole-batch torch ops (no Python per sender);
here that becomes what the receiver decodes and what each row costs in bytes (the codec's byte
rule, from the sizes alone: nothing is serialised). docs/compression.md gives every built-in's
rule, bytes and reference.

    compress(x, spec, draws) -> Coded(decoded (n, P), bytes (n,), wire (encoding name))

`draws` (draws.Draws) holds the random (seeded) kinds' counter-based draws, keyed on each
row's sender, so a row's result does not depend on which other rows share its batch."""
from __future__ import annotations

import numpy as np
import torch

from .codecs.qsgd import qsgd_bits
from .draws import Draws
from .registry import codec
from .spec import CodecSpec, kept

__all__ = ["Coded", "compress", "kept", "qsgd_bits", "row_bytes", "sizes"]

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


def row_bytes(spec: CodecSpec, p: int) -> float:
    """The encoded size of one row of P entries (it never depends on the values)."""
    return codec(spec.kind).size(spec, p)[0]


def compress(x: torch.Tensor, spec: CodecSpec, draws: Draws | None = None) -> Coded:
    """Encode and decode every row of `x` (n, P) with `spec`; `draws`: the seeded kinds' draws
    (one row per sender of x)."""
    n, p = x.shape
    nb, wire = sizes(spec, n, p)
    out = codec(spec.kind).encode(x, spec, draws)
    if isinstance(out, tuple):                  # a sparse kind's kept (idx, vals)
        idx, vals = out
        return Coded(None, nb, wire, idx, vals, (n, p))
    return Coded(out, nb, wire, fresh=out is not x)


def sizes(spec: CodecSpec, n: int, p: int) -> tuple[np.ndarray, list[str]]:
    """n rows' bytes and wire names (clients.csv `encoding`) under `spec`: alike for all."""
    nbytes, name = codec(spec.kind).size(spec, p)
    return np.full(n, nbytes), [name] * n
