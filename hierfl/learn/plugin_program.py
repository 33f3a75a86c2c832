"""A local training plugin as a LocalProgram (learn/local_train.py says what the user writes).

`PluginProgram` replaces an algorithm's plain local program (a TermsProgram without terms: SGD
on F_k) where `train.local.solver` names a plugin. It runs per client: `solve` (called by
learn/solver.solve in place of the lock-step loop, on every executor) gives client k a copy of
the model's module holding its start row, an iterator over its plan minibatches that ends after
budget[k] batches or earlier where a gamma target is met (the solver's rule: every check_every
steps, ||grad F_k(w)|| on the client's full data <= gamma ||grad F_k(w^t)||), and a
`LocalContext`; the batches it took are res.steps[k], so compute time and bytes follow as for
the built-in steps. A plugin that raises, leaves a non-finite parameter or changes the module's
parameters is a ScenarioError naming it, the client, the round and its own line."""
from __future__ import annotations

import copy
import dataclasses
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch import nn

from .. import seeding
from ..config.errors import ScenarioError
from ..models.functional import AutogradModel, Model
from .batches import Batch, BatchPlan, gather, model_input
from .local_train import LOCAL_TRAINS, LOSSES, LocalContext
from .solver import ProgramBase, SolveResult, State, TermsProgram, _grad_norm

KEY = "train.local.solver"


def with_loss(model: Any, name: str | None) -> Any:
    """`model` whose per-sample loss is the registered loss `name` (None: `model` itself): a
    copy with `sample_loss` replaced, every path of the model reading it (a functional model
    on its autograd reference: its closed forms are the cross-entropy's)."""
    if name is None:
        return model
    fn = LOSSES[name]
    if isinstance(model, Model):
        return LossModel(model, fn)
    out = copy.copy(model)
    out.sample_loss = fn
    return out


class LossModel(AutogradModel):
    """A functional model with a loss of the user's: autograd gradients (its closed forms are
    the cross-entropy's), and its own reference (the sequential executor keeps the loss)."""

    def __init__(self, base: Model, loss: Callable):
        super().__init__(base)
        self.sample_loss = loss             # type: ignore[method-assign]

    def reference(self) -> "LossModel":
        return self


def own_local(program: Any, local: Any, sc: Any, label: str, clients: Any, t: int,
              r: int) -> Any:
    """Round (t, r)'s program for `clients` of the algorithm entry `label` of scenario `sc`,
    with train.local.solver's plugin in place of the plain SGD steps (`program` itself where
    no solver is named)."""
    if local.solver is None:
        return program
    key = _key(sc, label, local.solver)
    if type(program) is not TermsProgram or program.terms or program.optimizer is not None \
            or program.grad_clip is not None or program.clip is not None:
        raise ScenarioError.one(sc.file, key, local.solver, f"{label}: a local training "
                                "plugin replaces plain SGD steps on F_k only; this algorithm's "
                                f"local program is {type(program).__name__} with terms or an "
                                "optimizer (declare Capabilities(local_train=False))")
    return PluginProgram(program.model, program.start, local.solver,
                         torch.as_tensor(clients, dtype=torch.long), int(t), int(r),
                         int(sc.seed), local.batch_size, (sc.file, key, label))


def _key(sc: Any, label: str, solver: str) -> str:
    """Where the scenario names the solver: train.local, or the entry's own local:."""
    if solver == sc.train.local.solver:
        return KEY
    i = next((j for j, e in enumerate(sc.algorithms) if e.label == label), None)
    return KEY if i is None else f"algorithms[{i}].local.solver"


