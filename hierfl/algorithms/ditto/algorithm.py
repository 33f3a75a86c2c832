"""Ditto: fair and robust federated learning through personalisation: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...learn.batches import Batch
from ...learn.solver import ProgramBase, SolveResult, TermsProgram
from ...learn.solver import State as Steps
from ...learn.terms import Prox
from ...models.functional import Model
from .._personal import PersonalAlgorithm, PersonalState
from ..base import RoundCtx, State, Upload, set_rows, stack_start
from . import DittoParams


@dataclass(frozen=True)
class DittoProgram(ProgramBase):
    """State (w, v): the global copy and the personal model of C clients."""

    model: Model
    start: torch.Tensor          # (C, P) w^t, also the anchor of the personal prox term
    v0: torch.Tensor             # (C, P)
    lam: float
    personal_lr: float | None
    grad_evals_per_step: int = 2

    def init(self) -> Steps:
        return (self.start.clone(), self.v0.clone())

    def step(self, s: Steps, batch: Batch, lr: float) -> Steps:
        w, v = s
        plr = self.personal_lr if self.personal_lr is not None else lr
        personal = TermsProgram(self.model, v, (Prox(self.lam, self.start),))
        (v,) = personal.step((v,), batch, plr)
        (w,) = TermsProgram(self.model, w, ()).step((w,), batch, lr)
        return (w, v)


class Ditto(PersonalAlgorithm):
    name = "ditto"
    p: DittoParams

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> DittoProgram:
        return DittoProgram(self.setup.model, stack_start(start, len(clients)),
                            state.clients.personal[clients].clone(), self.p.lam,
                            self.p.personal_lr)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        w, v = res.state
        personal = PersonalState(set_rows(state.clients.personal, clients, v))
        return State(state.w, state.server, personal), Upload((w,))
