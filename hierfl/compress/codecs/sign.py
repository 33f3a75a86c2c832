"""`sign`: the sign of each entry (+0 counts as +) times the mean magnitude ||x||_1 / P; one
bit per entry and the float32 scale."""
from __future__ import annotations

from typing import Any

from ..registry import Codec, declare_codec

SCALE_BYTES = 4         # the float32 scale


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(-(-p // 8) + SCALE_BYTES), "sign"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    import torch    # torch: validate stays torch-free

    scale = x.abs().mean(1, keepdim=True)                       # ||x||_1 / P
    return torch.copysign(scale, x)                             # -0.0 -> -scale


declare_codec(Codec(
    "sign", size, encode, summary="±||x||_1 / P: each entry's sign times the mean magnitude",
    reference="Bernstein et al., signSGD, ICML 2018; Karimireddy et al., Error Feedback Fixes "
              "SignSGD and other Gradient Compression Schemes, ICML 2019"))
