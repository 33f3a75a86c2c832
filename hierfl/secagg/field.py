"""The arithmetic effect of secure aggregation: the server learns the sum of the masked inputs
modulo 2^bits, so every value is clipped and rounded to a grid before it is masked.

Encoding. Client k clips its update to [-R, R], multiplies it by its weight w_k (FedAvg's
n_k / sum n: the server assigned it, so pre-weighting tells the server nothing new) and rounds
z = w_k clip(x_k) to q = round(s z), kept as the residue q mod 2^bits (two's complement: a
negative q is a large residue). The masks are uniform residues that cancel in the sum, so what
the server holds is sum_k q_k mod 2^bits, which it reads back as a signed integer and divides
by s sum_k w_k.

Headroom. The weights of the n clients that started sum to 1, so |sum_k z_k| <= R: the sum
needs room for R, not n R. Each client's q is within 1/2 of s z, plus float64's rounding,
under 1/32 of a step while |s z| < 2^47 (bits <= 48), so with H = 2^(bits-1) - 1 and
s = (H - n) / R (H - n levels for R) the signed sum stays within [-H, H] and never wraps.
The decoded weighted mean is within n / (s sum w) = n R / ((H - n) sum w) of
sum_k w_k clip(x_k) / sum w (a conservative step per client), and exact when every s z_k is
an integer.

Rounding is deterministic (round half to even): reproducible without a generator, and at 32
bits a step, R / (2^31 - 1 - n) of a pre-weighted value, is far below float32's resolution of
the model. Its price shows at
few bits: a value under half a step rounds to zero every round (biased), which is the effect
a low-bit field has on learning."""
from __future__ import annotations

import torch

from .spec import MAX_BITS


def scale(bits: int, n: int, value_range: float, weight_total: float = 1.0) -> float:
    """s = (2^(bits-1) - 1 - n) / (R W): field units per unit of a pre-weighted value, for n
    clients and weights totalling W (at least 1: the starters' weights, which every client
    knows before anyone drops)."""
    if not 2 <= bits <= MAX_BITS:
        raise ValueError(f"bits {bits} must be in 2..{MAX_BITS}")
    levels = (1 << (bits - 1)) - 1 - n
    if levels < 1:
        raise ValueError(f"{n} clients leave no levels in a {bits}-bit field (need n < "
                         f"2^(bits-1) - 1 = {(1 << (bits - 1)) - 1})")
    if not value_range > 0:
        raise ValueError(f"range {value_range} must be > 0")
    return levels / (value_range * max(1.0, weight_total))


def error_bound(bits: int, n: int, value_range: float, weight_sum: float = 1.0) -> float:
    """The most a decoded coordinate differs from sum w clip(x) / sum w: n / (s sum w)."""
    return n / (scale(bits, n, value_range, weight_sum) * weight_sum)


def encode(updates: torch.Tensor, weights: torch.Tensor, bits: int, value_range: float,
           n: int | None = None) -> torch.Tensor:
    """(C, P) updates and (C,) weights -> (C, P) int64 residues in [0, 2^bits): each row's
    round(s w_k clip(x_k)) mod 2^bits; n clients started (default C)."""
    n = updates.shape[0] if n is None else n
    w = weights.to(torch.float64)
    s = scale(bits, n, value_range, float(w.sum()))
    z = updates.to(torch.float64).clamp(-value_range, value_range) * w[:, None]
    return torch.round(z * s).to(torch.int64) & ((1 << bits) - 1)


def field_sum(rows: torch.Tensor, bits: int) -> torch.Tensor:
    """(C, P) residues -> their (P,) sum mod 2^bits (row by row: each partial sum stays below
    2^49, far from int64's limit)."""
    mask = (1 << bits) - 1
    total = torch.zeros(rows.shape[1], dtype=torch.int64)
    for row in rows:
        total = (total + row) & mask
    return total


def decode(total: torch.Tensor, bits: int, value_range: float, n: int,
           weight_sum: float) -> torch.Tensor:
    """(P,) sum of residues -> the (P,) float64 weighted mean: the signed reading of the
    residue (>= 2^(bits-1) is negative) over s sum w."""
    signed = torch.where(total >= 1 << (bits - 1), total - (1 << bits), total)
    return signed.to(torch.float64) / (scale(bits, n, value_range, weight_sum) * weight_sum)


def field_mean(updates: torch.Tensor, weights: torch.Tensor, bits: int,
               value_range: float | None = None, n: int | None = None) -> torch.Tensor:
    """What the server decodes from the masked inputs of these C clients: the weighted mean
    sum w_k clip(x_k) / sum w_k of (C, P) `updates` through a 2^bits field, (P,) in their dtype.
    weights: each client's share of the starters' total (sum <= 1; the survivors' weights
    summing to 1 when nobody dropped). value_range None: the largest |x| of these rows (the
    agreed range of spec.range null; a zero update gives R = 1, any R encodes zeros alike).
    n: clients that started (default C)."""
    r = float(updates.abs().max()) if value_range is None else value_range
    r = r if r > 0 else 1.0
    n = updates.shape[0] if n is None else n
    total = field_sum(encode(updates, weights, bits, r, n), bits)
    return decode(total, bits, r, n, float(weights.to(torch.float64).sum())).to(updates.dtype)
