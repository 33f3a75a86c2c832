"""ProxSkip / Scaffnew (K. Mishchenko, G. Malinovsky, S. Stich, P. Richtarik, ICML 2022,
arXiv 2202.09357), Algorithm 1 with psi the consensus indicator (Scaffnew).

Problem: min_x (1/n) sum_k f_k(x). Every client k keeps a control variate h_k (sum_k h_k = 0
from h_k = 0) and, at every step,

    xhat_k <- x_k - gamma (grad f_k(x_k) - h_k)             (gamma = train.local.lr)

then one coin theta ~ Bernoulli(p), drawn once per step for all clients, says whether to
communicate. On heads:
    xbar   = (1/n) sum_k (xhat_k - (gamma/p) h_k)           (the prox of psi: the average)
    h_k   <- h_k + (p/gamma) (xbar - xhat_k)                 (xhat_k: the iterate before the shift)
    x_k   <- xbar;
on tails x_k <- xhat_k. Only the heads cost a message, so here one round is one communication:
its local steps are the draws until the first head (geometric, mean 1/p, seeded from the
scenario seed and the round, the same for every client of the round; `round_steps`), and the
engine charges exactly those steps. train.local.steps / epochs are not used.

Messages: xbar down (one model); u_k = xhat_k - (gamma/p) h_k up (one model). The new h_k needs
only u_k and xbar: h_k + (p/gamma)(xbar - xhat_k) = (p/gamma)(xbar - u_k), so the client
computes it when xbar arrives; the simulation writes it when the server averages (the same
numbers, no extra bytes).

Partial participation (not in the paper, which has every client every step): the mean is over
the clients whose upload arrived, and only they update h_k; the others keep theirs. The mean is
unweighted, as in the paper (the minimiser of the unweighted sum of the f_k).

State: the global xbar (w); per client h_k (N, P), from 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import each, spec
from ..registry import Capabilities, StateSize, declare_algorithm


def _probability(v: float) -> str | None:
    return None if 1e-6 <= v <= 1 else "must be in [1e-6, 1]"


@declare_algorithm("proxskip", code=f"{__name__}.algorithm:ProxSkip",
                   summary=("ProxSkip / Scaffnew (Mishchenko et al., ICML 2022): one round = one "
                            "communication, local steps drawn by its coin"),
                   caps=Capabilities(supports_gamma=False),
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class ProxSkipParams:
    p: float = spec(0.2, "probability of communicating after each local step (the mean local "
                    "steps of a round is 1/p)", check=_probability)
