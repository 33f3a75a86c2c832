"""Message sizes, from shapes and nonzero counts (no tensors: the round runner in exec/ counts
the nonzeros). A float32 entry is 4 bytes dense; a sparse entry is a 4-byte index plus a
4-byte value; a bitmap message is one bit per entry (ceil(P / 8) bytes) plus 4 bytes per nonzero.
`auto` takes the smaller of dense and sparse per tensor; `best` the smallest of all three.

Per row (one client's upload), with P entries and nnz nonzeros: sparse beats dense when
nnz < P / 2; bitmap beats sparse when nnz > P / 32 and dense when nnz < 31 P / 32 (about), so
for the moderately sparse models pFedMac-S produces (a few % to ~95 % nonzeros) bitmap wins."""
from __future__ import annotations

from typing import Sequence

import numpy as np

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


def needs_nnz(encoding: str) -> bool:
    """Does the size of a message in this encoding depend on its nonzeros?"""
    return encoding != "dense"


def tensor_bytes(numel: int, nnz: float | None = None, encoding: str = "dense") -> float:
    """One tensor of `numel` entries, `nnz` of them nonzero (needed unless dense)."""
    if encoding == "dense":
        return float(DENSE * numel)
    return float(_choose(_sizes(numel, np.array([float(nnz)])), encoding)[0][0])


def message_bytes(numels: Sequence[int], nnz: Sequence[float] | None = None,
                  encoding: str = "dense") -> float:
    """A message of several tensors (their sizes `numels`)."""
    return sum(tensor_bytes(p, None if nnz is None else nnz[i], encoding)
               for i, p in enumerate(numels))


def row_bytes(widths: Sequence[int], nnz: Sequence[np.ndarray] | None, rows: int,
              encoding: str = "dense") -> np.ndarray:
    """Bytes of each client's upload: one row of every (rows, width) tensor; `nnz[j]` holds the
    nonzeros per row of tensor j (float64; needed unless dense)."""
    total = np.zeros(rows)
    for j, p in enumerate(widths):
        if encoding == "dense":
            total += float(DENSE * p)
            continue
        total += _choose(_sizes(p, nnz[j]), encoding)[0]
    return total


def row_encodings(widths: Sequence[int], nnz: Sequence[np.ndarray] | None, rows: int,
                  encoding: str = "dense") -> list[str]:
    """The encoding each row's message used (per tensor, joined by '+' when several)."""
    if encoding in ENCODINGS:
        return ["+".join([encoding] * len(widths))] * rows
    picks = [_choose(_sizes(p, nnz[j]), encoding)[1] for j, p in enumerate(widths)]
    return ["+".join(ENCODINGS[int(p[i])] for p in picks) for i in range(rows)]
