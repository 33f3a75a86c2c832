"""FedProx, SCAFFOLD, FedDyn and FedDC checked against numbers computed here, independently of
the code: closed forms on heterogeneous quadratics (npz data + the `linear` model without bias,
full-batch GD, all clients every round), a one-parameter problem worked out by hand, byte counts
of one round, and a check that every hyperparameter changes the result.

Loss of the `linear` model with one output: F_k(w) = (1/n_k) ||X_k w - y_k||^2, so
grad F_k(w) = H_k w - b_k with H_k = (2/n_k) X_k^T X_k and b_k = (2/n_k) X_k^T y_k.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import make_scenario, run_outputs
from lsq_problem import COUNTS, D, lsq_data


# ----------------------------------------------------------------------------- helpers
def quad_data() -> list[tuple[np.ndarray, np.ndarray]]:
    """Four clients with different feature scales and shifts (different Hessians) and
    different true models: FedAvg with many local steps is biased on this problem."""
    return lsq_data()


def scenario(tmp_path, data, algorithms: list[dict], *, steps: int, lr: float, rounds: int,
             edges: int = 1, extra_train: dict | None = None, name: str = "drift") -> str:
    train = {"rounds": rounds, "clients_per_round": "all",
             "local": {"steps": steps, "batch_size": "full", "lr": lr}}
    train.update(extra_train or {})
    return make_scenario(tmp_path, name=name, clients=data, seed=1,
                         topology={"clients": {"count": len(data)}, "edges": {"count": edges}},
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         train=train, algorithms=algorithms, output=f"out_{name}")


def hess(data):
    return [(2.0 / len(x) * x.T @ x, 2.0 / len(x) * x.T @ y) for x, y in data]


def minimiser(data, weights) -> np.ndarray:
    """argmin sum_k weights_k F_k by least squares on the stacked, re-weighted rows."""
    rows = [np.sqrt(wk / len(x)) * x for (x, _), wk in zip(data, weights)]
    rhs = [np.sqrt(wk / len(x)) * y for (x, y), wk in zip(data, weights)]
    return np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]


def fedavg_fixed_point(data, steps: int, lr: float) -> np.ndarray:
    """K GD steps on F_k are the affine map w -> M_k w + v_k (M_k = (I - lr H_k)^K); FedAvg's
    fixed point solves w = sum_k p_k (M_k w + v_k)."""
    p = np.array(COUNTS, float) / sum(COUNTS)
    lhs, rhs = np.eye(D), np.zeros(D)
    for pk, (h, b) in zip(p, hess(data)):
        a = np.eye(D) - lr * h
        m, v = np.eye(D), np.zeros(D)
        for _ in range(steps):
            m, v = a @ m, a @ v + lr * b
        lhs -= pk * m
        rhs += pk * v
    return np.linalg.solve(lhs, rhs)


def fedprox_recursion(data, mu: float, steps: int, lr: float, rounds: int) -> np.ndarray:
    p = np.array(COUNTS, float) / sum(COUNTS)
    w = np.zeros(D)
    for _ in range(rounds):
        new = np.zeros(D)
        for pk, (h, b) in zip(p, hess(data)):
            v = w.copy()
            for _ in range(steps):
                v = v - lr * (h @ v - b + mu * (v - w))
            new += pk * v
        w = new
    return w


# ----------------------------------------------------------------------------- FedProx
def test_fedprox_mu0_is_fedavg_and_mu_follows_the_prox_recursion(tmp_path):
    data = quad_data()
    steps, lr, rounds = 5, 0.02, 6
    path = scenario(tmp_path, data, [{"name": "fedavg"},
                                     {"name": "fedprox", "label": "prox0", "mu": 0.0},
                                     {"name": "fedprox", "label": "prox", "mu": 2.0}],
                    steps=steps, lr=lr, rounds=rounds)
    out = run_outputs(path)
    np.testing.assert_allclose(out.final("prox0"), out.final("fedavg"), rtol=0, atol=1e-7)
    want = fedprox_recursion(data, 2.0, steps, lr, rounds)
    np.testing.assert_allclose(out.final("prox"), want, rtol=0, atol=1e-5)
    # and the prox term matters: mu = 2 is measurably not FedAvg
    assert np.abs(out.final("prox") - out.final("fedavg")).max() > 1e-2
    np.testing.assert_allclose(out.final("fedavg"), fedprox_recursion(data, 0.0, steps, lr,
                                                                       rounds), atol=1e-5)


# ----------------------------------------------------------------------------- exact optima
def test_drift_correction_reaches_the_exact_optimum_where_fedavg_is_biased(tmp_path):
    data = quad_data()
    steps, lr = 20, 0.02
    algos = [{"name": "fedavg"},
             {"name": "scaffold", "label": "scaffold2"},
             {"name": "scaffold", "label": "scaffold1", "option": 1},
             {"name": "feddyn", "label": "feddyn", "alpha": 3.0},
             {"name": "feddyn", "label": "feddyn_code", "alpha": 3.0, "alpha_scaling": "code"},
             {"name": "feddc", "label": "feddc", "alpha": 3.0},
             {"name": "feddc", "label": "feddc_code", "alpha": 3.0, "alpha_scaling": "code",
              "server_rule": "code"}]
    path = scenario(tmp_path, data, algos, steps=steps, lr=lr, rounds=40,
                    extra_train={"eval_every": 1000})
    out = run_outputs(path)
    n = np.array(COUNTS, float)
    w_weighted = minimiser(data, n / n.sum())           # argmin sum_k p_k F_k
    w_uniform = minimiser(data, np.full(len(n), 1 / len(n)))   # argmin (1/N) sum_k F_k
    assert np.linalg.norm(w_weighted - w_uniform) > 0.25  # the two objectives differ here

    # FedAvg stops at its own fixed point, far from either optimum
    fa = out.final("fedavg")
    np.testing.assert_allclose(fa, fedavg_fixed_point(data, steps, lr), atol=1e-4)
    bias = np.linalg.norm(fa - w_weighted)
    assert bias > 0.25 and np.linalg.norm(fa - w_uniform) > 0.25

    # SCAFFOLD (unweighted means, as in the paper) and FedDyn (paper) minimise (1/N) sum F_k
    for label in ("scaffold2", "scaffold1", "feddyn"):
        np.testing.assert_allclose(out.final(label), w_uniform, rtol=0, atol=1e-4,
                                   err_msg=label)
    # FedDyn with the published code's alpha / (n_k / mean n): sum_k n_k grad F_k = 0
    np.testing.assert_allclose(out.final("feddyn_code"), w_weighted, rtol=0, atol=1e-4)
    # FedDC lands far closer to argmin sum p_k F_k than FedAvg: with the paper's n-weighted
    # server, and with the code's rule + per-client alpha (whose fixed point is also weighted)
    for label in ("feddc", "feddc_code"):
        assert np.linalg.norm(out.final(label) - w_weighted) < 1e-3 * bias, label


# ----------------------------------------------------------------------------- by hand
ONE_D = [(np.array([[1.0]]), np.array([1.0])),              # F_0 = (w - 1)^2,  n_0 = 1
         (np.array([[2.0], [2.0]]), np.array([6.0, 6.0]))]  # F_1 = 4 (w - 3)^2, n_1 = 2
# grad F_0 = 2 (w - 1), grad F_1 = 8 (w - 3); w^0 = 0, eta = 0.05, K = 2 full-batch steps.
HAND_ALGOS = [{"name": "fedavg"},
              {"name": "fedprox", "mu": 1.0},
              {"name": "scaffold"},
              {"name": "scaffold", "label": "scaffold_opt1", "option": 1},
              {"name": "scaffold", "label": "scaffold_lr", "server_lr": 0.5},
              {"name": "feddyn", "alpha": 1.0},
              {"name": "feddyn", "label": "feddyn_code", "alpha": 1.0, "alpha_scaling": "code"},
              {"name": "feddc", "alpha": 1.0},
              {"name": "feddc", "label": "feddc_code_alpha", "alpha": 1.0,
               "alpha_scaling": "code"},
              {"name": "feddc", "label": "feddc_code_rule", "alpha": 1.0, "server_rule": "code"},
              {"name": "feddc", "label": "feddc_clip", "alpha": 1.0, "clip": 1.0}]


def test_one_parameter_rounds_worked_by_hand(tmp_path):
    path = scenario(tmp_path, ONE_D, HAND_ALGOS, steps=2, lr=0.05, rounds=2, name="hand")
    r1 = run_outputs(path, rounds=1, out=str(tmp_path / "r1"))
    r2 = run_outputs(path, rounds=2, out=str(tmp_path / "r2"))

    def check(out, label, want):
        got = float(out.final(label)[0])
        assert got == pytest.approx(want, abs=2e-5), (label, got, want)

    # ---- round 1 local GD with no correction (FedAvg, SCAFFOLD's first round):
    # client 0: 0 - .05*2*(0-1) = .1;   .1 - .05*2*(.1-1) = .19
    # client 1: 0 - .05*8*(0-3) = 1.2;  1.2 - .05*8*(1.2-3) = 1.92
    check(r1, "fedavg", (1 * 0.19 + 2 * 1.92) / 3)                      # 1.343333
    # ---- FedProx mu = 1: extra gradient mu (w - 0)
    # client 0: .1;  .1 - .05*(2*(.1-1) + .1) = .185
    # client 1: 1.2; 1.2 - .05*(8*(1.2-3) + 1.2) = 1.86
    check(r1, "fedprox", (0.185 + 2 * 1.86) / 3)                        # 1.301667

    # ---- SCAFFOLD, option II: unweighted mean of dy
    check(r1, "scaffold", 0 + (0.19 + 1.92) / 2)                        # 1.055
    check(r1, "scaffold_lr", 0 + 0.5 * (0.19 + 1.92) / 2)               # .5275
    # c_0 = 0 - 0 + (0 - .19)/(2*.05) = -1.9;  c_1 = -1.92/.1 = -19.2;  c = (-1.9-19.2)/2 = -10.55
    # round 2 from w = 1.055, correction c - c_k: client 0: -8.65, client 1: +8.65
    # client 0: 1.055 - .05*(2*.055 - 8.65) = 1.482;  1.482 - .05*(2*.482 - 8.65) = 1.8663
    # client 1: 1.055 - .05*(8*(1.055-3) + 8.65) = 1.4005;  - .05*(8*(1.4005-3) + 8.65) = 1.6078
    check(r2, "scaffold", 1.055 + ((1.8663 - 1.055) + (1.6078 - 1.055)) / 2)   # 1.73705
    # without the correction round 2 would give (1.04455 + 2.2998)/2 = 1.672175: a no-op fails
    # option I: c_k = grad F_k(0): c_0 = -2, c_1 = -24, c = -13; corrections -11 and +11
    # client 0: 1.055 - .05*(.11 - 11) = 1.5995;  1.5995 - .05*(2*.5995 - 11) = 2.08955
    # client 1: 1.055 - .05*(-15.56 + 11) = 1.283;  1.283 - .05*(8*(1.283-3) + 11) = 1.4198
    check(r1, "scaffold_opt1", 1.055)
    check(r2, "scaffold_opt1", 1.055 + ((2.08955 - 1.055) + (1.4198 - 1.055)) / 2)  # 1.754675
    # server_lr = .5, round 2 from w = .5275, c_k = (-1.9, -19.2), c = -10.55 (as above):
    # client 0: .5275 - .05*(2*(.5275-1) - 8.65) = 1.00725; - .05*(2*.00725 - 8.65) = 1.439025
    # client 1: .5275 - .05*(8*(.5275-3) + 8.65) = 1.084; - .05*(8*(1.084-3) + 8.65) = 1.4179
    check(r2, "scaffold_lr", 0.5275 + 0.5 * ((1.439025 - .5275) + (1.4179 - .5275)) / 2)

    # ---- FedDyn alpha = 1, round 1 (g_k = 0): local = FedProx's: theta = (.185, 1.86)
    # h = 0 - (1/2)(.185 + 1.86) = -1.0225;  w = mean(theta) - h/alpha = 1.0225 + 1.0225
    check(r1, "feddyn", 2.045)
    # g_0 = -.185, g_1 = -1.86 (term -<g_k, theta> adds +.185 / +1.86 to the gradient)
    # client 0: 2.045 - .05*(2*1.045 + .185) = 1.93125
    #           1.93125 - .05*(2*.93125 + .185 + (1.93125 - 2.045)) = 1.8345625
    # client 1: 2.045 - .05*(8*(2.045-3) + 1.86) = 2.334
    #           2.334 - .05*(8*(2.334-3) + 1.86 + (2.334 - 2.045)) = 2.49295
    # h = -1.0225 - (1/2)((1.8345625-2.045) + (2.49295-2.045)) = -1.14125625
    check(r2, "feddyn", (1.8345625 + 2.49295) / 2 + 1.14125625)          # 3.3050125
    # code scaling: alpha_k = 1/(n_k/1.5) = (1.5, .75)
    # client 0: .1;  .1 - .05*(2*(.1-1) + 1.5*.1) = .1825
    # client 1: 1.2; 1.2 - .05*(8*(1.2-3) + .75*1.2) = 1.875
    # h = -(1/2)(.1825 + 1.875) = -1.02875;  w = 1.02875 + 1.02875
    check(r1, "feddyn_code", 2.0575)

    # ---- FedDC alpha = 1, round 1 (h = g_i = g = 0): local = FedProx's: theta = (.185, 1.86)
    # h_i = g_i = theta_i - 0;  upload theta + h = (.37, 3.72);  w = (1*.37 + 2*3.72)/3
    check(r1, "feddc", (0.37 + 2 * 3.72) / 3)                            # 2.603333
    # code alpha (1.5, .75): theta = (.1825, 1.875) as for FedDyn;  w = (2*.1825 + 2*2*1.875)/3
    check(r1, "feddc_code_alpha", (2 * 0.1825 + 4 * 1.875) / 3)          # 2.621667
    # code rule: w = mean_S theta + mean_all h = 1.0225 + 1.0225
    check(r1, "feddc_code_rule", 2.045)
    # clip at 1: every gradient here has |g| > 1, so each step moves by .05: theta = (.1, .1)
    # upload theta + h = .2 for both clients
    check(r1, "feddc_clip", 0.2)
    # round 2: g = (1*.185 + 2*1.86)/3 = 1.3016667; linear coefficient (g_i - g)/(eta K):
    #   v_0 = (.185 - 1.3016667)/.1 = -11.166667,  v_1 = (1.86 - 1.3016667)/.1 = 5.5833333
    # prox centres w - h_i: 2.6033333 - .185 = 2.4183333,  2.6033333 - 1.86 = .7433333
    # client 0: 2.6033333 - .05*(2*1.6033333 + .185 - 11.166667) = 2.9920833
    #           2.9920833 - .05*(2*1.9920833 + .57375 - 11.166667) = 3.3225208
    # client 1: 2.6033333 - .05*(8*(-.3966667) + 1.86 + 5.5833333) = 2.3898333
    #           2.3898333 - .05*(8*(-.6101667) + 1.6465 + 5.5833333) = 2.2724083
    # h_0 = .185 + (3.3225208 - 2.6033333) = .9041875, h_1 = 1.86 + (2.2724083 - 2.6033333)
    check(r2, "feddc", (1 * (3.3225208 + 0.9041875) + 2 * (2.2724083 + 1.529075)) / 3)  # 3.943225


# ----------------------------------------------------------------------------- bytes
def test_bytes_of_one_round_match_a_hand_count(tmp_path):
    data = quad_data()
    algos = [{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}, {"name": "scaffold"},
             {"name": "feddyn", "alpha": 0.1}, {"name": "feddc", "alpha": 0.1},
             {"name": "feddc", "label": "feddc_code", "alpha": 0.1, "server_rule": "code"}]
    path = scenario(tmp_path, data, algos, steps=2, lr=0.02, rounds=1, edges=2, name="bytes")
    out = run_outputs(path)
    labels = out.labels
    c, e, p = len(COUNTS), 2, D
    # model-sized tensors (down, up): SCAFFOLD (x, c) / (dy, dc); FedDC (w, g) / (theta+h, dg)
    tensors = {"fedavg": (1, 1), "fedprox": (1, 1), "scaffold": (2, 2), "feddyn": (1, 1),
               "feddc": (2, 2), "feddc_code": (2, 2)}
    for label in labels:
        row = out.metrics[label][-1]
        down, up = tensors[label]
        assert row["round"] == "1"
        # down: cloud -> each edge once, edge -> each client; up: client -> edge -> cloud
        assert float(row["bytes_down"]) == p * 4 * down * (e + c), label
        assert float(row["bytes_up"]) == p * 4 * up * 2 * c, label


# ----------------------------------------------------------------------------- hyperparameters
def test_every_hyperparameter_changes_the_result(tmp_path):
    data = quad_data()
    pairs = {
        "fedprox.mu": ({"name": "fedprox", "mu": 0.0}, {"name": "fedprox", "mu": 1.0}),
        "scaffold.option": ({"name": "scaffold", "option": 2}, {"name": "scaffold", "option": 1}),
        "scaffold.server_lr": ({"name": "scaffold"}, {"name": "scaffold", "server_lr": 0.5}),
        "feddyn.alpha": ({"name": "feddyn", "alpha": 0.1}, {"name": "feddyn", "alpha": 1.0}),
        "feddyn.alpha_scaling": ({"name": "feddyn", "alpha": 0.5},
                                 {"name": "feddyn", "alpha": 0.5, "alpha_scaling": "code"}),
        "feddc.alpha": ({"name": "feddc", "alpha": 0.1}, {"name": "feddc", "alpha": 1.0}),
        "feddc.alpha_scaling": ({"name": "feddc", "alpha": 0.5},
                                {"name": "feddc", "alpha": 0.5, "alpha_scaling": "code"}),
        "feddc.server_rule": ({"name": "feddc", "alpha": 0.5},
                              {"name": "feddc", "alpha": 0.5, "server_rule": "code"}),
        "feddc.clip": ({"name": "feddc", "alpha": 0.5}, {"name": "feddc", "alpha": 0.5,
                                                         "clip": 1.0}),
    }
    algos = []
    for key, (a, b) in pairs.items():
        algos += [{**a, "label": f"{key}.a"}, {**b, "label": f"{key}.b"}]
    path = scenario(tmp_path, data, algos, steps=5, lr=0.02, rounds=3, name="hp")
    out = run_outputs(path)
    for key in pairs:
        diff = np.abs(out.final(f"{key}.a") - out.final(f"{key}.b")).max()
        assert diff > 1e-3, (key, diff)


# ----------------------------------------------------------------------------- executors, cost
def test_sequential_reference_executor_agrees_and_option1_pays_a_full_gradient(tmp_path):
    """The sequential executor (autograd, one client at a time, terms restricted by `select`)
    reproduces the batched one, including per-client alpha and SCAFFOLD's option I state."""
    data = quad_data()
    algos = [{"name": "scaffold", "label": "s1", "option": 1},
             {"name": "scaffold", "label": "s2"},
             {"name": "feddyn", "label": "dyn", "alpha": 0.5, "alpha_scaling": "code"},
             {"name": "feddc", "label": "dc", "alpha": 0.5, "alpha_scaling": "code",
              "server_rule": "code", "clip": 5.0}]
    steps = 4
    a = scenario(tmp_path, data, algos, steps=steps, lr=0.02, rounds=3, name="batched")
    b = scenario(tmp_path, data, algos, steps=steps, lr=0.02, rounds=3, name="seq",
                 extra_train={"executor": {"kind": "sequential"}})
    out_a = run_outputs(a)
    labels = out_a.labels
    out_b = run_outputs(b)
    for label in labels:
        np.testing.assert_allclose(out_a.final(label), out_b.final(label), atol=1e-5,
                                   err_msg=label)
    # compute time = FLOPs of the gradients evaluated: option I adds one full gradient per round
    def compute(label):
        return np.array([float(r["compute_s"]) for r in out_a.clients[label]])
    np.testing.assert_allclose(compute("s1") / compute("s2"), (steps + 1) / steps, rtol=1e-9)
