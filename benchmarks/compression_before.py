"""The upload coding as it was before the issue-18 speed-ups (commit 4bc78e6), kept only so that
benchmarks/compression.py can time before and after alternately in one run: `uploads` has
Compressor.uploads' signature and state (spec, seed, residual, as_is) and gives the same
results for every kind but randk (whose subset draw changed: a partial sort of P hashed keys
then, the first k distinct of k-odd draws now)."""
from __future__ import annotations

import numpy as np
import torch

from hierfl.compress.kinds import kept, row_bytes
from hierfl.compress.registry import seeded
from hierfl.seeding import rng
from hierfl.sim import messages

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B1
_C1, _C2 = 0x21F0AAAD, 0x735A2D97


def _mix(h: torch.Tensor) -> torch.Tensor:
    h.bitwise_xor_(h >> 16).mul_(_C1).bitwise_and_(_M32)
    return h.bitwise_xor_(h >> 15).mul_(_C2).bitwise_and_(_M32)


def uniform(key: int, senders: np.ndarray, p: int) -> torch.Tensor:
    rows = _mix((torch.from_numpy(np.asarray(senders, np.int64)) * _GOLDEN + key) & _M32)
    cols = (torch.arange(p, dtype=torch.int64) * _GOLDEN) & _M32
    h = _mix(rows.unsqueeze(1) ^ cols)
    return h.bitwise_right_shift_(8).to(torch.float32).mul_(1.0 / 16777216)


def compress(x, spec, noise=None):
    """(decoded, bytes, wire) as the old kinds.compress."""
    n, p = x.shape
    kind = spec.kind
    if kind == "topk":
        k = kept(spec, p)
        idx = x.abs().topk(k, dim=1, sorted=False).indices
        out = torch.zeros_like(x).scatter_(1, idx, x.gather(1, idx))
        nnz = [np.full(n, float(k))]
        return (out, messages.row_bytes([p], nnz, n, spec.encoding),
                messages.row_encodings([p], nnz, n, spec.encoding))
    wire, nb = [kind] * n, np.full(n, row_bytes(spec, p))
    if kind == "randk":
        k = kept(spec, p)
        idx = noise.topk(k, dim=1, sorted=False).indices
        return torch.zeros_like(x).scatter_(1, idx, x.gather(1, idx) * (p / k)), nb, wire
    if kind == "qsgd":
        s = spec.levels
        norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        safe = torch.where(norm > 0, norm, torch.ones_like(norm))
        level = x.abs().mul_(s / safe)
        return torch.copysign(level.add_(noise).floor_().mul_(norm / s), x), nb, wire
    if kind == "sign":
        scale = x.abs().mean(1, keepdim=True)
        return torch.copysign(scale.expand_as(x), x), nb, wire
    if kind == "int8":
        scale = x.abs().amax(1, keepdim=True) / 127.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        return (x / safe).round().clamp(-127, 127) * scale, nb, wire
    if kind == "fp16":
        return x.to(torch.float16).to(x.dtype), nb, wire
    raise ValueError(kind)


def uploads(self, t, r, clients, start, tensors, header, silent=None):
    """The old Compressor.uploads (per-row wire lists, torch index_copy_ of residuals)."""
    from hierfl.compress.layer import Sent

    codec = self.spec.up
    n = len(clients)
    body = len(tensors) - header
    out, nbytes = [], np.zeros(n)
    wires: list[list[str]] = [[] for _ in range(n)]
    rows = torch.from_numpy(clients)
    sending = None if silent is None or not silent.any() else torch.from_numpy(~silent)
    for j, x in enumerate(tensors[:body]):
        ref = None if j in self.as_is else start.to(x.dtype)
        msg = x.clone() if ref is None else x - ref
        res = self.residual.get(f"up.{j}")
        if res is not None:
            msg.add_(res.index_select(0, rows).to(msg.dtype))
        noise = None
        if seeded(codec.kind):
            base = int(rng(self.seed, "compress.up", t, r, j).integers(0, 2 ** 32))
            noise = uniform(base, clients, x.shape[1])
        dec, nb, wire = compress(msg, codec, noise)
        if res is not None:
            left = msg.sub_(dec).to(res.dtype)
            if sending is None:
                res.index_copy_(0, rows, left)
            else:
                res.index_copy_(0, rows[sending], left[sending])
        out.append(dec if ref is None else dec.add_(ref))
        nbytes += nb
        for w, name in zip(wires, wire):
            w.append(name)
    for x in tensors[body:]:
        out.append(x)
        nbytes += float(messages.DENSE * x.shape[1])
        for w in wires:
            w.append("dense")
    return Sent(tuple(out), nbytes, ["+".join(w) for w in wires])

