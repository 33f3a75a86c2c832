"""Algorithms by scenario name, discovered from the modules of this package: adding an
algorithm is one module (a Params dataclass and an Algorithm subclass with `name`) plus a test.
Code outside the package (a plugin file) adds one with `hierfl.register_algorithm(cls)`."""
from __future__ import annotations

import dataclasses
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


def register_algorithm(cls: type[Algorithm]) -> type[Algorithm]:
    """Make `cls` (an Algorithm subclass with a `name` and a frozen dataclass `Params`) the
    algorithm of `algorithms: [{name: <cls.name>, ...}]`. Usable as a class decorator; registering
    the same class again is a no-op, another class under a taken name is an error."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)) or cls is Algorithm:
        raise TypeError(f"register_algorithm takes a subclass of hierfl.algorithms.base."
                        f"Algorithm, not {cls!r}")
    name = cls.__dict__.get("name", "")
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute name = '<scenario name>'")
    params = cls.Params
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise TypeError(f"{cls.__name__}.Params must be a dataclass of its hyperparameters "
                        "(an empty @dataclass(frozen=True) class when it has none)")
    have = REGISTRY.get(name)
    if have is not None and have is not cls and not _same(have, cls):
        raise ValueError(f"algorithm name {name!r} is taken by {have.__module__}."
                         f"{have.__qualname__}; choose another name")
    REGISTRY[name] = cls
    return cls


def _same(a: type, b: type) -> bool:
    """The same class defined again (a plugin module imported anew in this process)."""
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__) and \
        not a.__module__.startswith("hierfl.")


_discover()


def get(name: str) -> type[Algorithm]:
    return REGISTRY[name]
