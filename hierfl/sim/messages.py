"""Message sizes. A float32 entry is 4 bytes dense; a sparse entry is a 4-byte index plus a
4-byte value. `auto` takes the smaller of the two per tensor."""
from __future__ import annotations

import numpy as np
import torch

DENSE = 4
SPARSE = 8


def tensor_bytes(t: torch.Tensor, encoding: str = "dense") -> float:
    dense = DENSE * t.numel()
    if encoding == "dense":
        return float(dense)
    nnz = int(torch.count_nonzero(t))
    if encoding == "sparse":
        return float(SPARSE * nnz)
    return float(min(dense, SPARSE * nnz))


def message_bytes(tensors: tuple[torch.Tensor, ...], encoding: str = "dense") -> float:
    return sum(tensor_bytes(t, encoding) for t in tensors)


def row_bytes(tensors: tuple[torch.Tensor, ...], encoding: str = "dense") -> np.ndarray:
    """Bytes of each client's upload: one row of every (C, P) tensor."""
    c = tensors[0].shape[0]
    total = np.zeros(c)
    for t in tensors:
        dense = np.full(c, float(DENSE * t.shape[1]))
        if encoding == "dense":
            total += dense
            continue
        sparse = SPARSE * torch.count_nonzero(t, dim=1).double().numpy()
        total += sparse if encoding == "sparse" else np.minimum(dense, sparse)
    return total
