"""`int8`: round(x_i / a) * a with a = max |x_i| / 127 (deterministic rounding); one byte per
entry and the float32 scale."""
from __future__ import annotations

from typing import Any

from ..registry import Codec, declare_codec

SCALE_BYTES = 4         # the float32 scale


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(p + SCALE_BYTES), "int8"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    import torch    # torch: validate stays torch-free

    scale = x.abs().amax(1, keepdim=True) / 127.0
    safe = torch.where(scale > 0, scale, 1.0)
    return torch.div(x, safe).round_().clamp_(-127, 127).mul_(scale)


declare_codec(Codec(
    "int8", size, encode, summary="round(x_i / a) a, a = max |x_i| / 127",
    reference="uniform quantisation with a per-tensor scale, e.g. Jacob et al., CVPR 2018"))
