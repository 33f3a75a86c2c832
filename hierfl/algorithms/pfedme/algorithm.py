"""pFedMe: personalised FL with Moreau envelopes: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

import numpy as np
import torch

from ...learn.envelope import EnvelopeProgram
from ...learn.terms import Prox
from .._personal import EnvelopeAlgorithm
from ..base import RoundCtx, State, stack_start
from . import PFedMeParams


class PFedMe(EnvelopeAlgorithm):
    name = "pfedme"
    p: PFedMeParams

    def trainees(self, selected: np.ndarray) -> np.ndarray:
        if self.p.train_all_clients:
            return np.arange(self.setup.n_clients)
        return selected

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        x0 = stack_start(start, len(clients))
        extra = (Prox(self.p.hidden_l2, torch.zeros_like(state.w)),) if self.p.hidden_l2 else ()
        return EnvelopeProgram(self.setup.model, x0, x0.clone(), self.p.lam, "prox",
                               self.p.personal_steps, self.p.personal_lr, extra)

