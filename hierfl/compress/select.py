"""Top-k selection for the topk codec: each row's k entries of largest magnitude, the same set
as `torch.topk(x.abs(), k, dim=1)` (the order among the k does not matter to the codec: it
scatters k distinct coordinates), by one numpy partition of the rows (an introselect on
int32, 1.35x faster than torch.topk's heap per row at 200 x 610, even at 100 x 610) and one
comparison.

Magnitudes are compared as the int32 bit patterns of |x| (monotonic for non-negative floats; a
NaN's pattern lies above infinity's, as torch.topk puts NaN on top). Each row's k-th largest
pattern v is partitioned into place; the row's entries at or above v are its top k unless
more than k are (a tie for the last place, which torch.topk breaks its own way) or v is a NaN
(torch.topk ties every NaN): such rows are left to torch.topk itself, on those rows alone (a
row's result never depends on the others)."""
from __future__ import annotations

import numpy as np
import torch

_NAN_BITS = 0x7F800000          # above: a NaN's bit pattern (|x| has the sign bit clear)


def top_abs(x: torch.Tensor, k: int) -> torch.Tensor:
    """(n, k) int64: each row's coordinates of its k largest |x| (in no particular order)."""
    n, p = x.shape
    if x.dtype != torch.float32 or n == 0 or k >= p:
        return x.abs().topk(k, dim=1, sorted=False).indices
    mag = np.abs(x.detach().numpy()).view(np.int32)
    kth = np.partition(mag, p - k, axis=1)[:, p - k]          # each row's k-th largest
    flat = np.flatnonzero(mag >= kth[:, None])
    if len(flat) == n * k and not (kth > _NAN_BITS).any():
        return torch.from_numpy((flat % p).reshape(n, k))
    rows = np.bincount(flat // p, minlength=n)                 # entries at or above kth
    bad = (rows > k) | (kth > _NAN_BITS)
    idx = np.empty((n, k), np.int64)
    good = ~bad
    sel = flat[np.repeat(good, rows)]
    idx[good] = (sel % p).reshape(-1, k)
    idx[bad] = x[torch.from_numpy(np.flatnonzero(bad))].abs().topk(
        k, dim=1, sorted=False).indices.numpy()
    return torch.from_numpy(idx)
