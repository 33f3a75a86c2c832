"""The local solver: advance C clients in lock-step under step budgets, optionally stopping each
client as soon as it is gamma-inexact: ||grad h_k(w)|| <= gamma ||grad h_k(w^t)|| (FedProx).

A `LocalProgram` says what one step does (vectorised over clients); the solver owns the loop,
the budgets, the masks and the gamma checks, so every algorithm shares it."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Callable, ClassVar, Protocol

import torch

from ..models.functional import Model
from ..models.threads import one_thread
from ..models.torch_model import Run
from .batches import Batch, BatchPlan, step_seeds
from .dpsgd import DPSGD
from .optim import Clip, Optimizer
from .terms import Term, affine_sum, select_rows

State = tuple[torch.Tensor, ...]
LR = "float | Callable[[int], float]"     # one lr, or the lr of each step (schedules.StepLR)


def lr_at(lr, i: int) -> float:
    """The lr of step i (from 0) of a round: `lr` itself, or lr(i) for a per-step schedule."""
    return lr(i) if callable(lr) else lr


class LocalProgram(Protocol):
    """What a client does at one local step, for C clients at once. `ProgramBase` gives the
    defaults of everything but `init` and `step`."""

    grad_evals_per_step: int   # minibatch gradient evaluations per step (for compute cost)
    # state that needs the full local data at the start point (SCAFFOLD option I's
    # grad F_k(w^t)), charged as one full-data gradient; None for most programs
    prepare: Callable[[State, Batch], State] | None

    def init(self) -> State: ...

    def step(self, s: State, batch: Batch, lr: float) -> State: ...

    def run_steps(self, s: State, span: Batch, lr: float) -> State | None:
        """Several steps at once (span: x (C, T, B, d), ...), or None: one `step` at a time."""
        ...

    def grad_h(self, s: State, full: Batch) -> torch.Tensor | None:
        """Gradient of the local objective h_k at the current iterate, on full local data."""
        ...

    def select(self, sel: torch.Tensor) -> "LocalProgram":
        """The same program restricted to some clients (sequential executor)."""
        ...


class ProgramBase:
    """Defaults of the LocalProgram protocol for dataclass programs: no `prepare`, no fused
    steps, no local objective (no gamma stops), and `select` keeping the selected rows of every
    per-client tensor field (2-D) and of every term in a tuple field."""

    prepare: ClassVar[Callable[[State, Batch], State] | None] = None

    def run_steps(self, s: State, span: Batch, lr: float) -> State | None:
        return None

    def grad_h(self, s: State, full: Batch) -> torch.Tensor | None:
        return None

    def select(self, sel: torch.Tensor):
        kw = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                kw[f.name] = select_rows(v, sel)
            elif isinstance(v, tuple) and v and all(isinstance(t, Term) for t in v):
                kw[f.name] = tuple(t.select(sel) for t in v)
        return replace(self, **kw)  # type: ignore[type-var]


@dataclass(frozen=True)
class TermsProgram(ProgramBase):
    """SGD (or proximal SGD) on h_k(w) = F_k(w) + sum of terms, from `start` (C, P).

    `optimizer` (learn/optim.py; None: plain SGD) turns the gradient of the smooth part of h_k
    (clipped where `clip` says, then by `grad_clip`: train.local.clip) into the step; its
    state follows w in the State, (w, *opt), from zero at `init` or from `opt0` (the clients'
    kept state, train.local.optimizer.state: keep); the proximal terms are applied after it,
    with lr.

    A stateful model (models/torch_model.py: BatchNorm statistics, dropout) also carries, last
    in the State, each client's statistics (C, Q), from `buffers0`, and its step counter
    (C, 1): step n of client k draws its masks from `step_seeds(keys[k], n)`.

    `dp` (learn/dpsgd.py): DP-SGD, the gradient of F_k from clipped per-sample gradients and
    Gaussian noise, the other smooth terms added as they are; the State then ends with the
    step counter (C, 1) that keys the noise (not with a stateful model: refused)."""

    model: Model
    start: torch.Tensor
    terms: tuple[Term, ...] = ()
    clip: float | None = None
    grad_evals_per_step: int = 1
    optimizer: Optimizer | None = None
    grad_clip: Clip | None = None
    opt0: tuple[torch.Tensor, ...] | None = None
    keys: torch.Tensor | None = None          # (C, 1) int64: the clients' dropout streams
    buffers0: torch.Tensor | None = None      # (C, Q): the clients' starting statistics
    dp: DPSGD | None = None                   # per-sample clipping and noise (DP-SGD)

    def __post_init__(self) -> None:
        if self.dp is not None and self.keys is not None:
            raise ValueError("DP-SGD needs per-sample gradients, which a stateful model "
                             "(BatchNorm, dropout) does not have (learn/dpsgd.refusal)")

    @cached_property
    def _smooth(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.smooth)

    @cached_property
    def _proxes(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.smooth)

    def _grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor:
        g = self.model.grad(w, b.x, b.y, b.m)
        for t in self._smooth:
            g = g + t.grad(w)
        return g

    def init(self) -> State:
        w = self.start.clone()
        opt: State = ()
        if self.optimizer is not None:
            opt = tuple(t.clone() for t in self.opt0) if self.opt0 is not None else \
                self.optimizer.init(w)
        count = torch.zeros(w.shape[0], 1, dtype=torch.long, device=w.device)
        if self.keys is None:
            return (w, *opt) if self.dp is None else (w, *opt, count)
        return (w, *opt, self.buffers0.clone(), count)

    def select(self, sel: torch.Tensor) -> "TermsProgram":
        out = super().select(sel)
        if self.dp is not None:
            out = replace(out, dp=self.dp.select(sel))
        if self.opt0 is None:
            return out
        return replace(out, opt0=tuple(select_rows(t, sel) for t in self.opt0))

    def parts(self, s: State) -> tuple[torch.Tensor, State, State]:
        """(w, optimizer state, model state) of a State of this program."""
        n = 2 if self.keys is not None else 1 if self.dp is not None else 0
        return s[0], s[1:len(s) - n], s[len(s) - n:]

    def _grad_run(self, w: torch.Tensor, b: Batch, ms: State) -> tuple[torch.Tensor, State]:
        """The gradient of a step, and the model state after it (a stateful model's
        statistics and step counter; DP-SGD's step counter)."""
        if self.dp is not None:
            (count,) = ms
            g = self.dp.grad(self.model, w, b, count)
            for t in self._smooth:
                g = g + t.grad(w)
            return g, (count + 1,)
        if not ms:
            return self._grad(w, b), ms
        buffers, count = ms
        run = Run(buffers, step_seeds(self.keys, count))
        _, g, buffers = self.model.loss_grad_run(w, b.x, b.y, b.m, run)
        for t in self._smooth:
            g = g + t.grad(w)
        return g, (buffers, count + 1)

    def step(self, s: State, batch: Batch, lr: float) -> State:
        w, opt, ms = self.parts(s)
        g, ms = self._grad_run(w, batch, ms)
        if self.clip is not None:
            norm = g.norm(dim=1, keepdim=True).clamp_min(1e-12)
            g = g * torch.clamp(self.clip / norm, max=1.0)
        if self.grad_clip is not None:
            g = self.grad_clip(g)
        if self.optimizer is None:
            w = w - lr * g
        else:
            w, opt = self.optimizer.update(g, opt, w, lr)
        for t in self._proxes:
            w = t.prox(w, lr)
        return (w, *opt, *ms)

    def grad_h(self, s: State, full: Batch) -> torch.Tensor:
        return self._grad(s[0], full)

    def _row_step(self, k: int) -> Callable[[torch.Tensor, torch.Tensor, float], None]:
        """Client k's `step` (no clip) as an in-place map of its (1, P) iterate w from its
        model gradient g (overwritten) and lr, with the floating-point operations of `step`."""
        sel = torch.tensor([k])
        smooth = tuple(t.select(sel) for t in self._smooth)
        proxes = tuple(t.select(sel) for t in self._proxes)

        def update(w: torch.Tensor, g: torch.Tensor, lr: float) -> None:
            for t in smooth:
                g = g + t.grad(w)
            w.sub_(g.mul_(lr))
            for t in proxes:
                w.copy_(t.prox(w, lr))
        return update

    def _opt_row_step(self, opt: State):
        """Client k's `step` with the optimizer, in place on its (1, P) iterate and on its rows
        of `opt` (the program's own copies): the per-client loop's fused steps."""
        def factory(k: int) -> Callable[[torch.Tensor, torch.Tensor, float], None]:
            sel = torch.tensor([k])
            smooth = tuple(t.select(sel) for t in self._smooth)
            proxes = tuple(t.select(sel) for t in self._proxes)
            rows = tuple(t[k:k + 1] for t in opt)

            def update(w: torch.Tensor, g: torch.Tensor, lr: float) -> None:
                for t in smooth:
                    g = g + t.grad(w)
                if self.grad_clip is not None:
                    g = self.grad_clip(g)
                self.optimizer.step_(g, rows, w, lr)
                for t in proxes:
                    w.copy_(t.prox(w, lr))
            return update
        return factory

    def run_steps(self, s: State, span: Batch, lr: float) -> State | None:
        """Several steps at once, span = x (C, T, B, d), y (C, T, B), m (C, T, B): the model's
        fused SGD (`Model.sgd_steps`) when the step is plain SGD on F_k plus terms that are all
        affine (`Term.affine`); on a per-client loop model (`client_steps`) any optimizer,
        stepped in place; None otherwise, and the solver takes the steps one by one.
        A subclass that changes `step` must override this too."""
        if self.dp is not None:
            return None
        if self.optimizer is not None and self.clip is None and self.keys is None:
            own = getattr(self.model, "client_steps", None)
            if own is None or getattr(self.model, "batching", None) != "loop":
                return None
            opt = tuple(t.clone() for t in s[1:])
            w = own(s[0], span.x, span.y, span.m, lr, self._opt_row_step(opt))
            return None if w is None else (w, *opt)
        if len(s) != 1 or self.clip is not None or self.optimizer is not None or \
                self.grad_clip is not None:
            return None
        own = getattr(self.model, "client_steps", None)
        if own is not None:           # a torch.nn model's per-client steps (models/torch_model)
            w = own(s[0], span.x, span.y, span.m, lr, self._row_step if self.terms else None)
            if w is not None:
                return (w,)
        parts = affine_sum(self.terms)
        if parts is None:
            return None
        w = self.model.sgd_steps(s[0], span.x, span.y, span.m, lr, *parts)
        return None if w is None else (w,)


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
    (`run_steps`; one lr for every step), else one `step` per minibatch."""
    i = start
    for span in _spans(plan, start, stop):
        new = None if callable(lr) else program.run_steps(s, span, lr)
        if new is not None:
            s = new
            i += span.x.shape[1]
            continue
        for batch in map(Batch, span.x.unbind(1), span.y.unbind(1), span.m.unbind(1)):
            s = program.step(s, batch, lr_at(lr, i))
            i += 1
    return s


@dataclass
class _Lockstep:
    """The clients still running: their program, plan, full data and state (restricted to
    them), and the final state of every client, once some client has left."""

    program: LocalProgram
    plan: BatchPlan
    full: Batch
    active: list[int]
    state: State
    out: list[torch.Tensor] | None = None

    def restrict(self, root: "_Root", stay: list[int]) -> None:
        self.active = [self.active[j] for j in stay]
        if self.active:
            keep = torch.tensor(stay)
            idx = torch.tensor(self.active)
            self.state = tuple(t[keep] for t in self.state)
            self.program = root.program.select(idx)
            self.plan, self.full = root.plan.select(idx), root.full.rows(idx)

    def leave(self, root: "_Root", leaving: list[int]) -> None:
        """Clients (positions in `active`) that stop here: keep their state, drop them."""
        if self.out is None:
            self.out = [t.clone() for t in root.s0]
        gone = torch.tensor(sorted(leaving))
        rows = torch.tensor([self.active[j] for j in sorted(leaving)])
        for o, t in zip(self.out, self.state):
            o[rows] = t[gone]
        gone_set = set(leaving)
        self.restrict(root, [j for j in range(len(self.active)) if j not in gone_set])


@dataclass
class _Root:
    program: LocalProgram
    plan: BatchPlan
    full: Batch
    s0: State


def solve(program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
          lr: float, gamma: float | None = None, check_every: int = 5,
          measure: bool = True) -> SolveResult:
    """Run up to budgets[k] steps for each client k; stop client k early once gamma-inexact.

    `measure`: report the achieved gamma (a full-data gradient at the start and at the end of
    every client, not charged in simulated time) even without a gamma target; with a target
    it is always reported. Without either, `full` is not used and may hold no rows.

    A program's `prepare(state, full) -> state` (when not None) computes state that needs the
    full local data at the start point (SCAFFOLD option I's grad F_k(w^t)). It is charged as the
    one full-data gradient at w^t, the same evaluation a gamma target needs for its reference
    norm.

    Clients advance in lock-step; a client that has used its budget (or met its gamma target)
    leaves the batch: its final state is kept and the others go on with the program, plan and
    data restricted to them (`select`), so no step is spent on finished clients and no mask is
    applied per step. Minibatches are gathered a chunk of steps at a time.

    A program that runs its clients one by one itself (`solve`: a local training plugin,
    learn/plugin_program.py) is handed the same arguments and keeps the same contract."""
    own = getattr(program, "solve", None)
    if own is not None:
        return own(plan, full, budgets, lr, gamma, check_every, measure)
    s = program.init()
    if program.prepare is not None:
        with one_thread():                 # a full-data pass (models/threads.py)
            s = program.prepare(s, full)
    c = budgets.shape[0]
    g0n = _grad_norm(program, s, full) if measure or gamma is not None else None
    check = gamma is not None and g0n is not None
    budget = [int(b) for b in budgets.tolist()]
    stop_step = list(budget)
    checks = [0] * c
    root = _Root(program, plan, full, s)
    run = _Lockstep(program, plan, full, list(range(c)), s)
    if any(b <= 0 for b in budget):
        run.out = [t.clone() for t in s]
        run.restrict(root, [k for k in range(c) if budget[k] > 0])
    i = 0
    while run.active:
        end = min(budget[k] for k in run.active)
        if check:
            end = min(end, (i // check_every + 1) * check_every)
        run.state = _advance(run.program, run.state, run.plan, i, end, lr)
        i = end
        leave = [j for j, k in enumerate(run.active) if budget[k] == i]
        if check and i % check_every == 0:
            leave += _gamma_check(run, budget, i, gamma, g0n, checks, stop_step)
        if leave and run.out is None and len(leave) == len(run.active):
            break                          # every client stops here: run.state is final
        if leave:
            run.leave(root, leave)
    final: State = tuple(run.out) if run.out is not None else run.state
    steps = torch.tensor(stop_step, dtype=budgets.dtype)
    if g0n is not None:
        ach = _grad_norm(program, final, full) / g0n.clamp_min(1e-30)
    else:
        ach = torch.full((c,), float("nan"))
    evals = steps * program.grad_evals_per_step
    # the full gradient at w^t is needed only for a program's `prepare` or a gamma target
    # (whose reference is of no use to a client with no step to take: deadline_partial's 0)
    full_evals = torch.tensor(checks, dtype=torch.long) + (
        1 if program.prepare is not None else
        (budgets > 0).long() if gamma is not None else 0)
    return SolveResult(final, steps, evals, full_evals, ach)


@one_thread()      # a full-data pass: the numbers of --threads 1 (models/threads.py)
def _grad_norm(program: LocalProgram, s: State, full: Batch) -> torch.Tensor | None:
    """||grad h_k|| on each client's full local data, (C,); None where h has no gradient."""
    g = program.grad_h(s, full)
    return None if g is None else g.norm(dim=1)


def _gamma_check(run: _Lockstep, budget: list[int], i: int, gamma: float, g0n: torch.Tensor,
                 checks: list[int], stop_step: list[int]) -> list[int]:
    """The gamma test at step i of the clients that would go on: those that meet it leave
    (their positions in `run.active`)."""
    live = [j for j, k in enumerate(run.active) if budget[k] > i]
    if not live:
        return []
    gn = _grad_norm(run.program, run.state, run.full)
    g0a = g0n[torch.tensor(run.active)]
    hit = (gn <= gamma * g0a).tolist()
    out = []
    for j in live:
        checks[run.active[j]] += 1
        if hit[j]:
            stop_step[run.active[j]] = i
            out.append(j)
    return out
