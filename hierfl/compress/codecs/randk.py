"""`randk`: k coordinates drawn uniformly without replacement, each scaled by P / k (unbiased);
the values and a 4-byte seed are sent (the receiver regenerates the indices)."""
from __future__ import annotations

from typing import Any

from ...sim import messages
from ..registry import Codec, declare_codec
from ..spec import kept

SEED_BYTES = 4          # the receiver regenerates the indices from a 4-byte seed


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(messages.DENSE * kept(spec, p) + SEED_BYTES), "randk"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    p = x.shape[1]
    k = kept(spec, p)
    idx = draws.subset(k, p)                                    # a uniform k-subset
    return idx, x.gather(1, idx).mul_(p / k)                    # E = x


declare_codec(Codec(
    "randk", size, encode,
    summary="k coordinates drawn uniformly without replacement, each scaled by P / k",
    reference="Stich et al. 2018; Konečný et al., Federated Learning: Strategies for "
              "Improving Communication Efficiency, 2016",
    reads=("ratio", "k"), needs=(("ratio", "k"),), seeded=True, sparse=True))
