"""Executors: run one aggregation round's client work, given a LocalProgram and a batch plan.

`BatchedExecutor` advances every client of the call at once (stacked parameters, masked by step
budgets). `SequentialExecutor` is the reference: one client at a time, with autograd gradients
instead of the closed forms, so the two check each other."""
from __future__ import annotations

import dataclasses
from typing import Protocol

import torch

from ..learn.batches import Batch, BatchPlan
from ..learn.solver import LocalProgram, SolveResult, solve
from ..models.functional import Model


class Executor(Protocol):
    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult: ...


class BatchedExecutor:
    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult:
        with torch.no_grad():
            return solve(program, plan, full, budgets, lr, gamma, check_every, measure)


class AutogradModel(Model):
    """The same model, with gradients from autograd (the reference path)."""

    def __init__(self, base: Model):
        self.__dict__.update(base.__dict__)

    def loss_grad(self, w, x, y, m):  # type: ignore[override]
        return self.loss_grad_autograd(w, x, y, m)

    def grad(self, w, x, y, m):  # type: ignore[override]
        return self.loss_grad_autograd(w, x, y, m)[1]


def with_model(program: LocalProgram, model: Model) -> LocalProgram:
    """Swap the model of a program (every program is a dataclass with a `model` field)."""
    return dataclasses.replace(program, model=model)  # type: ignore[type-var]


def concat_results(parts: list[SolveResult]) -> SolveResult:
    state = tuple(torch.cat([p.state[i] for p in parts]) for i in range(len(parts[0].state)))
    return SolveResult(state, *(torch.cat([getattr(p, f) for p in parts])
                                for f in ("steps", "grad_evals", "full_evals", "gamma")))


class SequentialExecutor:
    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult:
        parts = []
        c = budgets.shape[0]
        for i in range(c):
            sel = torch.tensor([i])
            prog = program.select(sel)
            prog = with_model(prog, AutogradModel(prog.model))  # type: ignore[attr-defined]
            parts.append(solve(prog, plan.select(sel), full.rows(sel), budgets[sel], lr,
                               gamma, check_every, measure))
        return concat_results(parts)


def make_executor(kind: str, **kw) -> Executor:
    if kind == "sequential":
        return SequentialExecutor()
    if kind == "ray":
        from .ray_exec import RayExecutor
        return RayExecutor(**kw)
    return BatchedExecutor()
