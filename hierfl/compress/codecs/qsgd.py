"""`qsgd`: stochastic rounding of |x_i| / ||x||_2 to `levels` s levels (unbiased), a sign bit
and the level per entry, plus the float32 norm."""
from __future__ import annotations

import math
from typing import Any

from ..registry import Codec, declare_codec

SCALE_BYTES = 4         # the float32 norm


def qsgd_bits(levels: int) -> int:
    """Bits per entry of QSGD with s levels: a sign bit and the level 0..s."""
    return 1 + math.ceil(math.log2(levels + 1))


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(-(-p * qsgd_bits(spec.levels) // 8) + SCALE_BYTES), "qsgd"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    return quantise(x, spec.levels, draws.ints24(x.shape[1]))


def quantise(x: Any, s: int, u24: Any) -> Any:
    """QSGD (Alistarh et al. 2017): |x_i| / ||x|| * s rounded up with probability its
    fractional part (floor(level + u), u = u24 * 2^-24 uniform; u24 the 24-bit integers, int32
    or float32: the add converts them exactly), so E[out] = x. In place on one new tensor."""
    import torch    # torch: validate stays torch-free

    from ..draws import UNIT24      # torch: draws.py imports it

    norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    safe = torch.where(norm > 0, norm, 1.0)
    level = x.abs().mul_(s / safe)
    level.add_(u24, alpha=UNIT24).floor_().mul_(norm / s)
    return torch.copysign(level, x, out=level)


declare_codec(Codec(
    "qsgd", size, encode,
    summary="sign(x_i) ||x||_2 xi_i / s, xi_i = floor(s |x_i| / ||x||_2 + u_i), u_i uniform",
    reference="Alistarh et al., QSGD: Communication-Efficient SGD via Gradient Quantization "
              "and Encoding, NeurIPS 2017",
    reads=("levels",), needs=(("levels",),), seeded=True))
