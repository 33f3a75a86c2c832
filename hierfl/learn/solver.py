"""The local solver: advance C clients in lock-step under step budgets, optionally stopping each
client as soon as it is gamma-inexact: ||grad h_k(w)|| <= gamma ||grad h_k(w^t)|| (FedProx).

A `LocalProgram` says what one step does (vectorised over clients); the solver owns the loop,
the budgets, the masks and the gamma checks, so every algorithm shares it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from ..models.functional import Model
from .batches import Batch, BatchPlan
from .terms import L1, Smooth, Term, split

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

    def _grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor:
        fn = self.grad_fn or self.model.loss_grad
        _, g = fn(w, b.x, b.y, b.m)
        smooth, _ = split(list(self.terms))
        for t in smooth:
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
        for t in split(list(self.terms))[1]:
            w = t.prox(w, lr)
        return (w,)

    def grad_h(self, s: State, full: Batch) -> torch.Tensor:
        return self._grad(s[0], full)

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


def solve(program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
          lr: float, gamma: float | None = None, check_every: int = 5) -> SolveResult:
    """Run up to budgets[k] steps for each client k; stop client k early once gamma-inexact."""
    s = program.init()
    c = budgets.shape[0]
    max_steps = int(budgets.max()) if c else 0
    g0 = program.grad_h(s, full)
    g0n = g0.norm(dim=1) if g0 is not None else None
    stopped = torch.zeros(c, dtype=torch.bool)
    stop_step = budgets.clone()
    checks = torch.zeros(c, dtype=torch.long)
    uniform = bool((budgets == max_steps).all())
    for i in range(max_steps):
        new = program.step(s, plan.at(i), lr)
        if uniform and not stopped.any():
            s = new
        else:
            active = ((i < budgets) & ~stopped).unsqueeze(1)
            s = tuple(torch.where(active, a, b) for a, b in zip(new, s))
        if gamma is not None and g0n is not None and (i + 1) % check_every == 0:
            live = (i + 1 <= budgets) & ~stopped & ((i + 1) < budgets)
            if live.any():
                checks += live.long()
                gn = program.grad_h(s, full).norm(dim=1)
                hit = live & (gn <= gamma * g0n)
                stop_step = torch.where(hit, torch.full_like(stop_step, i + 1), stop_step)
                stopped |= hit
                if bool(stopped.all()):
                    break
    steps = torch.minimum(stop_step, budgets)
    if g0n is not None:
        g_end = program.grad_h(s, full).norm(dim=1)
        ach = g_end / g0n.clamp_min(1e-30)
    else:
        ach = torch.full((c,), float("nan"))
    evals = steps * program.grad_evals_per_step
    full_evals = checks + (1 if gamma is not None else 0)   # g0 is needed only for a gamma target
    return SolveResult(s, steps, evals, full_evals, ach)
