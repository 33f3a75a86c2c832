"""The local solver: advance C clients in lock-step under step budgets, optionally stopping each
client as soon as it is gamma-inexact: ||grad h_k(w)|| <= gamma ||grad h_k(w^t)|| (FedProx).

A `LocalProgram` says what one step does (vectorised over clients); the solver owns the loop,
the budgets, the masks and the gamma checks, so every algorithm shares it."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Protocol

import torch

from ..models.functional import Model
from .batches import Batch, BatchPlan
from .terms import L1, Linear, Prox, Smooth, Term, split

State = tuple[torch.Tensor, ...]
GradFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
                  tuple[torch.Tensor, torch.Tensor]]


class LocalProgram(Protocol):
    """What a client does at one local step, for C clients at once."""

    grad_evals_per_step: int   # minibatch gradient evaluations per step (for compute cost)

    def init(self) -> State: ...

    def step(self, s: State, batch: Batch, lr: float) -> State: ...

    def grad_h(self, s: State, full: Batch) -> torch.Tensor | None:
        """Gradient of the local objective h_k at the current iterate, on full local data."""
        ...

    def select(self, sel: torch.Tensor) -> "LocalProgram":
        """The same program restricted to some clients (sequential executor)."""
        ...


def select_rows(t: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """Rows of a per-client tensor; a shared (P,) tensor stays as is."""
    return t[sel] if t.dim() == 2 else t


def select_term(term: Term, sel: torch.Tensor) -> Term:
    from dataclasses import fields, replace
    kw = {f.name: select_rows(getattr(term, f.name), sel) for f in fields(term)
          if isinstance(getattr(term, f.name), torch.Tensor)}
    return replace(term, **kw)


@dataclass(frozen=True)
class TermsProgram:
    """SGD (or proximal SGD) on h_k(w) = F_k(w) + sum of terms, from `start` (C, P)."""

    model: Model
    start: torch.Tensor
    terms: tuple[Term, ...] = ()
    grad_fn: GradFn | None = None
    clip: float | None = None
    grad_evals_per_step: int = 1

    @cached_property
    def _split(self) -> tuple[list[Smooth], list[L1]]:
        return split(list(self.terms))

    def _grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor:
        if self.grad_fn is not None:
            _, g = self.grad_fn(w, b.x, b.y, b.m)
        else:
            g = self.model.grad(w, b.x, b.y, b.m)
        for t in self._split[0]:
            g = g + t.grad(w)
        return g

    def init(self) -> State:
        return (self.start.clone(),)

    def step(self, s: State, batch: Batch, lr: float) -> State:
        (w,) = s
        g = self._grad(w, batch)
        if self.clip is not None:
            norm = g.norm(dim=1, keepdim=True).clamp_min(1e-12)
            g = g * torch.clamp(self.clip / norm, max=1.0)
        w = w - lr * g
        for t in self._split[1]:
            w = t.prox(w, lr)
        return (w,)

    def grad_h(self, s: State, full: Batch) -> torch.Tensor:
        return self._grad(s[0], full)

    def run_steps(self, s: State, span: Batch, lr: float) -> State | None:
        """Several steps at once, span = x (C, T, B, d), y (C, T, B), m (C, T, B): the model's
        fused SGD (`Model.sgd_steps`) when the step is plain SGD on F_k plus affine terms
        (prox, linear); None otherwise, and the solver takes the steps one by one."""
        cls = type(self)
        if (cls.step is not TermsProgram.step or cls._grad is not TermsProgram._grad
                or len(s) != 1 or self.grad_fn is not None or self.clip is not None
                or self._split[1]):
            return None
        decay: float | torch.Tensor | None = None
        shift: torch.Tensor | None = None
        for t in self.terms:
            if isinstance(t, Prox):
                decay = t.mu if decay is None else decay + t.mu
                shift = -t.mu * t.anchor if shift is None else shift - t.mu * t.anchor
            elif isinstance(t, Linear):
                shift = t.v if shift is None else shift + t.v
            else:
                return None
        w = self.model.sgd_steps(s[0], span.x, span.y, span.m, lr, decay, shift)
        return None if w is None else (w,)

    def select(self, sel: torch.Tensor) -> "TermsProgram":
        from dataclasses import replace
        return replace(self, start=self.start[sel],
                       terms=tuple(select_term(t, sel) for t in self.terms))


@dataclass(frozen=True)
class SolveResult:
    state: State
    steps: torch.Tensor           # (C,) steps actually done
    grad_evals: torch.Tensor      # (C,) minibatch-sized gradient evaluations (compute cost)
    full_evals: torch.Tensor      # (C,) full-data gradient evaluations charged (gamma checks)
    gamma: torch.Tensor           # (C,) achieved ||grad h(w_end)|| / ||grad h(w_start)|| (NaN: n/a)


CHUNK_ELEMS = 1 << 20     # minibatch input elements gathered at once (steps per gather vary)


def _spans(plan: BatchPlan, start: int, stop: int):
    """Steps start..stop-1 as spans of several steps, gathered at once."""
    rows = plan.rows
    per_step = max(rows.shape[0] * rows.shape[2] * int(plan.x[0].numel() if len(plan.x) else 1), 1)
    t = max(1, CHUNK_ELEMS // per_step)
    for a in range(start, stop, t):
        yield plan.span(a, min(a + t, stop))


def _advance(program: LocalProgram, s: State, plan: BatchPlan, start: int, stop: int,
             lr: float) -> State:
    """Steps start..stop-1 of every client of `program`: fused when the program can
    (`run_steps`), else one `step` per minibatch."""
    run = getattr(program, "run_steps", None)
    for span in _spans(plan, start, stop):
        new = run(s, span, lr) if run is not None else None
        if new is not None:
            s = new
            continue
        for batch in map(Batch, span.x.unbind(1), span.y.unbind(1), span.m.unbind(1)):
            s = program.step(s, batch, lr)
    return s


def solve(program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
          lr: float, gamma: float | None = None, check_every: int = 5,
          measure: bool = True) -> SolveResult:
    """Run up to budgets[k] steps for each client k; stop client k early once gamma-inexact.

    `measure`: report the achieved gamma (a full-data gradient at the start and at the end of
    every client, not charged in simulated time) even without a gamma target; with a target
    it is always reported. Without either, `full` is not used and may hold no rows.

    A program may define `prepare(state, full) -> state`: state that needs the full local data
    at the start point (SCAFFOLD option I's grad F_k(w^t)). It is charged as the one full-data
    gradient at w^t, the same evaluation a gamma target needs for its reference norm.

    Clients advance in lock-step; a client that has used its budget (or met its gamma target)
    leaves the batch: its final state is kept and the others go on with the program, plan and
    data restricted to them (`select`), so no step is spent on finished clients and no mask is
    applied per step. Minibatches are gathered a chunk of steps at a time."""
    s = program.init()
    prepare = getattr(program, "prepare", None)
    if prepare is not None:
        s = prepare(s, full)
    c = budgets.shape[0]
    g0 = program.grad_h(s, full) if measure or gamma is not None else None
    g0n = g0.norm(dim=1) if g0 is not None else None
    check = gamma is not None and g0n is not None
    budget = [int(b) for b in budgets.tolist()]
    stop_step = list(budget)
    checks = [0] * c
    active = [k for k in range(c) if budget[k] > 0]
    out: list[torch.Tensor] | None = None          # final states, once some client has left
    prog, pl, fl, st = program, plan, full, s
    if len(active) < c:
        out = [t.clone() for t in s]
        prog, pl, fl, st = _restrict(program, plan, full, s, active)
    i = 0
    while active:
        end = min(budget[k] for k in active)
        if check:
            end = min(end, (i // check_every + 1) * check_every)
        st = _advance(prog, st, pl, i, end, lr)
        i = end
        leave = [j for j, k in enumerate(active) if budget[k] == i]
        if check and i % check_every == 0:
            live = [j for j, k in enumerate(active) if budget[k] > i]
            if live:
                gn = prog.grad_h(st, fl).norm(dim=1)
                g0a = g0n[torch.tensor(active)]
                hit = (gn <= gamma * g0a).tolist()
                for j in live:
                    checks[active[j]] += 1
                    if hit[j]:
                        stop_step[active[j]] = i
                        leave.append(j)
        if not leave:
            continue
        if out is None:
            out = [t.clone() for t in s]
        gone = torch.tensor(sorted(leave))
        rows = torch.tensor([active[j] for j in sorted(leave)])
        for o, t in zip(out, st):
            o[rows] = t[gone]
        gone_set = set(leave)
        stay = [j for j in range(len(active)) if j not in gone_set]
        active = [active[j] for j in stay]
        if active:
            keep = torch.tensor(stay)
            st = tuple(t[keep] for t in st)
            prog, pl, fl = (program.select(torch.tensor(active)), plan.select(torch.tensor(active)),
                            full.rows(torch.tensor(active)))
    final: State = tuple(out) if out is not None else st
    steps = torch.tensor(stop_step, dtype=budgets.dtype)
    if g0n is not None:
        g_end = program.grad_h(final, full).norm(dim=1)
        ach = g_end / g0n.clamp_min(1e-30)
    else:
        ach = torch.full((c,), float("nan"))
    evals = steps * program.grad_evals_per_step
    # the full gradient at w^t is needed only for a gamma target or a program's `prepare`
    full_evals = torch.tensor(checks, dtype=torch.long) + \
        (1 if gamma is not None or prepare is not None else 0)
    return SolveResult(final, steps, evals, full_evals, ach)


def _restrict(program: LocalProgram, plan: BatchPlan, full: Batch, s: State, active: list[int]):
    idx = torch.tensor(active, dtype=torch.long)
    return program.select(idx), plan.select(idx), full.rows(idx), tuple(t[idx] for t in s)
