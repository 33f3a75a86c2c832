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

import numpy as np
import torch

from .. import seeding
from ..learn.envelope import EnvelopeProgram
from ..learn.solver import SolveResult
from ..learn.solver import State as Steps
from ._personal import PersonalAlgorithm, keep_personal, mix, uniform_weights
from .base import RoundCtx, State, Upload, set_rows, stack_start, weighted_mean
from .pfedmac import sparsity_terms
from .params import PFedMacSHParams


@dataclass(frozen=True)
class IncrementProgram(EnvelopeProgram):
    """The envelope program that also accumulates z_{k+1} = (1 - a) z_k + a theta~_k (a = eta1
    lambda), so y_K = (1 - a)^K y_0 + z_K exactly and z has the zeros the theta~_k share."""

    def init(self) -> Steps:
        x, theta = super().init()
        return (x, theta, torch.zeros_like(x))

    def step(self, s: Steps, batch, lr: float) -> Steps:
        x, theta, z = s
        x, theta = super().step((x, theta), batch, lr)
        a = lr * (self.lam if self.outer_lam is None else self.outer_lam)
        return (x, theta, (1.0 - a) * z + a * theta)


@dataclass(frozen=True)
class OwnClients:
    """client_start: own. Per client its personal model, its last y_ij (N, P) and the cloud
    round that y_ij belongs to (N,; -1: none yet)."""

    personal: torch.Tensor
    y: torch.Tensor
    round: torch.Tensor


@dataclass(frozen=True)
class EdgeState:
    """An edge during one cloud round: its x_i and the y_i it sends to its clients."""

    x: torch.Tensor
    y: torch.Tensor


class PFedMacSH(PersonalAlgorithm):
    name = "pfedmac_sh"
    Params = PFedMacSHParams
    caps = replace(PersonalAlgorithm.caps, hierarchical=True, async_edges=True)
    p: PFedMacSHParams

    @property
    def upload_as_is(self) -> tuple[int, ...]:
        """compress: theta / increment payloads are coded as they are (sparse already)."""
        return () if self.p.upload == "y" else (0,)

    # ------------------------------------------------------------------ state
    @property
    def client_lam(self) -> float:
        return self.p.lambda1 if self.p.client_lambda == "lambda1" else self.p.lambda2

    def _mean(self, rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        w = uniform_weights(len(rows)) if self.p.weighting == "uniform" else weights / weights.sum()
        return weighted_mean(rows, w)

    def init_state(self, w0: torch.Tensor) -> State:
        state = super().init_state(w0)
        if self.p.client_start == "edge":
            return state
        n = self.setup.n_clients
        return replace(state, clients=OwnClients(state.clients.personal,
                                                 w0.expand(n, -1).clone(),
                                                 torch.full((n,), -1.0, dtype=torch.float64)))

    # ------------------------------------------------------------------ client
    def start_rows(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                   ctx: RoundCtx) -> torch.Tensor:
        """(C, P) starts of ClientUpdate: the edge's y_i; with client_start: own, from the
        second edge round of a cloud round on, a client that trained earlier in this cloud
        round continues from its own last y_ij (the slides' y_ij^{t,r+1} <- ClientUpdate(j,
        y_ij^{t,r}) read literally)."""
        y0 = stack_start(start, len(clients))
        if self.p.client_start == "edge" or ctx.edge_round == 0:
            return y0
        own = (state.clients.round[clients] == float(ctx.round)).unsqueeze(1)
        return torch.where(own, state.clients.y[clients].to(y0.dtype), y0)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        y0 = self.start_rows(state, clients, start, ctx)
        cls = IncrementProgram if self.p.upload == "increment" else EnvelopeProgram
        return cls(self.setup.model, y0, y0.clone(), self.p.lambda1, "linear", self.p.inner_steps,
                   self.p.inner_lr, sparsity_terms(self.p.sparsity), outer_lam=self.client_lam)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        y, theta = res.state[0], res.state[1]
        if self.p.client_start == "own":
            return self._keep_own(state, clients, y, theta, res.steps > 0, ctx), \
                Upload((y,), encoding=self.p.encoding)
        state = keep_personal(state, clients, theta, res.steps > 0)
        if self.p.upload == "y":
            return state, Upload((y,), encoding=self.p.encoding)
        k = res.steps.to(y.dtype).unsqueeze(1)              # the 4-byte header: steps done
        payload = theta if self.p.upload == "theta" else res.state[2]
        return state, Upload((payload, k), encoding=self.p.encoding, header=1)

    @staticmethod
    def _keep_own(state: State, clients: torch.Tensor, y: torch.Tensor, theta: torch.Tensor,
                  trained: torch.Tensor, ctx: RoundCtx) -> State:
        c, k = state.clients, clients[trained]
        return replace(state, clients=OwnClients(
            set_rows(c.personal, k, theta[trained]), set_rows(c.y, k, y[trained]),
            set_rows(c.round, k, torch.full((len(k),), float(ctx.round), dtype=torch.float64))))

    def client_models(self, y0: torch.Tensor, up: Upload, lr: float) -> torch.Tensor:
        """The edge's y_ij from what the clients sent and the y_0 it sent them."""
        if self.p.upload == "y":
            return up.tensors[0]
        payload, k = up.tensors[0].double(), up.tensors[1].double()
        keep = (1.0 - lr * self.client_lam) ** k                        # (C, 1): (1 - a)^K
        if self.p.upload == "theta":
            rows = keep * y0.double() + (1.0 - keep) * payload
        else:
            rows = keep * y0.double() + payload
        return rows.to(y0.dtype)

    # ------------------------------------------------------------------ edge
    def edge_start(self, w: torch.Tensor) -> EdgeState:
        return EdgeState(w.clone(), w.clone())

    def edge_model(self, es: EdgeState) -> torch.Tensor:
        return es.y

    def edge_aggregate(self, es: EdgeState, clients: torch.Tensor | None, up: Upload,
                       weights: torch.Tensor, ctx: RoundCtx) -> EdgeState:
        if weights.numel() == 0:
            return es
        rows = up.tensors[0] if clients is None else self.client_models(es.y, up, ctx.lr)
        y = self._mean(rows, weights)
        step = self.p.eta2 * self.p.lambda2
        x = (es.x.double() - step * (es.x.double() - y.double())).to(es.x.dtype)
        return EdgeState(x, y)

    def edge_upload(self, es: EdgeState) -> tuple[torch.Tensor, ...]:
        return (es.x,)

    # ------------------------------------------------------------------ cloud
    def reporting(self, t: int, children: list[str]) -> list[str]:
        s = self.p.edges_per_round
        if s == "all" or int(s) >= len(children):
            return children
        pick = seeding.rng(self.setup.seed, "edge-sample", t).choice(len(children), int(s),
                                                                     replace=False)
        return [children[i] for i in np.sort(pick)]

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        if not uploads:
            return state
        mean = self._mean(torch.stack([u[0] for u in uploads]), weights)
        return replace(state, w=mix(state.w, mean, self.p.beta))
