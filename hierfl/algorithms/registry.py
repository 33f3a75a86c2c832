"""Algorithms by scenario name, discovered from the modules of this package: adding an
algorithm is one module (a Params dataclass and an Algorithm subclass with `name`) plus a test."""
from __future__ import annotations

import importlib
import pkgutil

from .base import Algorithm

REGISTRY: dict[str, type[Algorithm]] = {}


def _discover() -> None:
    pkg = importlib.import_module(__package__)
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod in ("base", "registry") or mod.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{mod}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, Algorithm) and obj.name
                    and obj.__module__ == module.__name__):
                if obj.name in REGISTRY and REGISTRY[obj.name] is not obj:
                    raise RuntimeError(f"two algorithms named {obj.name!r}")
                REGISTRY[obj.name] = obj


_discover()


def get(name: str) -> type[Algorithm]:
    return REGISTRY[name]
