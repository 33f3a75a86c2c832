"""pFedMac-SH: sparse, hierarchical pFedMac on client -> edge -> cloud with a two-level lambda
(seminar slides on pFedMac, after R. Li et al. 2021, arXiv 2107.05330).

Objective (slides, N edges, J clients under edge i):
    min_x sum_i F_i(x),
    F_i(x)      = min_{x_i} { (1/J) sum_j F_ij(x_i) - lambda2 <x_i, x> } + (lambda2/2) ||x||^2,
    F_ij(x_i)   = min_{theta} { f_ij(theta) - lambda1 <theta, x_i> + gamma1 phi(theta) }
                  + (lambda1/2) ||x_i||^2,
phi = ||.||_1 (`sparsity: {kind: l1}`, proximal gradient) or its smoothing
phi_rho(z) = rho sum_n log cosh(z_n / rho) (`kind: logcosh`). As in flat pFedMac,
grad F_ij(y) = lambda1 (y - theta_ij(y)) with theta_ij(y) the inner argmin.

The three loops, as implemented (the engine runs them on the simulated hierarchy):
- Cloud, t = 0..T-1: every edge i runs EdgeUpdate(i, x^t) (all of them receive x^t and work);
  S = `edges_per_round` of them, drawn with seeding.rng(seed, "edge-sample", t) (the same
  draw in every run of a scenario), upload x_i (`reporting`); the cloud waits for those only:
      x^{t+1} = (1 - beta) x^t + beta * mean_{i in S} x_i          (`cloud_update`).
- EdgeUpdate(i, x^t): x_i = y_i = x^t (`edge_start`); R = `edge_rounds` times: send y_i to the
  clients (`edge_model`), each runs ClientUpdate(j, y_i) -> y_ij; then (`edge_aggregate`)
      y_i = mean_j y_ij,   x_i <- x_i - eta2 lambda2 (x_i - y_i).        Upload x_i.
  `client_start: own`: from the second edge round on, a client that trained earlier in this
  cloud round runs ClientUpdate(j, y_ij) from its own last y_ij instead (the slides'
  y_ij^{t,r+1} <- ClientUpdate(j, y_ij^{t,r}) read literally; the same as `edge` for R = 1).
- ClientUpdate(j, y): K local steps (train.local.steps or epochs), each on one minibatch D:
      theta~ <- `inner_steps` (proximal) gradient steps of size `inner_lr`, warm-started (from y at
                the first step), on f_ij(theta; D) - lambda1 <theta, y> + gamma1 phi(theta);
      y      <- y - eta1 lambda (y - theta~),
  i.e. learn.envelope.EnvelopeProgram with coupling Linear(-lambda1 y) and the sparsity term.
  eta1 is the round's local learning rate (train.local.lr, or the entry's `local: {lr: }`,
  with lr_decay). lambda = lambda1 (`client_lambda: lambda1`, the default: grad F_ij(y) =
  lambda1 (y - theta)); the slides write lambda2 in that step (`client_lambda: lambda2`).
  The personal model of client j is its last theta~.

Means: `weighting: uniform` (the slides' 1/J and 1/S) or `samples` (n-weighted at both levels).
An aggregator above other aggregators (deeper topologies) applies the edge rule to its
children's uploads x_c: y = mean_c x_c, x <- x - eta2 lambda2 (x - y).

What a client uploads (`upload`), with a = eta1 lambda and K the steps it did:
    y_K = (1 - a)^K y_0 + z,   z = sum_{k<K} a (1 - a)^{K-1-k} theta~_k,
because each step is y_{k+1} = (1 - a) y_k + a theta~_k. The edge sent y_0 itself, so
- `y`: y_K (dense in general);
- `theta`: the last theta~ (the sparse personal model) and K (a 4-byte header); the edge uses
  y^_ij = (1 - a)^K y_0 + (1 - (1 - a)^K) theta~_{K-1}, exact when K = 1 (y_1 = y_0 - a (y_0 -
  theta~_0)) and an approximation for K > 1 (it takes every theta~_k equal to the last one);
- `increment`: z and K; exact for every K, and z is zero wherever all theta~_k were zero (its
  support is the union of theirs), so it is about as sparse as theta~.
`encoding` says how the ledger counts client uploads (sim/messages.py): dense 4 B/entry, sparse
8 B/nonzero, bitmap ceil(P/8) B + 4 B/nonzero, auto = min(dense, sparse), best = the smallest of
the three; clients.csv records the bytes and the encoding of every client upload.

Reduction: R = 1, one edge, S = 1, eta2 lambda2 = c: x_i = x^t + c (mean_j y_ij - x^t), so
x^{t+1} = x^t + beta c (mean_j y_ij - x^t): flat pFedMac with lam = lambda1, beta_flat = beta c
and the same weighting (tests/test_pfedmac_sh.py).

Boundedness: with l1, the inner problem is bounded below when gamma1 >= lambda1 ||y||_inf (the
l1 term then dominates the linear one, for any f bounded below); without it, cross-entropy's inner
problem is unbounded and theta~ grows with `inner_steps` (run.py reports divergence).

State: global x; per client the personal model theta (N, P) (x^0 until the client first trains);
per edge during a cloud round (x_i, y_i). Messages: x cloud->edge, y_i edge->client every edge
round, the client upload above every edge round, x_i edge->cloud once per cloud round, sampled
edges only.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ...config.fields import all_of, at_most, positive, spec
from ..pfedmac import SparsityParams
from ..registry import ENVELOPE, EdgeRounds, StateSize, declare_algorithm


def _edges_per_round(v: object) -> str | None:
    return None if v == "all" or (isinstance(v, int) and v > 0) else "must be > 0 or all"


@declare_algorithm("pfedmac_sh", code=f"{__name__}.algorithm:PFedMacSH",
                   summary="pFedMac-SH: sparse (pFedMac-S) and hierarchical, two-level λ",
                   caps=replace(ENVELOPE, hierarchical=True, async_edges=True),
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class PFedMacSHParams(EdgeRounds):
    lambda1: float = spec(1.0, "client level: weight of -lambda1 <theta, y> in the inner problem",
                          check=positive)
    lambda2: float = spec(1.0, "edge level: x_i <- x_i - eta2 lambda2 (x_i - mean_j y_ij)",
                          check=positive)
    eta2: float = spec(1.0, "edge step size eta2 (eta1 is the local lr, train.local.lr)",
                       check=positive)
    beta: float = spec(1.0, "cloud mixing: x <- (1 - beta) x + beta mean_S(x_i)",
                       check=all_of(positive, at_most(10.0)))
    inner_steps: int = spec(5, "(proximal) gradient steps on the inner problem per local step",
                            check=all_of(positive, at_most(1e5)))
    inner_lr: float = spec(0.01, "step size of the inner steps", check=positive)
    sparsity: SparsityParams = spec(default_factory=SparsityParams,
                                    doc="gamma1 phi_rho(theta): sparsity of the personal models")
    edges_per_round: int | Literal["all"] = spec(
        "all", "S: edges whose x_i the cloud averages (all edges still work)",
        check=_edges_per_round)
    client_lambda: Literal["lambda1", "lambda2"] = spec(
        "lambda1", "lambda of the client step y <- y - eta1 lambda (y - theta): lambda1 (the "
        "derivation) or lambda2 (as the slides write it)")
    upload: Literal["y", "theta", "increment"] = spec(
        "y", "client upload: y_ij; theta: the sparse personal model + K (exact for K = 1); "
        "increment: z = y_ij - (1 - a)^K y + K (exact, as sparse as theta)")
    encoding: Literal["dense", "sparse", "bitmap", "auto", "best"] = spec(
        "auto", "client uploads: dense 4 B/entry, sparse 8 B/nonzero, bitmap P/8 + 4 B/nonzero, "
        "auto = min(dense, sparse), best = min of the three")
    weighting: Literal["uniform", "samples"] = spec(
        "uniform", "edge and cloud means: uniform (the slides' 1/J, 1/S) or n-weighted")
    client_start: Literal["edge", "own"] = spec(
        "edge", "where ClientUpdate starts in edge rounds r >= 2 of a cloud round: edge (the "
        "edge's y_i, every round) or own (the client's own last y_ij of this cloud round)")

    def __post_init__(self) -> None:
        if self.client_start == "own" and self.upload != "y":
            raise ValueError("client_start: own needs upload: y (the edge rebuilds theta and "
                             "increment uploads from the y_i it sent)")
