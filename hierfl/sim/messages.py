"""Message sizes. A float32 entry is 4 bytes dense; a sparse entry is a 4-byte index plus a
4-byte value; a bitmap message is one bit per entry (ceil(P / 8) bytes) plus 4 bytes per nonzero.
`auto` takes the smaller of dense and sparse per tensor; `best` the smallest of all three.

Per row (one client's upload), with P entries and nnz nonzeros: sparse beats dense when
nnz < P / 2; bitmap beats sparse when nnz > P / 32 and dense when nnz < 31 P / 32 (about), so
for the moderately sparse models pFedMac-S produces (a few % to ~95 % nonzeros) bitmap wins."""
from __future__ import annotations

import numpy as np
import torch

DENSE = 4
SPARSE = 8
BITMAP_VALUE = 4
ENCODINGS = ("dense", "sparse", "bitmap")


def _sizes(p: int, nnz: np.ndarray) -> dict[str, np.ndarray]:
    return {"dense": np.full(nnz.shape, float(DENSE * p)), "sparse": SPARSE * nnz,
            "bitmap": float(-(-p // 8)) + BITMAP_VALUE * nnz}


def _choose(sizes: dict[str, np.ndarray], encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, index into ENCODINGS of the encoding used) per row."""
    if encoding in ENCODINGS:
        i = ENCODINGS.index(encoding)
        return sizes[encoding], np.full(sizes["dense"].shape, i)
    names = ENCODINGS[:2] if encoding == "auto" else ENCODINGS      # auto | best
    stack = np.stack([sizes[n] for n in names])
    pick = np.argmin(stack, axis=0)             # ties go to the first: dense, then sparse
    return np.take_along_axis(stack, pick[None], 0)[0], pick


def tensor_bytes(t: torch.Tensor, encoding: str = "dense") -> float:
    if encoding == "dense":
        return float(DENSE * t.numel())
    nnz = np.array([float(torch.count_nonzero(t))])
    return float(_choose(_sizes(t.numel(), nnz), encoding)[0][0])


def message_bytes(tensors: tuple[torch.Tensor, ...], encoding: str = "dense") -> float:
    return sum(tensor_bytes(t, encoding) for t in tensors)


def _row_nnz(t: torch.Tensor) -> np.ndarray:
    return torch.count_nonzero(t, dim=1).double().numpy()


def row_bytes(tensors: tuple[torch.Tensor, ...], encoding: str = "dense") -> np.ndarray:
    """Bytes of each client's upload: one row of every (C, P) tensor."""
    c = tensors[0].shape[0]
    total = np.zeros(c)
    for t in tensors:
        if encoding == "dense":
            total += float(DENSE * t.shape[1])
            continue
        total += _choose(_sizes(t.shape[1], _row_nnz(t)), encoding)[0]
    return total


def row_encodings(tensors: tuple[torch.Tensor, ...], encoding: str = "dense") -> list[str]:
    """The encoding each row's message used (per tensor, joined by '+' when several)."""
    c = tensors[0].shape[0]
    if encoding in ENCODINGS:
        return ["+".join([encoding] * len(tensors))] * c
    picks = [_choose(_sizes(t.shape[1], _row_nnz(t)), encoding)[1] for t in tensors]
    return ["+".join(ENCODINGS[int(p[i])] for p in picks) for i in range(c)]
