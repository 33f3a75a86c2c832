"""Message codecs: what is sent, what it costs in bytes, what the receiver gets
(docs/compression.md). registry.py: the codecs' declarations (codecs/: one module per built-in
codec); spec.py: the `compress:` keys; kinds.py: coding with any codec; draws.py: the seeded
kinds' counter-based draws; select.py: top-k's selection; layer.py: where the round runner
applies them; native.py: the C kernels of some kinds.

The names below are imported when first used (PEP 562): the declarations and the keys are
torch-free (`hierfl validate` reads them), the coding is not."""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {                  # public name -> module
    "Coded": "kinds", "compress": "kinds", "kept": "spec", "qsgd_bits": "codecs.qsgd",
    "row_bytes": "kinds", "Draws": "draws", "Compressor": "layer", "EdgeState": "layer",
    "Sent": "layer", "build": "layer", "Codec": "registry", "declare_codec": "registry",
    "CodecSpec": "spec", "CompressSpec": "spec",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'hierfl.compress' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