@dataclass(frozen=True)
class PluginProgram(ProgramBase):
    """Client k's local work done by the local training plugin `solver` (module doc)."""

    model: Any                  # Model or TorchModel (its module is what the plugin trains)
    start: torch.Tensor         # (C, P) start rows
    solver: str
    clients: torch.Tensor       # (C,) client ids
    round: int
    edge_round: int
    seed: int
    batch_size: int | str = 10
    where: tuple[str, str, str] = ("", KEY, "")     # the scenario file, the solver's key and
    #                                                 the algorithm's label (for errors)
    grad_evals_per_step: int = 1

    def init(self) -> State:
        return (self.start.clone(),)

    def step(self, s: State, batch: Batch, lr: float) -> State:
        raise TypeError("a local training plugin runs per client (PluginProgram.solve)")

    def grad_h(self, s: State, full: Batch) -> torch.Tensor:
        return self.model.grad(s[0], full.x, full.y, full.m)

    def select(self, sel: torch.Tensor) -> "PluginProgram":
        return dataclasses.replace(self, start=self.start[sel], clients=self.clients[sel])

    # ------------------------------------------------------------------ per client
    def solve(self, plan: BatchPlan, full: Batch, budgets: torch.Tensor, lr: float,
              gamma: float | None, check_every: int, measure: bool = True) -> SolveResult:
        """What learn/solver.solve returns, each client run by the plugin in turn."""
        fn = LOCAL_TRAINS[self.solver]
        c = budgets.shape[0]
        g0n = _grad_norm(self, (self.start,), full) if measure or gamma is not None else None
        base = _module_of(self.model).to(self.start.dtype)
        rows, steps, checks = [], [], []
        for k in range(c):
            target = None if gamma is None or g0n is None else gamma * float(g0n[k])
            row, taken, n = self._client(fn, base, k, plan, full.rows(slice(k, k + 1)),
                                         int(budgets[k]), lr, target, check_every)
            rows.append(row)
            steps.append(taken)
            checks.append(n)
        final = torch.stack(rows) if rows else self.start.clone()
        steps_t = torch.tensor(steps, dtype=budgets.dtype)
        if g0n is not None:
            ach = _grad_norm(self, (final,), full) / g0n.clamp_min(1e-30)
        else:
            ach = torch.full((c,), float("nan"))
        full_evals = torch.tensor(checks, dtype=torch.long) + (
            (budgets > 0).long() if gamma is not None else 0)
        return SolveResult((final,), steps_t, steps_t * self.grad_evals_per_step, full_evals,
                           ach)

    def _client(self, fn: Callable, base: nn.Module, k: int, plan: BatchPlan, full: Batch,
                budget: int, lr: float, target: float | None,
                check_every: int) -> tuple[torch.Tensor, int, int]:
        """Client k's final row, batches taken and gamma checks made."""
        module = copy.deepcopy(base)
        params = list(module.parameters())
        with torch.no_grad():
            for p, v in zip(params, self.start[k].split([p.numel() for p in params])):
                p.copy_(v.view(p.shape))
        shapes = [(n, tuple(p.shape)) for n, p in module.named_parameters()]
        client = int(self.clients[k])

        def norm_now() -> float:
            row = _row(module).unsqueeze(0)
            return float(_grad_norm(self, (row,), full)[0])

        batches = ClientBatches(plan, k, budget, self._input_shape(), target, check_every,
                                norm_now)
        ctx = LocalContext(lr, budget, self.round, self.edge_round, client,
                           seeding.torch_gen(self.seed, "local-train", client, self.round,
                                             self.edge_round),
                           self.batch_size, self.start.device, self._loss)
        try:
            with torch.enable_grad():
                fn(module, batches, ctx)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: named
            raise self._error(fn, client, f"raised {type(exc).__name__}: {exc}"
                              f"{_plugin_line(exc, fn)}") from None
        now = [(n, tuple(p.shape)) for n, p in module.named_parameters()]
        if now != shapes:
            raise self._error(fn, client, f"changed the model's parameters: {_diff(shapes, now)}"
                              f" (the module's parameters are the client's upload: their "
                              "names and shapes must stay)")
        row = _row(module).to(self.start.dtype)
        if not bool(torch.isfinite(row).all()):
            bad = [n for n, p in module.named_parameters() if not bool(torch.isfinite(p).all())]
            raise self._error(fn, client, f"left non-finite values (NaN or inf) in "
                              f"{', '.join(bad)} after {batches.taken} batch(es)")
        return row, batches.taken, batches.checks

    def _input_shape(self) -> tuple[int, ...] | None:
        return getattr(self.model, "input_shape", None)

    def _loss(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The batch's mean of the model's per-sample loss (the built-in steps' weights)."""
        return self.model.sample_loss(z.unsqueeze(0), y.unsqueeze(0))[0].mean()

    def _error(self, fn: Callable, client: int, what: str) -> ScenarioError:
        code = getattr(fn, "__code__", None)
        at = f" ({code.co_filename})" if code is not None else ""
        edge = f", edge round {self.edge_round}" if self.edge_round else ""
        file, key, label = self.where
        algo = f"{label}: " if label else ""
        return ScenarioError.one(file, key, self.solver, f"{algo}the local training plugin "
                                 f"{self.solver!r}{at} {what}, at client {client}, round "
                                 f"{self.round}{edge}; the outputs of the rounds before are "
                                 "kept")


class ClientBatches:
    """One client's minibatches (x, y) for a local training plugin: plan steps 0, 1, ... up to
    its budget, the zero-weight padding of a short batch left out, x shaped as the model reads
    it; with a gamma target (`target`: gamma ||grad F_k(w^t)||), before batch i (i a positive
    multiple of `check_every`) the current parameters' full-data gradient norm is checked and
    the iteration ends where it is <= target (learn/solver.solve's rule). Single pass."""

    def __init__(self, plan: BatchPlan, k: int, budget: int, shape: tuple[int, ...] | None,
                 target: float | None, check_every: int, norm_now: Callable[[], float]):
        self.plan, self.k, self.budget, self.shape = plan, k, budget, shape
        self.target, self.check_every, self.norm_now = target, check_every, norm_now
        self.taken = 0          # batches handed out
        self.checks = 0         # gamma checks made (full-data gradients)
        self._done = False

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        i = self.taken
        if self._done or i >= self.budget:
            self._done = True
            raise StopIteration
        if self.target is not None and i > 0 and i % self.check_every == 0:
            self.checks += 1
            if self.norm_now() <= self.target:
                self._done = True
                raise StopIteration
        s = i % self.plan.rows.shape[1]
        rows, w = self.plan.rows[self.k, s], self.plan.weights[self.k, s]
        real = rows[w > 0]
        if self.plan.aug is None:
            x = model_input(gather(self.plan.x, real))
        else:       # train.local.augment: the draws of the step's row positions, as batched
            aug = self.plan.aug.select(slice(self.k, self.k + 1))
            x = aug.apply(gather(self.plan.x, rows)[None, None], np.array([i]))[0, 0]
            x = model_input(x[w > 0])
        if self.shape is not None:
            x = x.reshape(x.shape[0], *self.shape)
        self.taken = i + 1
        return x, gather(self.plan.y, real)


def _module_of(model: Any) -> nn.Module:
    """A copy of the model's torch module (a functional model: the same layers as nn.Linear
    and ReLU, whose parameters flatten to the same row)."""
    module = getattr(model, "module", None)
    if module is not None:
        return copy.deepcopy(module)
    layers: list[nn.Module] = []
    for i, layer in enumerate(model.layers):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(layer.n_in, layer.n_out, bias=layer.bias))
    return nn.Sequential(*layers)


def _row(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def _diff(before: list, after: list) -> str:
    b, a = dict(before), dict(after)
    parts = [f"{n} {b[n]} -> {a[n]}" for n in b if n in a and a[n] != b[n]]
    parts += [f"added {n} {a[n]}" for n in a if n not in b]
    parts += [f"removed {n}" for n in b if n not in a]
    return ", ".join(parts) or "their order changed"


def _plugin_line(exc: BaseException, fn: Callable) -> str:
    """" (at FILE:LINE)": the last frame of the plugin's own file (else the last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    code = getattr(fn, "__code__", None)
    own = [f for f in frames if code is not None and f.filename == code.co_filename]
    last = (own or frames[-1:] or [None])[-1]
    return f" (at {last.filename}:{last.lineno})" if last is not None else ""
