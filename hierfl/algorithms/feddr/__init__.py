"""FedDR (Tran-Dinh, Pham, Phan, Nguyen, *FedDR -- Randomized Douglas-Rachford Splitting
Algorithms for Nonconvex Federated Composite Optimization*, NeurIPS 2021, arXiv 2103.03452),
Algorithm 1 with g = 0: min_x (1/n) sum_i f_i(x) (unweighted; f_i = F_i, the client's mean loss).

Client i holds y_i, x_i and x^_i = 2 x_i - y_i. In round k the sampled clients S_k receive x-bar
and update

    y_i <- y_i + alpha (x-bar - x_i)
    x_i <- prox_{eta f_i}(y_i)
    x^_i <- 2 x_i - y_i,          and send  dx^_i = x^_i(new) - x^_i(old);

the others keep theirs (the paper's partial participation). Server (g = 0, so x-bar = x~):
x-bar <- x-bar + (1/n) sum_{i in S_k} dx^_i, which keeps x-bar = (1/n) sum_i x^_i.

prox_{eta f_i}(y) = argmin_w f_i(w) + ||w - y||^2 / (2 eta) is solved inexactly by the local steps
from w = y (`TermsProgram(terms=[Prox(1/eta, y)])`), as the paper's inexact variant allows.
The paper initialises x_i^0 = prox_{eta f_i}(x^0), a local computation before the first round;
here x_i = y_i = x^_i = x^0 at the start, so a client's first round is that computation
(y_i stays x^0 when x-bar = x^0). A fixed point has x_i = x-bar, y_i = x-bar + eta grad f_i(x-bar)
and mean x^_i = x-bar: sum_i grad f_i(x-bar) = 0, the exact minimiser.

Flat only: edges relay (no edge rule). State: client y_i, x_i (N, P). Messages: x-bar down,
dx^_i up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config.fields import positive, spec
from ..registry import StateSize, declare_algorithm


def below_two(v: Any) -> str | None:
    return None if 0 < v < 2 else "must be in (0, 2)"


@declare_algorithm("feddr", code=f"{__name__}.algorithm:FedDR",
                   summary="FedDR (Tran-Dinh et al., NeurIPS 2021)",
                   state=StateSize(fixed=1, per_client=2))
@dataclass(frozen=True)
class FedDRParams:
    alpha: float = spec(1.0, "relaxation alpha of the y update, in (0, 2)", check=below_two)
    eta: float = spec(1.0, "prox parameter eta of prox_{eta f_i} (term (1/(2 eta)) ||w - y||^2)",
                      check=positive)
