"""Secure aggregation (docs/secure-aggregation.md): spec.py the `secure_aggregation:` keys;
cost.py the bytes, messages and round trips of one protocol run with dropouts (torch-free);
field.py the arithmetic effect, values summed in a 2^bits field (torch).

The names below are imported when first used (PEP 562): the keys and the costs are torch-free
(`hierfl validate` reads them), the field arithmetic is not."""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {                  # public name -> module
    "SecAggSpec": "spec", "MAX_BITS": "spec", "Phase": "cost", "SecAggCost": "cost",
    "harary": "cost", "recovers": "cost", "round_cost": "cost", "scale": "field",
    "error_bound": "field", "encode": "field", "field_sum": "field", "decode": "field",
    "field_mean": "field",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'hierfl.secagg' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
