"""`topk`: the k entries of largest magnitude (k = `k`, or ceil(ratio * P)), the others 0;
counted as the ledger's sparse encodings of k nonzeros (`encoding`)."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...sim import messages
from ..registry import Codec, declare_codec
from ..spec import kept


def size(spec: Any, p: int) -> tuple[float, str]:
    return _row(p, kept(spec, p), spec.encoding)


@functools.lru_cache(maxsize=64)
def _row(p: int, k: int, encoding: str) -> tuple[float, str]:
    """A top-k row's size and wire name (every row keeps k: the same for all)."""
    one = [np.array([float(k)])]
    return (float(messages.row_bytes([p], one, 1, encoding)[0]),
            messages.row_encodings([p], one, 1, encoding)[0])


def encode(x: Any, spec: Any, draws: Any) -> Any:
    from ..select import top_abs    # torch: validate stays torch-free

    idx = top_abs(x, kept(spec, x.shape[1]))                    # torch.topk's set
    return idx, x.gather(1, idx)


declare_codec(Codec(
    "topk", size, encode,
    summary="the k = ceil(ratio * P) (or k) entries of largest magnitude, the others 0",
    reference="Stich, Cordonnier, Jaggi, Sparsified SGD with Memory, NeurIPS 2018; "
              "Aji & Heafield, EMNLP 2017",
    reads=("ratio", "k", "encoding"), needs=(("ratio", "k"),), sparse=True))
