"""Models by scenario name: `model: {name: cnn, channels: [32, 64]}` calls the factory
registered as "cnn" with input_shape, num_classes and the mapping's other keys as keyword
arguments.

    @hierfl.register_model("tiny")
    def tiny(input_shape: tuple[int, ...], num_classes: int, width: int = 16) -> nn.Module:
        ...

A factory returns a `torch.nn.Module` (wrapped into a `TorchModel`: stacked parameters,
batched gradients, FLOPs counted from the module) or a ready stacked `Model` (the built-in
`logreg`, `linear` and `mlp`, whose closed forms and fused steps stay as they were).

One declaration per model (hierfl/registry.py): a built-in is a package of `hierfl/models/`
whose torch-free `__init__.py` declares it (`declare_model`: name, task, the options with their
docs, what inputs it reads, "module:function" of its factory), its factory imported (with
torch) when a model is built. `register_model` registers a factory at once (a plugin's, or the
torch-free stacked built-ins)."""
from __future__ import annotations

import difflib
import inspect
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..config.errors import ScenarioError
from ..config.fields import keyword_options
from ..config.schema import ModelSpec
from ..registry import Declaration, Registry, forward_to_code

if TYPE_CHECKING:
    from torch import nn

    from .functional import Model
    from .torch_model import TorchModel

Factory = Callable[..., "nn.Module | Model"]
BUILTIN_KEYS = ("bias", "hidden")       # ModelSpec's own keys, passed when the model takes them
TASKS = ("classification", "regression")
INPUTS = ("any", "features", "images", "indices")


