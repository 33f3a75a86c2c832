"""`none`: the message as it is, float32 dense."""
from __future__ import annotations

from typing import Any

from ...sim import messages
from ..registry import Codec, declare_codec


def size(spec: Any, p: int) -> tuple[float, str]:
    return float(messages.DENSE * p), "dense"


def encode(x: Any, spec: Any, draws: Any) -> Any:
    return x                    # (the input itself: compress() marks it as not fresh)


declare_codec(Codec("none", size, encode, summary="x, float32 dense (4 P bytes)"))
