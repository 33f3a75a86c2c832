"""`fp16`: x rounded to IEEE half precision (values beyond ±65504 become ±inf); 2 bytes per
entry."""
from __future__ import annotations

from typing import Any

from ..registry import Codec, declare_codec


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(2 * p), "fp16"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    import torch    # torch: validate stays torch-free

    # copy: a float16 message would convert to itself, and error feedback's residual
    # (msg - decoded, in place on msg) would then zero what the receiver decodes
    return x.to(torch.float16, copy=True).to(x.dtype)


declare_codec(Codec(
    "fp16", size, encode, summary="x rounded to IEEE half precision",
    reference="Micikevicius et al., Mixed Precision Training, ICLR 2018"))
