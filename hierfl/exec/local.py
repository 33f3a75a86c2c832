"""Executors: run one aggregation round's client work, given a LocalProgram and a batch plan.

`BatchedExecutor` advances every client of the call at once (stacked parameters; a client
leaves the batch when its step budget runs out or its gamma target is met).
`SequentialExecutor` is the reference: one client at a time, in a plain step loop, with
autograd gradients instead of the closed forms, so the two check each other."""
from __future__ import annotations

import dataclasses
from typing import Protocol

import torch

from ..learn.batches import Batch, BatchPlan
from ..learn.solver import LocalProgram, SolveResult, lr_at, solve
from ..models.functional import Model
from ..models.threads import one_thread
from .device import OnDevice


class Executor(Protocol):
    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult: ...


def loop_chunk(model, c: int) -> int | None:
    """Clients per solver call for a model on the per-client loop path (TorchModel `batching`
    "loop": its clients are computed one by one anyway), or None: one call. Such clients are
    solved one per call: each then runs all its steps in one `client_steps` call (its row
    loaded into the module once, copied out once), where a lock-step call over several clients
    re-loaded and copied out every client each time one of them left (clients of unequal
    budgets) and kept (C, P) copies of the state (`leave`, `restrict`). Earlier, one call of 20
    x 1.7 M parameters (136 MB per (C, P) tensor) made every step's tensors fresh mmaps whose
    pages fault in zeroed (W6 at 0.62x a per-client loop). A client's iterates do not depend on
    which clients share its call on this path: the result is the same bytes."""
    if getattr(model, "batching", None) != "loop":
        return None
    return 1 if c > 1 else None


class BatchedExecutor:
    """Every client of the call at once, on `device` (exec/device.py: the data, the model and
    the round's program live there; the result comes back to the CPU; cpu moves nothing)."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.on = OnDevice(device)

    @property
    def device(self) -> torch.device:
        return self.on.device

    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult:
        on = self.on
        with torch.no_grad():
            if not on.moves:
                k = loop_chunk(program.model, budgets.shape[0])  # type: ignore[attr-defined]
                if k is None:
                    return solve(program, plan, full, budgets, lr, gamma, check_every, measure)
                return concat_results([
                    solve(program.select(idx), plan.select(idx), full.rows(idx), budgets[idx],
                          lr, gamma, check_every, measure)
                    for idx in torch.arange(budgets.shape[0]).split(k)])
            res = solve(on.program(program), on.plan(plan), on.batch(full), budgets, lr, gamma,
                        check_every, measure)
            return on.back(res)


def with_model(program: LocalProgram, model: Model) -> LocalProgram:
    """Swap the model of a program (every program is a dataclass with a `model` field)."""
    return dataclasses.replace(program, model=model)  # type: ignore[type-var]


def concat_results(parts: list[SolveResult]) -> SolveResult:
    state = tuple(torch.cat([p.state[i] for p in parts]) for i in range(len(parts[0].state)))
    return SolveResult(state, *(torch.cat([getattr(p, f) for p in parts])
                                for f in ("steps", "grad_evals", "full_evals", "gamma")))


@one_thread()    # the plain reference, on one thread: the numbers of --threads 1 (models/threads)
def solve_alone(program: LocalProgram, plan: BatchPlan, full: Batch, budget: int, lr: float,
                gamma: float | None, check_every: int, measure: bool = True) -> SolveResult:
    """The solver's contract for one client, written as plainly as possible (the reference
    the batched solver is tested against): `budget` steps on plan.at(0), plan.at(1), ...;
    with a gamma target, a check every `check_every` steps before the last one, stopping at
    the first check where ||grad h|| <= gamma ||grad h(start)||."""
    own = getattr(program, "solve", None)         # a program run per client (a plugin's)
    if own is not None:
        return own(plan, full, torch.tensor([budget]), lr, gamma, check_every, measure)
    s = program.init()
    prepare = getattr(program, "prepare", None)
    if prepare is not None:
        s = prepare(s, full)
    g0 = program.grad_h(s, full) if measure or gamma is not None else None
    steps, checks = budget, 0
    for i in range(budget):
        s = program.step(s, plan.at(i), lr_at(lr, i))
        done = i + 1
        if gamma is not None and g0 is not None and done % check_every == 0 and done < budget:
            checks += 1
            if float(program.grad_h(s, full).norm()) <= gamma * float(g0.norm()):
                steps = done
                break
    if g0 is not None:
        ach = program.grad_h(s, full).norm(dim=1) / g0.norm(dim=1).clamp_min(1e-30)
    else:
        ach = torch.full((1,), float("nan"))
    steps_t = torch.tensor([steps], dtype=torch.long)
    full_evals = torch.tensor([checks + (1 if prepare is not None or
                                         (gamma is not None and budget > 0) else 0)])
    return SolveResult(s, steps_t, steps_t * program.grad_evals_per_step, full_evals, ach)


class SequentialExecutor:
    """One client at a time, autograd gradients, the plain loop of `solve_alone`."""

    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult:
        c = budgets.shape[0]
        if c == 0:
            return solve(program, plan, full, budgets, lr, gamma, check_every, measure)
        parts = []
        for i in range(c):
            sel = torch.tensor([i])
            prog = program.select(sel)
            prog = with_model(prog, prog.model.reference())  # type: ignore[attr-defined]
            with torch.no_grad():
                parts.append(solve_alone(prog, plan.select(sel), full.rows(sel),
                                         int(budgets[i]), lr, gamma, check_every, measure))
        return concat_results(parts)
