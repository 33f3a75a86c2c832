"""The device of the batched executor (`train.executor.device: auto | cpu | cuda`).

`resolve` turns the scenario's word into a `torch.device` (auto: CUDA when present); asking for
CUDA where there is none is a validation error naming the key. `OnDevice` carries one round's
work there and the result back: the data tensors are copied once per data set (cached by
identity), the model once per model, and per round only what the round needs (the program's
tensors: start parameters and per-client terms; the minibatch row indices and weights; the full
local data of the round's clients). Results come back to the CPU, so the round runner, the
algorithms' aggregation, the evaluation and every output see CPU tensors whatever the device,
and device `cpu` moves nothing at all (the same bytes as before)."""
from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict

import torch

from ..config.errors import ScenarioError
from ..learn.batches import Batch, BatchPlan
from ..learn.solver import SolveResult

KEY = "train.executor.device"


def cuda_available() -> bool:
    return torch.cuda.is_available()


def resolve(name: str, file: str = "") -> torch.device:
    """`auto` -> cuda if available else cpu; `cuda` without CUDA -> ScenarioError (exit 2)."""
    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    if name == "cuda" and not cuda_available():
        raise ScenarioError.one(file, KEY, name, "CUDA is not available on this machine "
                                "(torch.cuda.is_available() is False): use cpu or auto")
    if name not in ("cpu", "cuda"):
        raise ScenarioError.one(file, KEY, name, "one of auto, cpu, cuda")
    return torch.device(name)


def model_on(model, device: torch.device):
    """A copy of `model` whose tensors live on `device` (a TorchModel's module; the functional
    models hold no tensors and are returned as they are)."""
    module = getattr(model, "module", None)
    if module is None:
        return model
    moved = copy.copy(model)
    moved.module = copy.deepcopy(module).to(device)
    named = list(moved.module.named_parameters())
    if hasattr(model, "_plist"):
        moved._plist = [p for _, p in named]
    return moved


def tree_to(obj, device: torch.device, model=None, memo: dict | None = None):
    """Tensors of a program (a frozen dataclass of tensors, floats, terms, tuples) moved to
    `device`; a field holding `model` is replaced by `memo['model']`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if model is not None and obj is model and memo is not None:
        return memo["model"]
    if isinstance(obj, tuple):
        return tuple(tree_to(o, device, model, memo) for o in obj)
    if isinstance(obj, list):
        return [tree_to(o, device, model, memo) for o in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        kw = {f.name: tree_to(getattr(obj, f.name), device, model, memo)
              for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **kw)
    return obj


class OnDevice:
    """Moves a round's work to one device and its result back (see the module docstring)."""

    def __init__(self, device: torch.device | str, size: int = 4):
        self.device = torch.device(device)
        self.size = size
        self.data: OrderedDict[int, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self.models: dict[int, tuple[object, object]] = {}

    @property
    def moves(self) -> bool:
        return self.device.type != "cpu"

    def tensor(self, t: torch.Tensor) -> torch.Tensor:
        """A data tensor's copy on the device, made once while the tensor lives."""
        hit = self.data.get(id(t))
        if hit is not None and hit[0] is t:
            self.data.move_to_end(id(t))
            return hit[1]
        moved = t.to(self.device)
        self.data[id(t)] = (t, moved)
        while len(self.data) > self.size:
            self.data.popitem(last=False)
        return moved

    def model(self, model):
        hit = self.models.get(id(model))
        if hit is None or hit[0] is not model:
            hit = (model, model_on(model, self.device))
            self.models[id(model)] = hit
        return hit[1]

    def program(self, program):
        model = getattr(program, "model", None)
        memo = {"model": self.model(model)} if model is not None else None
        return tree_to(program, self.device, model, memo)

    def plan(self, plan: BatchPlan) -> BatchPlan:
        return BatchPlan(plan.rows.to(self.device), plan.weights.to(self.device),
                         self.tensor(plan.x), self.tensor(plan.y), plan.aug)

    def batch(self, b: Batch) -> Batch:
        return Batch(b.x.to(self.device), b.y.to(self.device), b.m.to(self.device))

    @staticmethod
    def back(res: SolveResult) -> SolveResult:
        cpu = torch.device("cpu")
        return SolveResult(tuple(t.to(cpu) for t in res.state), res.steps.to(cpu),
                           res.grad_evals.to(cpu), res.full_evals.to(cpu), res.gamma.to(cpu))
