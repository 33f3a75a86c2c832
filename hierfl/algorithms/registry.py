"""Algorithms by scenario name. The built-ins are listed here with their module, class and
torch-free facts (Params, whether hierarchical, whether gamma stops apply): the loader and
`hierfl validate` read those without importing the algorithm (torch); the class is imported when
first looked up (`REGISTRY[name]`). Adding an algorithm is one module (an Algorithm subclass
with `name`, its Params in `params.py`), a line in BUILTIN and a test (`tests/test_fixed_costs.py`
checks BUILTIN against the classes). Code outside the package (a plugin file) adds one with
`hierfl.register_algorithm(cls)`."""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

from . import params as P

if TYPE_CHECKING:
    from .base import Algorithm


class Info(NamedTuple):
    """What the loader needs of an algorithm, known without importing it."""

    Params: type
    hierarchical: bool
    supports_gamma: bool
    personalised: bool = False      # one model per client (docs: its kind)
    codes_down: bool = True         # compress.down applies (Capabilities.codes_down)


class Builtin(NamedTuple):
    module: str             # hierfl.algorithms.<module>
    cls: str
    info: Info


def _b(module: str, cls: str, params: type, hierarchical: bool = False,
       supports_gamma: bool = True, personalised: bool = False,
       codes_down: bool = True) -> Builtin:
    return Builtin(module, cls, Info(params, hierarchical, supports_gamma, personalised,
                                     codes_down))


BUILTIN: dict[str, Builtin] = {
    "apfl": _b("apfl", "APFL", P.APFLParams, supports_gamma=False, personalised=True),
    "ditto": _b("ditto", "Ditto", P.DittoParams, supports_gamma=False, personalised=True),
    "fedavg": _b("fedavg", "FedAvg", P.FedAvgParams),
    "feddc": _b("feddc", "FedDC", P.FedDCParams),
    "feddyn": _b("feddyn", "FedDyn", P.FedDynParams),
    "fedprox": _b("fedprox", "FedProx", P.FedProxParams),
    "hierfavg": _b("hierfavg", "HierFAVG", P.HierFAVGParams, hierarchical=True),
    "pfedmac": _b("pfedmac", "PFedMac", P.PFedMacParams, supports_gamma=False, personalised=True),
    "pfedmac_sh": _b("pfedmac_sh", "PFedMacSH", P.PFedMacSHParams, hierarchical=True,
                     supports_gamma=False, personalised=True),
    "pfedme": _b("pfedme", "PFedMe", P.PFedMeParams, supports_gamma=False, personalised=True),
    "scaffold": _b("scaffold", "Scaffold", P.ScaffoldParams),
    "fedadam": _b("fedopt", "FedAdam", P.FedAdamParams, hierarchical=True),
    "fedyogi": _b("fedopt", "FedYogi", P.FedAdamParams, hierarchical=True),
    "fedadagrad": _b("fedopt", "FedAdagrad", P.FedAdagradParams, hierarchical=True),
    "fedsplit": _b("fedsplit", "FedSplit", P.FedSplitParams),
    "feddr": _b("feddr", "FedDR", P.FedDRParams),
    "fedpd": _b("fedpd", "FedPD", P.FedPDParams),
    "proxskip": _b("proxskip", "ProxSkip", P.ProxSkipParams, supports_gamma=False),
    "ifca": _b("ifca", "IFCA", P.IFCAParams, supports_gamma=False, personalised=True,
               codes_down=False),
}


class Registry(MutableMapping):
    """name -> Algorithm subclass; a built-in's class is imported on first lookup."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = dict(BUILTIN)      # a Builtin until looked up

    def __getitem__(self, name: str) -> "type[Algorithm]":
        item = self._items[name]
        if isinstance(item, Builtin):
            module = importlib.import_module(f"{__package__}.{item.module}")
            item = self._items[name] = getattr(module, item.cls)
        return item

    def __setitem__(self, name: str, cls: "type[Algorithm]") -> None:
        self._items[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:      # without importing (Mapping's looks up)
        return name in self._items

    def info(self, name: str) -> Info:
        """Params and flags of `name` (KeyError when unknown), importing nothing."""
        item = self._items[name]
        if isinstance(item, Builtin):
            return item.info
        return Info(item.Params, item.hierarchical, item.supports_gamma,
                    bool(getattr(item, "personalised", False)),
                    bool(getattr(item, "codes_down", True)))

    def is_builtin(self, name: str) -> bool:
        item = self._items.get(name)
        return isinstance(item, Builtin) or \
            getattr(item, "__module__", "").startswith("hierfl.")


REGISTRY = Registry()


def register_algorithm(cls: "type[Algorithm]") -> "type[Algorithm]":
    """Make `cls` (an Algorithm subclass with a `name` and a frozen dataclass `Params`) the
    algorithm of `algorithms: [{name: <cls.name>, ...}]`. Usable as a class decorator; registering
    the same class again is a no-op, another class under a taken name is an error."""
    from .base import Algorithm

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


def get(name: str) -> "type[Algorithm]":
    return REGISTRY[name]
