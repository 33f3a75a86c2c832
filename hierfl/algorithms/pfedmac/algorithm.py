"""pFedMac: personalised FL by maximising correlation: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

import torch

from ...learn.envelope import EnvelopeProgram
from ...learn.terms import L1, LogCosh, Term
from .._personal import EnvelopeAlgorithm
from ..base import RoundCtx, State, stack_start
from . import SparsityParams, PFedMacParams


def sparsity_terms(s: SparsityParams) -> tuple[Term, ...]:
    if s.kind == "none" or s.gamma == 0.0:
        return ()
    if s.kind == "l1":
        return (L1(s.gamma),)
    return (LogCosh(s.gamma, s.rho),)


class PFedMac(EnvelopeAlgorithm):
    name = "pfedmac"
    p: PFedMacParams

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.p.encoding

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        x0 = stack_start(start, len(clients))
        return EnvelopeProgram(self.setup.model, x0, x0.clone(), self.p.lam, "linear",
                               self.p.inner_steps, self.p.inner_lr,
                               sparsity_terms(self.p.sparsity))

