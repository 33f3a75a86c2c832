"""FedSplit (Pathak & Wainwright, *FedSplit: an algorithmic framework for fast federated
optimization*, NeurIPS 2020, arXiv 2005.05238), Algorithm 1: Peaceman-Rachford splitting of
min_x sum_k f_k(x) (unweighted; f_k = F_k, the client's mean loss).

Client k holds z_k; in round t, from the broadcast x_t:

    z_k^{t+1/2} = prox_{s f_k}(2 x_t - z_k^t)         (local prox step)
    z_k^{t+1}   = z_k^t + 2 (z_k^{t+1/2} - x_t)        (local centring)
    x_{t+1}     = (1/N) sum_k z_k^{t+1}                 (global average)

prox_{s f_k}(v) = argmin_w f_k(w) + ||w - v||^2 / (2 s) is solved inexactly by the local steps
from w = v (`TermsProgram(terms=[Prox(1/s, v)])`, the paper's inexact variant). The client sends
dz_k = z_k^{t+1} - z_k^t; the server keeps x = (1/N) sum_k z_k exactly by x += (1/N) sum_S dz_k
(z_k^0 = x_0 for all k), so with every client in every round it is the paper's rule, and under
partial participation the clients not sampled keep their z_k. A fixed point has
z_k = x - s grad f_k(x) and mean z_k = x: sum_k grad f_k(x) = 0, the exact minimiser.

Flat only: edges relay (no edge rule). State: client z_k (N, P). Messages: x_t down, dz_k up
(one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import positive, spec
from ..registry import StateSize, declare_algorithm


@declare_algorithm("fedsplit", code=f"{__name__}.algorithm:FedSplit",
                   summary="FedSplit (Pathak & Wainwright, NeurIPS 2020)",
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class FedSplitParams:
    step_size: float = spec(1.0, "s of the local prox_{s f_k} (its term is (1/(2s)) ||w - v||^2)",
                            check=positive)