class ModelOptionError(ValueError):
    """A factory's rejection of one option: `key` names it (model.<key> in the error)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class ModelFacts:
    task: str                           # "classification" (outputs = classes) or "regression"
    options: dict[str, str] | None      # option -> doc (None: any, a factory with **kwargs)
    inputs: str = "any"                 # features (rows), images (pixels), indices (embedded)


MODELS = Registry("model", __package__)


def _task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"task must be classification or regression, not {task!r}")


def register_model(name: str, task: str = "classification") -> Callable[[Factory], Factory]:
    """Register `factory(input_shape, num_classes, **options)` as `model: {name: <name>}`.
    For task "regression", num_classes is the number of regression outputs."""
    _task(task)

    def deco(factory: Factory) -> Factory:
        opts = keyword_options(factory, skip=2)
        MODELS.declare(Declaration(
            "model", name, obj=factory, origin=str(getattr(factory, "__module__", "")),
            facts=ModelFacts(task, None if opts is None else {o: "" for o in opts}),
            summary=(factory.__doc__ or "").strip().split("\n")[0]))
        return factory
    return deco


def declare_model(name: str, *, code: str, task: str = "classification",
                  options: dict[str, str] | None = None, inputs: str = "any",
                  summary: str = "", origin: str = "") -> None:
    """Declare model `name` without importing its factory ("module:function", imported with
    torch when the model is built); `options`: each option the factory takes, with its doc."""
    _task(task)
    if inputs not in INPUTS:
        raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, not {inputs!r}")
    origin = origin or sys._getframe(1).f_globals.get("__name__", "")
    MODELS.declare(Declaration("model", name, code, facts=ModelFacts(task, options, inputs),
                               summary=summary, origin=origin))
    forward_to_code(origin, code)


def model_facts(name: str) -> ModelFacts:
    """Task, options and inputs of a known model, importing nothing (KeyError when unknown)."""
    return MODELS.declaration(name).facts


def given_options(spec: ModelSpec) -> dict[str, Any]:
    """The options written in the scenario: its extra keys, and bias / hidden when given."""
    kw = {k: getattr(spec, k) for k in BUILTIN_KEYS if getattr(spec, k) is not None}
    kw.update(spec.options)
    return kw


def option_problems(spec: ModelSpec) -> list[tuple[str, str]]:
    """(key, message) for every option the model named by `spec` does not take."""
    if spec.name not in MODELS:
        return []
    opts = model_facts(spec.name).options
    if opts is None:
        return []
    allowed = list(opts)
    out = []
    for key in sorted(set(given_options(spec)) - set(allowed)):
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        takes = ", ".join(sorted({*allowed, "init", "name"}))
        out.append((key, f"unknown key for model {spec.name!r}{hint}; allowed: {takes}"))
    return out


def build_model(spec: ModelSpec, dim: int, out_dim: int, n_classes: int,
                input_shape: tuple[int, ...] | None = None,
                vocab: int = 0) -> "Model | TorchModel":
    """The model of a scenario for inputs of `input_shape` (default: flat rows of `dim`); a
    built-in factory with a `vocab` option that the scenario does not give receives the data's
    vocabulary (index inputs in 0..vocab-1; a plugin's keeps the default its author wrote)."""
    import torch                            # torch: building a model needs it, declaring not
    from torch import nn

    from .functional import Model           # torch: as above

    if spec.name not in MODELS:
        raise ValueError(MODELS.unknown(spec.name))
    decl = MODELS.declaration(spec.name)
    task, factory = decl.facts.task, MODELS[spec.name]
    if task == "classification" and n_classes == 0:
        raise ValueError("classification model on regression targets")
    shape = tuple(input_shape) if input_shape is not None else (int(dim),)
    outputs = n_classes if task == "classification" else out_dim
    with torch.random.fork_rng(devices=[]):       # construction draws nothing from the global
        torch.manual_seed(0)                      # generator (init() redraws from the seed)
        opts = dict(given_options(spec))
        if vocab and "vocab" not in opts and "vocab" in inspect.signature(
                factory).parameters and decl.builtin:           # (a plugin keeps its own)
            opts["vocab"] = int(vocab)
        try:
            made = factory(shape, outputs, **opts)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's factory: any failure is named
            opts = ", ".join(f"{k}={v!r}" for k, v in given_options(spec).items())
            raise ValueError(f"model factory {spec.name!r} raised {type(exc).__name__}: {exc} "
                             f"(inputs {shape}, {outputs} outputs"
                             f"{', ' + opts if opts else ''})") from None
    if isinstance(made, nn.Module):
        return _torch_model(made, shape, task, spec.name)
    if not isinstance(made, Model):
        raise ValueError(f"model factory {spec.name!r} returned {type(made).__name__}, "
                         f"not a torch.nn.Module")
    return made


def _torch_model(module: "nn.Module", shape: tuple[int, ...], task: str,
                 name: str) -> "TorchModel":
    """The module behind the stacked interface; a module that fails on one input is a
    ValueError naming the model."""
    from .torch_model import TorchModel     # torch: as build_model
    try:
        model = TorchModel(module, shape, task, name)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module: any failure is named
        raise ValueError(f"model {name!r} fails on one input of shape {(1, *shape)}: "
                         f"{type(exc).__name__}: {exc}") from None
    return model


def _check_scores(model: "Model | TorchModel", n_classes: int) -> None:
    """A torch classifier gives one score per class for one input."""
    if model.task != "classification" or not hasattr(model, "out_shape"):
        return
    out = tuple(model.out_shape) if model.out_shape is not None else None
    if out != (1, n_classes):
        raise ValueError(f"model {model.name!r} gives outputs of shape {out} for one input, "
                         f"not {(1, n_classes)}: one score per class")


def scenario_model(file: str, spec: ModelSpec, data: Any) -> "Model | TorchModel":
    """`build_model` for a scenario's data (its `input_shape` where it has one), a factory's
    rejection reported as a ScenarioError naming the model key."""
    try:
        model = build_model(spec, data.dim, data.out_dim, data.n_classes,
                            getattr(data, "input_shape", None), getattr(data, "vocab", 0))
        _check_scores(model, data.n_classes)
        return model
    except ValueError as exc:
        key = exc.key if isinstance(exc, ModelOptionError) else "name"
        value = given_options(spec).get(key, spec.name)
        raise ScenarioError.one(file, f"model.{key}", value, str(exc)) from None
