"""Algorithms by scenario name. Adding one: a module with a Params dataclass and an Algorithm
subclass, plus a line here."""
from __future__ import annotations

from .base import Algorithm
from .fedavg import FedAvg
from .hierfavg import HierFAVG

REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    REGISTRY[cls.name] = cls
    return cls


for _cls in (FedAvg, HierFAVG):
    register(_cls)


def get(name: str) -> type[Algorithm]:
    return REGISTRY[name]
