"""FedNova: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import replace

import torch

from ..base import RoundCtx, State, Upload
from ..fedavg.algorithm import FedAvg


def norm_a(steps: torch.Tensor, rho: float) -> torch.Tensor:
    """||a_i||_1 for tau_i = `steps` (float64): tau_i (plain SGD) or
    sum_{j=1}^{tau_i} (1 - rho^j) / (1 - rho) = (tau_i - rho (1 - rho^tau_i) / (1 - rho))
    / (1 - rho) (momentum rho)."""
    tau = steps.double()
    if not rho:
        return tau
    return (tau - rho * (1 - rho ** tau) / (1 - rho)) / (1 - rho)


class FedNova(FedAvg):
    name = "fednova"

    @property
    def rho(self) -> float:
        return float(self.setup.local.optimizer.value("momentum"))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res, ctx: RoundCtx) -> tuple[State, Upload]:
        x = res.state[0]
        a = norm_a(res.steps, self.rho).to(x.dtype).unsqueeze(1)      # (C, 1) header
        return state, Upload((x, a), header=1)

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        x_i, a = up.tensors[0].double(), up.tensors[1].double().squeeze(1)
        keep = a > 0                               # tau_i = 0: no gradient, zero weight
        if not bool(keep.any()):
            return state
        n = self.setup.counts[clients].double() * keep
        p = n / n.sum()
        w = state.w.double()
        d = torch.where(keep.unsqueeze(1), (w - x_i) / a.clamp_min(1.0).unsqueeze(1),
                        torch.zeros_like(x_i))                          # (C, P): d_i
        tau_eff = p @ a
        return replace(state, w=(w - tau_eff * (p @ d)).to(state.w.dtype))
