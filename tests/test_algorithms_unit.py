"""Every registered algorithm, without the engine, on a one-parameter least-squares problem
worked by hand from the papers' update equations (one table entry per algorithm).

The problem. Two clients, one parameter w, one sample each (x = 1, weight 1), targets
a = (1, 3), sample counts n = (1, 3):

    f_k(w) = (w - a_k)^2,      grad f_k(w) = 2 (w - a_k).

Every round both clients take K = 2 local steps with eta = 0.1 from w0 = 0 (float64). Plain GD
is then w <- w - 0.2 (w - a) = 0.8 w + 0.2 a: 0 -> 0.2 a -> 0.36 a, i.e. (0.36, 1.08), and the
n-weighted mean is (0.36 + 3 * 1.08) / 4 = 0.9. A (mu/2) (w - 0)^2 prox with mu = 1 makes the
step 0.7 w + 0.2 a: 0.2 a -> 0.34 a = (0.34, 1.02), mean (0.34 + 3.06) / 4 = 0.85.

The test drives each algorithm through the engine's calls (`init`, `program`, the local steps
taken here one by one, `finish`, `aggregate` or the edge / cloud calls), which apply the
algorithm's pure transitions, and compares the whole State (`state_tensors`) and the last upload
with the numbers derived in each entry's comment."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from hierfl.algorithms.base import (Algorithm, Capabilities, RoundCtx, Setup, State, Upload,
                                    stack_start)
from hierfl.algorithms.registry import REGISTRY
from hierfl.config.schema import LocalSpec
from hierfl.learn.batches import Batch
from hierfl.learn.solver import SolveResult, TermsProgram
from hierfl.models.functional import Layer, Model

DT = torch.float64
ETA, K = 0.1, 2
MODEL = Model([Layer(1, 1, False)], "regression", "linear")      # z = w x, P = 1
COUNTS = torch.tensor([1.0, 3.0], dtype=DT)
BATCH = Batch(torch.ones(2, 1, 1, dtype=DT), torch.tensor([[1.0], [3.0]], dtype=DT),
              torch.ones(2, 1, dtype=DT))
CLIENTS = torch.tensor([0, 1])
# fedyogi's first server step and second pseudo-gradient (see its entry)
_X1 = 0.45 / (0.271 ** 0.5 + 0.2)
_D2 = 0.9 - 0.36 * _X1
IFCA_T2, IFCA_U = -0.4615682363510132, 0.9096773862838745     # float32 draws, exact in float64


@dataclass
class Case:
    params: dict
    rounds: int
    state: dict[str, list[float]]                 # state_tensors() after the last round
    upload: list[list[float]]                     # the last round's upload, one list per tensor
    extra: dict = field(default_factory=dict)     # personal models, ...


CASES: dict[str, Case] = {
    # K GD steps each, n-weighted mean (above): w_k = (0.36, 1.08), w = 0.9.
    "fedavg": Case({}, 1, {"w": [0.9]}, [[0.36, 1.08]]),
    # h_k = f_k + (mu/2)(w - w^t)^2, mu = 1, w^t = 0: (0.34, 1.02), w = 0.85.
    "fedprox": Case({"mu": 1.0}, 1, {"w": [0.85]}, [[0.34, 1.02]]),
    # one edge: the edge's n-weighted mean of the GD models is 0.9; the cloud's mean of its
    # single edge (weight 4) keeps it: FedAvg's 0.9.
    "hierfavg": Case({"edge_rounds": 1}, 1, {"w": [0.9]}, [[0.36, 1.08]]),
    # option II, eta_g = 1. Round 1 (c = c_k = 0) is GD: dy = (0.36, 1.08);
    #   c_k+ = c_k - c + (x - y)/(K eta) = -dy / 0.2 = (-1.8, -5.4); x = mean dy = 0.72;
    #   c = 0 + sum dc / N = -7.2 / 2 = -3.6.
    # Round 2, correction c - c_k = (-1.8, 1.8): y <- 0.8 y + 0.2 a - 0.1 (c - c_k) from 0.72:
    #   client 0: 0.956, 1.1448 (dy 0.4248); client 1: 0.996, 1.2168 (dy 0.4968);
    #   c_k+ = c_k - c - dy / 0.2 = (-1.8 + 3.6 - 2.124, -5.4 + 3.6 - 2.484) = (-0.324, -4.284),
    #   dc = (1.476, 1.116); x = 0.72 + (0.4248 + 0.4968)/2 = 1.1808; c = -3.6 + 2.592/2 = -2.304.
    "scaffold": Case({"option": 2}, 2,
                     {"w": [1.1808], "server.c": [-2.304], "clients.c": [[-0.324], [-4.284]]},
                     [[0.4248, 0.4968], [1.476, 1.116]]),
    # alpha = 1 (paper). Round 1: g_k = 0, terms = FedProx's: theta = (0.34, 1.02);
    #   g_k <- g_k - alpha (theta - w^t) = (-0.34, -1.02); h = 0 - (alpha/m) sum(theta - w^t)
    #   = -0.68; w = mean theta - h/alpha = 0.68 + 0.68 = 1.36.
    # Round 2: theta <- theta - 0.1 (2 (theta - a) - g_k + (theta - w)) = 0.7 theta + 0.2 a
    #   + 0.1 g_k + 0.1 w from 1.36: client 0 (+0.302): 1.254, 1.1798; client 1 (+0.634):
    #   1.586, 1.7442. g_k = (-0.34 + 0.1802, -1.02 - 0.3842) = (-0.1598, -1.4042);
    #   h = -0.68 - (-0.1802 + 0.3842)/2 = -0.782; w = (1.1798 + 1.7442)/2 + 0.782 = 2.244.
    "feddyn": Case({"alpha": 1.0}, 2,
                   {"w": [2.244], "server.h": [-0.782], "clients.g": [[-0.1598], [-1.4042]]},
                   [[1.1798, 1.7442]]),
    # alpha = 1, paper rules. Round 1: h_i = g_i = g = 0: theta = FedProx's (0.34, 1.02);
    #   h_i = g_i = theta - w = (0.34, 1.02), dg = (0.34, 1.02); uploads theta + h = (0.68, 2.04);
    #   g = 0.25 * 0.34 + 0.75 * 1.02 = 0.85; w = (0.68 + 3 * 2.04)/4 = 1.7.
    # Round 2: theta <- theta - 0.1 (2 (theta - a) + (theta - (w - h_i)) + (g_i - g)/(eta K))
    #   = 0.7 theta + 0.2 a + 0.1 (w - h_i) - 0.5 (g_i - g) from 1.7:
    #   client 0 (+0.591): 1.781, 1.8377; client 1 (+0.583): 1.773, 1.8241.
    #   steps (0.1377, 0.1241) = new g_i; h_i = (0.4777, 1.1441); dg = (-0.2023, -0.8959);
    #   uploads theta + h_i = (2.3154, 2.9682); g = 0.85 - 0.25*0.2023 - 0.75*0.8959 = 0.1275;
    #   w = (2.3154 + 3 * 2.9682)/4 = 2.805.
    "feddc": Case({"alpha": 1.0}, 2,
                  {"w": [2.805], "server.g": [0.1275], "server.hsum": [0.0],
                   "clients.h": [[0.4777], [1.1441]], "clients.g": [[0.1377], [0.1241]]},
                  [[2.3154, 2.9682], [-0.2023, -0.8959]]),
    # lam = 1, one inner step of 0.1 per local step, beta = 1, n-weighted:
    #   theta <- theta - 0.1 (2 (theta - a) + lam (theta - x)) = 0.7 theta + 0.2 a + 0.1 x,
    #   x <- x - eta lam (x - theta) = 0.9 x + 0.1 theta.
    #   client 0: theta 0.2, x 0.02; theta 0.14 + 0.2 + 0.002 = 0.342, x 0.018 + 0.0342 = 0.0522
    #   client 1: theta 0.6, x 0.06; theta 1.026, x 0.1566;  w = (0.0522 + 3 * 0.1566)/4 = 0.1305.
    "pfedme": Case({"lam": 1.0, "personal_steps": 1, "personal_lr": 0.1}, 1,
                   {"w": [0.1305], "clients.personal": [[0.342], [1.026]]},
                   [[0.0522, 0.1566]]),
    # lam = 1, one inner step of 0.1, beta = 1, n-weighted:
    #   theta <- theta - 0.1 (2 (theta - a) - lam x) = 0.8 theta + 0.2 a + 0.1 x,
    #   x <- 0.9 x + 0.1 theta.
    #   client 0: theta 0.2, x 0.02; theta 0.16 + 0.2 + 0.002 = 0.362, x 0.0542
    #   client 1: theta 0.6, x 0.06; theta 1.086, x 0.1626;  w = (0.0542 + 3 * 0.1626)/4 = 0.1355.
    "pfedmac": Case({"lam": 1.0, "inner_steps": 1, "inner_lr": 0.1}, 1,
                    {"w": [0.1355], "clients.personal": [[0.362], [1.086]]},
                    [[0.0542, 0.1626]]),
    # One edge, R = 1, the clients' work is pFedMac's (lambda1 = 1): y_ij = (0.0542, 0.1626).
    # upload: increment z <- (1 - a) z + a theta with a = eta lambda1 = 0.1: z = 0.09 * 0.2 +
    #   0.1 * 0.362 = 0.0542 (client 0), 0.09 * 0.6 + 0.1 * 1.086 = 0.1626 (client 1), and the
    #   header K = 2; the edge rebuilds y_ij = 0.9^K y_0 + z = z (y_0 = 0).
    # edge (uniform): y = (0.0542 + 0.1626)/2 = 0.1084; x = x - eta2 lambda2 (x - y) = 0.5 * 0.1084
    #   = 0.0542; cloud (one edge, beta = 1): w = 0.0542.
    "pfedmac_sh": Case({"lambda1": 1.0, "lambda2": 1.0, "eta2": 0.5, "inner_steps": 1,
                        "inner_lr": 0.1, "upload": "increment"}, 1,
                       {"w": [0.0542], "clients.personal": [[0.362], [1.086]]},
                       [[0.0542, 0.1626], [2.0, 2.0]]),
    # alpha0 = 0.25, adaptive with alpha_lr 0.1; per step vbar = alpha v + (1 - alpha) w,
    #   w' = 0.8 w + 0.2 a, v' = v - 0.1 alpha 2 (vbar - a),
    #   alpha' = clip(alpha - 0.1 (v - w) 2 (vbar - a)).
    #   step 1 (w = v = 0): w 0.2 a, v 0.05 a, alpha 0.25.
    #   step 2: vbar = 0.0125 a + 0.15 a = 0.1625 a, 2 (vbar - a) = -1.675 a; w 0.36 a;
    #   v = 0.05 a + 0.041875 a = 0.091875 a; alpha = 0.25 - 0.1 (-0.15 a)(-1.675 a)
    #   = 0.25 - 0.025125 a^2 = (0.224875, 0.023875). Global: FedAvg's 0.9.
    "apfl": Case({"alpha": 0.25, "adaptive": True, "alpha_lr": 0.1}, 1,
                 {"w": [0.9], "clients.v": [[0.091875], [0.275625]],
                  "clients.w_local": [[0.36], [1.08]], "clients.alpha": [0.224875, 0.023875]},
                 [[0.36, 1.08]],
                 # personal model alpha v + (1 - alpha) w_local
                 {"personal": [[0.224875 * 0.091875 + 0.775125 * 0.36],
                               [0.023875 * 0.275625 + 0.976125 * 1.08]]}),
    # lam = 1, personal_lr 0.1: v takes FedProx's steps around w^t = 0: (0.34, 1.02); the
    #   global copy takes GD's: FedAvg's 0.9.
    "ditto": Case({"lam": 1.0, "personal_lr": 0.1}, 1,
                  {"w": [0.9], "clients.personal": [[0.34], [1.02]]}, [[0.36, 1.08]]),
    # FedOpt (one edge, one edge round: the edge's mean is FedAvg's). Two GD steps from x give
    #   0.64 x + 0.36 a, n-weighted mean 0.64 x + 0.9: Delta = 0.9 - 0.36 x; m = 0.5 m + 0.5 Delta.
    # fedadam, beta2 = 0.5, v0 = 0.17, tau = 0.2, eta = 1. Round 1: Delta = 0.9, m = 0.45,
    #   v = 0.085 + 0.405 = 0.49, x = 0.45 / (0.7 + 0.2) = 0.5. Round 2: uploads 0.32 + 0.36 a
    #   = (0.68, 1.4), Delta = 0.72, m = 0.225 + 0.36 = 0.585, v = 0.245 + 0.5 * 0.5184 = 0.5042.
    "fedadam": Case({"server_lr": 1.0, "beta1": 0.5, "beta2": 0.5, "tau": 0.2, "v0": 0.17}, 2,
                    {"w": [0.5 + 0.585 / (0.5042 ** 0.5 + 0.2)], "server.m": [0.585],
                     "server.v": [0.5042]}, [[0.68, 1.4]]),
    # fedyogi, beta2 = 0.1, v0 = 1, tau = 0.2. Round 1: v - Delta^2 = 0.19 > 0: v = 1 - 0.9 *
    #   0.81 = 0.271, x1 = 0.45 / (sqrt(0.271) + 0.2). Round 2: Delta = 0.9 - 0.36 x1, Delta^2 >
    #   0.271 (0.456): v = 0.271 + 0.9 Delta^2 (the other sign), m = 0.225 + 0.5 Delta.
    "fedyogi": Case({"server_lr": 1.0, "beta1": 0.5, "beta2": 0.1, "tau": 0.2, "v0": 1.0}, 2,
                    {"w": [_X1 + (0.225 + 0.5 * _D2) / ((0.271 + 0.9 * _D2 ** 2) ** 0.5 + 0.2)],
                     "server.m": [0.225 + 0.5 * _D2], "server.v": [0.271 + 0.9 * _D2 ** 2]},
                    [[0.64 * _X1 + 0.36, 0.64 * _X1 + 1.08]]),
    # fedadagrad, v0 = 0.19, tau = 0.2. Round 1: v = 0.19 + 0.81 = 1, x = 0.45 / 1.2 = 0.375.
    #   Round 2: uploads 0.24 + 0.36 a = (0.6, 1.32), Delta = 0.9 - 0.135 = 0.765,
    #   m = 0.225 + 0.3825 = 0.6075, v = 1 + 0.585225.
    "fedadagrad": Case({"server_lr": 1.0, "beta1": 0.5, "tau": 0.2, "v0": 0.19}, 2,
                       {"w": [0.375 + 0.6075 / (1.585225 ** 0.5 + 0.2)], "server.m": [0.6075],
                        "server.v": [1.585225]}, [[0.6, 1.32]]),
    # fedavgm, beta = 0.5, eta = 0.5 (one edge, one edge round: the mean is FedAvg's).
    #   Round 1: mean 0.9, Delta = 0 - 0.9, v = -0.9, w = 0 + 0.45 = 0.45. Round 2: uploads
    #   0.64 * 0.45 + 0.36 a = (0.648, 1.368), mean 1.188, Delta = 0.45 - 1.188 = -0.738,
    #   v = -0.45 - 0.738 = -1.188, w = 0.45 + 0.594 = 1.044.
    "fedavgm": Case({"server_lr": 0.5, "server_momentum": 0.5}, 2,
                    {"w": [1.044], "server.v": [-1.188]}, [[0.648, 1.368]]),
    # fedbn: the one-parameter model has no BatchNorm layer (an empty table of them): FedAvg's
    #   steps and mean; each client's personal model is the global one.
    "fedbn": Case({}, 1, {"w": [0.9], "clients.bn": []}, [[0.36, 1.08]],
                  {"personal": [[0.9], [0.9]]}),
    # fednova, plain SGD, tau = (2, 2): ||a_i||_1 = 2, d_i = (0 - w_i)/2, tau_eff = 2:
    #   w = -2 (0.25 (-0.18) + 0.75 (-0.54)) = 0.9 (FedAvg's); upload w_i and ||a_i||_1.
    "fednova": Case({}, 1, {"w": [0.9]}, [[0.36, 1.08], [2.0, 2.0]]),
    # moon: a one-layer model's representation is x (no parameter): l_con is constant, the
    #   steps are GD's (0.36, 1.08), w = 0.9 and the previous models are the clients' w_i.
    "moon": Case({"mu": 1.0}, 1, {"w": [0.9], "clients.prev": [[0.36], [1.08]]},
                 [[0.36, 1.08]]),
    # step_size s = 1: prox steps w <- w - 0.1 (2 (w - a) + (w - v)) = 0.7 w + 0.2 a + 0.1 v from
    #   v = 2 x - z_k. Round 1 (x = z = 0): z_half = FedProx's (0.34, 1.02), z = 2 z_half =
    #   (0.68, 2.04) = dz, x = 1.36. Round 2: v = (2.04, 0.68): client 0: 1.832, 1.6864;
    #   client 1: 1.144, 1.4688; z = z + 2 (z_half - 1.36) = (1.3328, 2.2576),
    #   dz = (0.6528, 0.2176), x = 1.36 + 0.4352 = 1.7952 (= mean z).
    "fedsplit": Case({"step_size": 1.0}, 2,
                     {"w": [1.7952], "clients.z": [[1.3328], [2.2576]]}, [[0.6528, 0.2176]]),
    # alpha = 0.5, eta = 1 (same prox steps around y). Round 1: y = 0 + 0.5 (0 - 0) = 0,
    #   x = (0.34, 1.02), x^ = 2 x - y = (0.68, 2.04) = dx^, x-bar = 1.36. Round 2:
    #   y = 0.5 (1.36 - x) = (0.51, 0.17); x: client 0: 0.608, 0.6766; client 1: 0.736, 1.1322;
    #   x^ = (0.8432, 2.0944), dx^ = (0.1632, 0.0544), x-bar = 1.36 + 0.2176 / 2 = 1.4688.
    "feddr": Case({"alpha": 0.5, "eta": 1.0}, 2,
                  {"w": [1.4688], "clients.y": [[0.51], [0.17]],
                   "clients.x": [[0.6766], [1.1322]]}, [[0.1632, 0.0544]]),
    # eta = 1, p_comm = 1. Round 1: lambda = 0, x0 = 0: x = FedProx's (0.34, 1.02);
    #   lambda = x - x0 = (0.34, 1.02); x0+ = x + lambda = (0.68, 2.04) = upload; x0 = 1.36.
    # Round 2 from x0 = 1.36: w <- 0.7 w + 0.2 a - 0.1 lambda + 0.136: client 0: 1.254, 1.1798;
    #   client 1: 1.586, 1.7442; lambda = (0.34 - 0.1802, 1.02 + 0.3842) = (0.1598, 1.4042);
    #   x0+ = (1.3396, 3.1484), upload x0+ - 1.36 = (-0.0204, 1.7884); x0 = 1.36 + 0.884.
    "fedpd": Case({"eta": 1.0, "p_comm": 1.0}, 2,
                  {"w": [2.244], "server.comm": [2.0], "clients.lam": [[0.1598], [1.4042]],
                   "clients.x0": [[1.3396], [3.1484]], "clients.last": [2.0, 2.0]},
                  [[-0.0204, 1.7884]]),
    # p = 0.5, gamma = eta = 0.1 (the table's K = 2 steps, not the coin's). Round 1 (h = 0) is
    #   GD: xhat = (0.36, 1.08) = u; xbar = 0.72; h_k = (p/gamma)(xbar - u_k) = 5 (0.36, -0.36).
    # Round 2, x <- 0.8 x + 0.2 a + 0.1 h_k from 0.72: client 0: 0.956, 1.1448; client 1: 0.996,
    #   1.2168; u = xhat - (gamma/p) h = xhat - 0.2 h = (0.7848, 1.5768); xbar = 1.1808;
    #   h = 5 (1.1808 - u) = (1.98, -1.98).
    "proxskip": Case({"p": 0.5}, 2, {"w": [1.1808], "clients.h": [[1.98], [-1.98]]},
                     [[0.7848, 1.5768]]),
    # k = 3: theta = (0, t2, t3), t2 and t3 drawn from (seed 0, "ifca-init", j): t2 = -0.46157..,
    #   t3 = U = 0.90968..; losses (w - a)^2: client 0 (a = 1): 1, 2.13, 0.008 and client 1 (a = 3):
    #   9, 11.99, 4.37: both choose cluster 3 (index 2), then GD from U: 0.64 U + 0.36 a; the
    #   n-weighted mean 0.64 U + 0.9 replaces theta_3, the largest cluster: w = theta_3.
    "ifca": Case({"clusters": 3}, 1,
                 {"w": [0.64 * IFCA_U + 0.9], "server.models": [0.0, IFCA_T2, 0.64 * IFCA_U + 0.9],
                  "server.rounds": [1.0], "clients.cluster": [2.0, 2.0]},
                 [[0.64 * IFCA_U + 0.36, 0.64 * IFCA_U + 1.08], [2.0, 2.0]],
                 {"personal": [[0.64 * IFCA_U + 0.9], [0.64 * IFCA_U + 0.9]]}),
}


def make(name: str, params: dict) -> Algorithm:
    cls = REGISTRY[name]
    setup = Setup(MODEL, 2, COUNTS, LocalSpec(steps=K, lr=ETA), seed=0)
    algo = cls(cls.Params(**params), setup)
    algo.init(torch.zeros(1, dtype=DT))
    return algo


def local_work(program, k: int = K) -> SolveResult:
    """k local steps of every client on its one sample, without the solver."""
    s = program.init()
    if program.prepare is not None:
        s = program.prepare(s, BATCH)
    for _ in range(k):
        s = program.step(s, BATCH, ETA)
    steps = torch.full((2,), k)
    return SolveResult(s, steps, steps, torch.zeros(2, dtype=torch.long),
                       torch.full((2,), float("nan")))


def server_tensors(state: State) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in state.tensors().items() if not k.startswith("clients.")}


def one_round(algo: Algorithm, t: int) -> Upload:
    ctx = RoundCtx(t, 0, ETA, torch.full((2,), K))
    if algo.hierarchical:
        es = algo.edge_start(algo.global_model())
        start = algo.edge_model(es)
    else:
        start = algo.global_model()
    res = local_work(algo.program(CLIENTS, start, ctx))
    up = algo.finish(CLIENTS, start, res, ctx)
    before = algo.state
    kept = server_tensors(before)
    if algo.hierarchical:
        es = algo.edge_aggregate(es, CLIENTS, up, COUNTS, ctx)
        algo.cloud_aggregate(["e0"], [algo.edge_upload(es)], COUNTS.sum().reshape(1), ctx)
    else:
        algo.aggregate(CLIENTS, up, ctx)
    # the server's transitions are pure: the State they were given is left as it was
    for k, v in server_tensors(before).items():
        assert torch.equal(v, kept[k]), k
    return up


def test_the_table_covers_the_registry():
    assert sorted(CASES) == sorted(REGISTRY)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_parameter_rounds_by_hand(name):
    case = CASES[name]
    algo = make(name, case.params)
    for t in range(1, case.rounds + 1):
        up = one_round(algo, t)
    got = algo.state_tensors()
    assert sorted(got) == sorted(case.state), name
    for key, want in case.state.items():
        torch.testing.assert_close(got[key].reshape(-1),
                                   torch.tensor(want, dtype=DT).reshape(-1),
                                   rtol=0, atol=1e-12, msg=f"{name} {key}")
    assert len(up.tensors) == len(case.upload)
    for got_t, want in zip(up.tensors, case.upload):
        torch.testing.assert_close(got_t.reshape(-1), torch.tensor(want, dtype=DT),
                                   rtol=0, atol=1e-12, msg=name)
    if "personal" in case.extra:
        torch.testing.assert_close(algo.personal_models(),
                                   torch.tensor(case.extra["personal"], dtype=DT),
                                   rtol=0, atol=1e-12)
    elif algo.personalised:
        torch.testing.assert_close(algo.personal_models(), got["clients.personal"])
    else:
        assert algo.personal_models() is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_uploads_match_the_declared_count(name):
    """caps.upload_tensors (the planner's byte estimate) is what finish sends: the body of every
    upload has that many (C, P) tensors (the driver checks it on every round)."""
    algo = make(name, CASES[name].params)
    up = one_round(algo, 1)
    body = up.tensors[:len(up.tensors) - up.header]
    assert len(body) == algo.upload_tensors == algo.caps.upload_tensors
    assert all(tuple(t.shape) == (2, 1) for t in body)


@pytest.mark.parametrize("name", sorted(CASES))
def test_checkpoint_is_the_state(name):
    """state_tensors / load_state_tensors round-trip the State exactly, and a fresh algorithm
    loaded from them continues as the original does."""
    case = CASES[name]
    a = make(name, case.params)
    one_round(a, 1)
    b = make(name, case.params)
    b.load_state_tensors({k: v.clone() for k, v in a.state_tensors().items()})
    one_round(a, 2)
    one_round(b, 2)
    for k, v in a.state_tensors().items():
        assert torch.equal(v, b.state_tensors()[k]), (name, k)


def test_a_wrong_upload_count_is_caught():
    """An algorithm that sends two model-sized tensors but declares one fails loudly."""

    class Liar(Algorithm):
        caps = Capabilities(upload_tensors=1)

        def local(self, state, clients, start, ctx):
            return TermsProgram(self.setup.model, stack_start(start, len(clients)))

        def client_update(self, state, clients, start, res, ctx):
            return state, Upload((res.state[0], res.state[0]))

    algo = Liar(None, Setup(MODEL, 2, COUNTS, LocalSpec(steps=K, lr=ETA), seed=0))
    algo.init(torch.zeros(1, dtype=DT))
    ctx = RoundCtx(1, 0, ETA, torch.full((2,), K))
    res = local_work(algo.program(CLIENTS, algo.global_model(), ctx))
    with pytest.raises(RuntimeError, match="upload"):
        algo.finish(CLIENTS, algo.global_model(), res, ctx)


def test_flags_come_from_caps():
    for name, cls in REGISTRY.items():
        for f in ("hierarchical", "linear_aggregate", "drops_stragglers", "supports_gamma",
                  "personalised", "upload_tensors"):
            assert getattr(cls, f) == getattr(cls.caps, f), (name, f)
    assert REGISTRY["hierfavg"].drops_stragglers and REGISTRY["hierfavg"].hierarchical
    assert REGISTRY["pfedmac_sh"].personalised and REGISTRY["pfedmac_sh"].hierarchical


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_doomed_client_keeps_its_rows_of_every_client_table(name):
    """finish(..., doomed): client 0 crashes before it finishes (the engine's draw, made
    before training): every client table keeps its row; client 1's rows are those of a
    round without the mark."""
    def round_of(doomed):
        algo = make(name, CASES[name].params)
        ctx = RoundCtx(1, 0, ETA, torch.full((2,), K))
        start = algo.edge_model(algo.edge_start(algo.global_model())) if algo.hierarchical \
            else algo.global_model()
        before = {k: v.clone() for k, v in algo.state.tensors().items()}
        res = local_work(algo.program(CLIENTS, start, ctx))
        algo.finish(CLIENTS, start, res, ctx, doomed)
        return before, {k: v for k, v in algo.state.tensors().items()
                        if k.startswith("clients.")}
    before, marked = round_of(np.array([True, False]))
    _, plain = round_of(None)
    for k, table in marked.items():
        torch.testing.assert_close(table[0], before[k][0], rtol=0, atol=0, msg=k)
        torch.testing.assert_close(table[1], plain[k][1], rtol=0, atol=0, msg=k)
