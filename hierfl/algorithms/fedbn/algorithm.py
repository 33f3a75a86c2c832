"""FedBN: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.solver import SolveResult, TermsProgram
from ..base import Algorithm, RoundCtx, State, Upload, stack_start


@dataclass(frozen=True)
class ClientState:
    bn: torch.Tensor            # (N, P_BN) each client's BatchNorm entries of the model


def bn_index(model) -> torch.Tensor:
    """The positions of the BatchNorm layers' parameters in a model row (none for a model
    without them, or a stacked closed-form model)."""
    mask = getattr(model, "norm_mask", None)
    if mask is None:
        return torch.zeros(0, dtype=torch.long)
    return mask().nonzero().view(-1)


class FedBN(Algorithm):
    name = "fedbn"

    def __init__(self, params, setup):
        super().__init__(params, setup)
        self.bn = bn_index(setup.model)

    def init_state(self, w0: torch.Tensor) -> State:
        own = w0[self.bn].expand(self.setup.n_clients, -1).clone()
        return State(w0.clone(), clients=ClientState(own))

    def _with_own(self, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Rows (C, P) of w with each client's own BatchNorm entries (in place)."""
        if self.bn.numel():
            w[:, self.bn] = rows
        return w

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        rows = stack_start(start, len(clients))
        return TermsProgram(self.setup.model,
                            self._with_own(rows, state.clients.bn.index_select(0, clients)))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        w = res.state[0]
        table = state.clients.bn
        if self.bn.numel():
            table.index_copy_(0, clients, w[:, self.bn])        # the donated table
        return replace(state, clients=ClientState(table)), Upload((w,))

    def personal(self, state: State) -> torch.Tensor | None:
        rows = state.w.expand(self.setup.n_clients, -1).clone()
        return self._with_own(rows, state.clients.bn)
