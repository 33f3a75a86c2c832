"""Personalised flat algorithms (pFedMe, pFedMac / pFedMac-S, APFL, Ditto) against numbers computed
independently here: closed forms on quadratics, one-parameter rounds worked by hand, the l1
proximal map of a separable quadratic.

The data are `npz` files with the `linear` model without bias, so client k's loss is
f_k(w) = (1/n_k) ||X_k w - y_k||^2 = (1/2) w^T H_k w - c_k^T w + const with
H_k = 2 X_k^T X_k / n_k and c_k = 2 X_k^T y_k / n_k; grad f_k(w) = H_k w - c_k."""
from __future__ import annotations

import math

import numpy as np
import pytest

from closed_forms import smooth_solution
from conftest import make_scenario, run_outputs


# ----------------------------------------------------------------------------- helpers
def run(tmp_path, clients, algorithms, rounds, local, per_round="all", model="linear",
        labels=False, name="t", train_extra=None, rounds_override=None):
    """Write data + scenario under tmp_path/name, run it, return {label: (arrays, rows)}."""
    path = make_scenario(
        tmp_path / name, name=name, clients=clients, labels=labels, seed=3,
        topology={"clients": {"count": len(clients)}, "edges": {"count": 1}},
        model={"name": model, "bias": model != "linear", "init": "zeros"},
        train={"rounds": rounds, "clients_per_round": per_round, "local": local,
               **(train_extra or {})},
        algorithms=algorithms, output="out")
    out = run_outputs(path, rounds=rounds_override)
    return {label: (out.params[label], out.metrics[label]) for label in out.labels}


def personal(arrays, n):
    return np.stack([arrays[f"client_{k}"] for k in range(n)])


def quadratic_clients(seed=11, n_clients=3, d=3, rows=(12, 20, 28)):
    g = np.random.default_rng(seed)
    out = []
    for k in range(n_clients):
        x = g.normal(size=(rows[k], d)) + np.eye(d)[k % d] * 1.5
        y = x @ g.normal(size=d) * (1.0 + k) + g.normal(size=rows[k]) + 2.0 * k
        out.append((x.astype(np.float32), y.astype(np.float32)))
    return out


def hess_c(clients):
    """H_k, c_k of f_k(w) = (1/n)||Xw - y||^2, in float64 (from the float32 data the run sees)."""
    hs, cs = [], []
    for x, y in clients:
        x, y = x.astype(np.float64), y.astype(np.float64)
        hs.append(2 * x.T @ x / len(x))
        cs.append(2 * x.T @ y / len(x))
    return hs, cs


# ----------------------------------------------------------------------------- one parameter
# d = 1, two clients, full batch, w^0 = 0:
#   client 0: x = [1],    y = [2]     -> f_0(w) = (w - 2)^2,          f_0'(w) = 2 (w - 2)
#   client 1: x = [2, 2], y = [2, 2]  -> f_1(w) = (2w - 2)^2 = 4(w-1)^2, f_1'(w) = 8 (w - 1)
# n = (1, 2) so the server weights are p = (1/3, 2/3). One round, R = 2 local steps.
ONE = [(np.array([[1.0]]), np.array([2.0])), (np.array([[2.0], [2.0]]), np.array([2.0, 2.0]))]
G = [lambda w: 2 * (w - 2), lambda w: 8 * (w - 1)]
P = [1 / 3, 2 / 3]


def test_one_parameter_rounds_by_hand(tmp_path):
    """Two rounds with all clients: round 1 worked by hand for client 0 (the literals), round 2
    checks the state carried between rounds (pFedMe/pFedMac restart theta from w^t; APFL keeps v and
    alpha; Ditto keeps v and re-anchors at the new w)."""
    eta = 0.25
    algos = [
        {"name": "pfedme", "lam": 1.0, "personal_steps": 2, "personal_lr": 0.1, "beta": 0.5},
        {"name": "pfedmac", "lam": 0.5, "inner_steps": 2, "inner_lr": 0.1, "beta": 0.5},
        {"name": "apfl", "alpha": 0.5, "adaptive": True, "alpha_lr": 0.05},
        {"name": "ditto", "lam": 2.0, "personal_lr": 0.1},
    ]
    res = run(tmp_path, ONE, algos, rounds=2, local={"steps": 2, "batch_size": "full", "lr": eta})

    def envelope(g, w, inner_grad):
        """R = 2 local steps of K = 2 inner steps (step 0.1) from x = theta = w."""
        x = th = w
        for _ in range(2):
            for _ in range(2):
                th = th - 0.1 * inner_grad(g, th, x)
            x = x - eta * lam * (x - th)
        return x, th

    # pFedMe, lam = 1: inner gradient f'(theta) + lam (theta - x). Client 0, round 1, step 1 from
    # theta = x = 0: theta 0.4, then 0.4 - 0.1 (2(-1.6) + 0.4) = 0.68; x = 0.25 * 0.68 = 0.17.
    # Step 2: inner gradient 3 theta - 4.17 -> theta 0.893, 1.0421; x = 0.17 - 0.25 (0.17 - 1.0421).
    lam = 1.0
    prox = lambda g, th, x: g(th) + lam * (th - x)  # noqa: E731
    assert envelope(G[0], 0.0, prox) == pytest.approx((0.388025, 1.0421))
    w = 0.0
    for _ in range(2):
        (x0, t0), (x1, t1) = envelope(G[0], w, prox), envelope(G[1], w, prox)
        w = 0.5 * w + 0.5 * (P[0] * x0 + P[1] * x1)
    arrays, _ = res["pfedme"]
    assert arrays["global"][0] == pytest.approx(w, abs=1e-6)
    assert personal(arrays, 2)[:, 0] == pytest.approx([t0, t1], abs=1e-6)

    # pFedMac, lam = 0.5: inner gradient f'(theta) - lam x. Client 0, round 1, step 1 (x = 0):
    # theta 0.4, then 0.4 - 0.1 (2 (0.4 - 2)) = 0.72; x = 0.125 * 0.72 = 0.09. Step 2: inner
    # gradient 2 theta - 4.045 -> theta 0.9805, 1.1889; x = 0.09 - 0.125 (0.09 - 1.1889).
    lam = 0.5
    linear = lambda g, th, x: g(th) - lam * x  # noqa: E731
    assert envelope(G[0], 0.0, linear) == pytest.approx((0.2273625, 1.1889))
    w = 0.0
    for _ in range(2):
        (x0, t0), (x1, t1) = envelope(G[0], w, linear), envelope(G[1], w, linear)
        w = 0.5 * w + 0.5 * (P[0] * x0 + P[1] * x1)
    arrays, _ = res["pfedmac"]
    assert arrays["global"][0] == pytest.approx(w, abs=1e-6)
    assert personal(arrays, 2)[:, 0] == pytest.approx([t0, t1], abs=1e-6)

    # APFL (adaptive): simultaneous updates from (w, v, a); alpha moves only once v != w.
    def apfl(g, w, v, a):
        for _ in range(2):
            vb = a * v + (1 - a) * w
            w, v, a = (w - eta * g(w), v - eta * a * g(vb),
                       min(max(a - 0.05 * (v - w) * g(vb), 0.0), 1.0))
        return w, v, a
    # client 0, round 1: step 1 (v_bar = 0, f' = -4): w = 1, v = 0.5, alpha stays 0.5 (v - w = 0);
    # step 2: v_bar = 0.75, f'(w) = -2, f'(v_bar) = -2.5 -> w = 1.5, v = 0.8125,
    # alpha = 0.5 - 0.05 (0.5 - 1)(-2.5) = 0.4375
    assert apfl(G[0], 0.0, 0.0, 0.5) == pytest.approx((1.5, 0.8125, 0.4375))
    w, state = 0.0, [(0.0, 0.5), (0.0, 0.5)]
    for _ in range(2):
        out = [apfl(G[k], w, *state[k]) for k in range(2)]
        state = [(v, a) for _, v, a in out]
        w = P[0] * out[0][0] + P[1] * out[1][0]
    arrays, _ = res["apfl"]
    assert arrays["global"][0] == pytest.approx(w, abs=1e-6)
    # personal: v_bar = alpha v + (1 - alpha) w_k with the client's local w_k of its last step
    assert personal(arrays, 2)[:, 0] == pytest.approx([a * v + (1 - a) * wk for wk, v, a in out],
                                                      abs=1e-6)

    # Ditto: v <- v - 0.1 (f'(v) + 2 (v - w^t)); w <- w - eta f'(w) from w^t.
    def ditto(g, wt, v):
        w = wt
        for _ in range(2):
            v = v - 0.1 * (g(v) + 2.0 * (v - wt))
            w = w - eta * g(w)
        return w, v
    # client 0, round 1: v = 0.4, then 0.4 - 0.1 (2 (-1.6) + 0.8) = 0.64; w = 1, then 1.5
    assert ditto(G[0], 0.0, 0.0) == pytest.approx((1.5, 0.64))
    w, vs = 0.0, [0.0, 0.0]
    for _ in range(2):
        out = [ditto(G[k], w, vs[k]) for k in range(2)]
        vs = [v for _, v in out]
        w = P[0] * out[0][0] + P[1] * out[1][0]
    arrays, _ = res["ditto"]
    assert arrays["global"][0] == pytest.approx(w, abs=1e-6)
    assert personal(arrays, 2)[:, 0] == pytest.approx(vs, abs=1e-6)


# ----------------------------------------------------------------------------- fixed points
def test_pfedme_converges_to_moreau_fixed_point(tmp_path):
    """With exact inner solves (K steps of GD with step 1/(L + lam): contraction
    1 - (mu + lam)/(L + lam) per step), theta_k(x) = (H_k + lam I)^{-1} (c_k + lam x) is the prox of
    f_k/lam at x, and one local step (R = 1) of x <- x - eta lam (x - theta_k(x)) with all clients and
    any beta is a gradient step on sum_k p_k F_k, F_k the Moreau envelope. Its fixed point solves
    sum_k p_k (x - theta_k(x)) = 0, i.e.
        (I - lam sum_k p_k (H_k + lam I)^{-1}) x* = sum_k p_k (H_k + lam I)^{-1} c_k,
    and the personal models are theta_k(x*). It is not the minimiser of sum_k p_k f_k."""
    clients = quadratic_clients()
    hs, cs = hess_c(clients)
    n = np.array([len(c[1]) for c in clients], float)
    p = n / n.sum()
    lam = 2.0
    top = max(np.linalg.eigvalsh(h).max() for h in hs)
    algos = [{"name": "pfedme", "lam": lam, "personal_steps": 60,
              "personal_lr": float(1.0 / (top + lam)), "beta": 1.0}]
    res = run(tmp_path, clients, algos, rounds=40,
              local={"steps": 1, "batch_size": "full", "lr": 1.0 / lam})
    eye = np.eye(3)
    inv = [np.linalg.inv(h + lam * eye) for h in hs]
    a = eye - lam * sum(pk * m for pk, m in zip(p, inv))
    b = sum(pk * m @ c for pk, m, c in zip(p, inv, cs))
    x_star = np.linalg.solve(a, b)
    arrays, rows = res["pfedme"]
    np.testing.assert_allclose(arrays["global"], x_star, atol=2e-4)
    thetas = np.stack([m @ (c + lam * x_star) for m, c in zip(inv, cs)])
    np.testing.assert_allclose(personal(arrays, 3), thetas, atol=2e-4)
    fedavg_opt = np.linalg.solve(sum(pk * h for pk, h in zip(p, hs)), sum(pk * c for pk, c in zip(p, cs)))
    assert np.abs(x_star - fedavg_opt).max() > 0.05
    assert rows[-1]["diverged"] == "0" and math.isfinite(float(rows[-1]["personal_test_mse"]))


def test_pfedmac_converges_to_conjugate_fixed_point(tmp_path):
    """pFedMac on quadratics: theta_k(x) = argmin f_k(theta) - lam <theta, x> = H_k^{-1} (c_k + lam x)
    (bounded: H_k is positive definite). The outer objective sum_k p_k [(lam/2)||x||^2 - f_k*(lam x)]
    has Hessian lam (I - lam sum_k p_k H_k^{-1}), positive definite for lam < min eig H_k. With exact
    inner solves and R = 1 the fixed point solves sum_k p_k (x - theta_k(x)) = 0:
        (I - lam sum_k p_k H_k^{-1}) x* = sum_k p_k H_k^{-1} c_k."""
    clients = quadratic_clients()
    hs, cs = hess_c(clients)
    n = np.array([len(c[1]) for c in clients], float)
    p = n / n.sum()
    low = min(np.linalg.eigvalsh(h).min() for h in hs)
    top = max(np.linalg.eigvalsh(h).max() for h in hs)
    lam = 0.4 * low
    k_steps = int(np.ceil(np.log(1e-9) / np.log(1 - low / top)))
    algos = [{"name": "pfedmac", "lam": float(lam), "inner_steps": k_steps,
              "inner_lr": float(1.0 / top), "beta": 1.0}]
    res = run(tmp_path, clients, algos, rounds=30,
              local={"steps": 1, "batch_size": "full", "lr": float(1.0 / lam)})
    eye = np.eye(3)
    inv = [np.linalg.inv(h) for h in hs]
    a = eye - lam * sum(pk * m for pk, m in zip(p, inv))
    b = sum(pk * m @ c for pk, m, c in zip(p, inv, cs))
    x_star = np.linalg.solve(a, b)
    arrays, _ = res["pfedmac"]
    np.testing.assert_allclose(arrays["global"], x_star, rtol=1e-4, atol=2e-4)
    thetas = np.stack([m @ (c + lam * x_star) for m, c in zip(inv, cs)])
    np.testing.assert_allclose(personal(arrays, 3), thetas, rtol=1e-4, atol=2e-4)
    # the personal models are the local minimisers shifted by lam H_k^{-1} x*, not the global model
    assert np.abs(thetas - x_star).max() > 0.1


# ----------------------------------------------------------------------------- limits
def test_ditto_large_lambda_personal_equals_global_and_global_is_fedavg(tmp_path):
    """With personal_lr * lam = 1 a personal step is v = w^t - grad f_k(v)/lam: as lam -> infinity
    the personal model of every client is the round's global model w^{T-1}. Ditto's global model is
    FedAvg's, bit for bit (same batches, same SGD)."""
    clients = quadratic_clients()
    local = {"steps": 3, "batch_size": 5, "lr": 0.05}
    algos = [{"name": "fedavg"},
             {"name": "ditto", "label": "big", "lam": 1e4, "personal_lr": 1e-4},
             {"name": "ditto", "label": "small", "lam": 0.1, "personal_lr": 0.05}]
    res = run(tmp_path, clients, algos, rounds=4, local=local)
    prev = run(tmp_path, clients, algos[:1], rounds=4, local=local, name="prev",
               rounds_override=3)
    w_prev = prev["fedavg"][0]["global"]
    # the same SGD steps as FedAvg; the fused FedAvg step may round differently in the last bit
    np.testing.assert_allclose(res["big"][0]["global"], res["fedavg"][0]["global"],
                               rtol=0, atol=1e-6)
    big = personal(res["big"][0], 3)
    assert np.abs(big - w_prev).max() < 5e-3
    assert np.abs(personal(res["small"][0], 3) - w_prev).max() > 0.1


def test_apfl_alpha_zero_is_fedavg(tmp_path):
    """APFL's w steps are FedAvg's SGD steps, so its global model is FedAvg's. With alpha = 0 the
    mixture v_bar_k is the client's local FedAvg model w_k: when every client takes part in the last
    round, their n_k-weighted mean is exactly the global model."""
    clients = quadratic_clients()
    n = np.array([len(c[1]) for c in clients], float)
    algos = [{"name": "fedavg"}, {"name": "apfl", "alpha": 0.0},
             {"name": "apfl", "label": "apfl_half", "alpha": 0.5}]
    local = {"steps": 4, "batch_size": 4, "lr": 0.05}
    res = run(tmp_path, clients, algos, rounds=3, per_round=2, local=local)
    g = res["fedavg"][0]["global"]
    np.testing.assert_allclose(res["apfl"][0]["global"], g, rtol=0, atol=1e-7)
    np.testing.assert_allclose(res["apfl_half"][0]["global"], g, rtol=0, atol=1e-7)
    res = run(tmp_path, clients, algos, rounds=3, per_round="all", local=local, name="all")
    g = res["fedavg"][0]["global"]
    np.testing.assert_allclose(np.average(personal(res["apfl"][0], 3), axis=0, weights=n), g,
                               atol=1e-6)
    half = personal(res["apfl_half"][0], 3)
    assert np.abs(np.average(half, axis=0, weights=n) - g).max() > 1e-2


# ----------------------------------------------------------------------------- sparsity
def separable(gamma_b):
    """Two clients with X = sqrt(3) I (d = 6): f(w) = (1/6) sum_j (sqrt(3) w_j - y_j)^2, so H = I and
    c = y / sqrt(3): each coordinate's inner problem (x = 0) is (1/2) theta^2 - b theta + gamma|theta|
    with b = c, minimised by soft(b, gamma)."""
    b = np.array([[1.0, -1.0, 0.2, -0.2, 0.4, -0.8], [0.45, -2.0, 0.05, 0.7, -0.3, 1.5]])
    s = math.sqrt(3.0)
    return [(s * np.eye(6), bk * s) for bk in b], b


def test_l1_soft_threshold_exact_zeros_and_sparse_bytes(tmp_path):
    clients, b = separable(0.5)
    gamma, eta, lam = 0.5, 0.5, 2.0
    algos = [{"name": "pfedmac", "lam": lam, "beta": 1.0, "inner_steps": 3, "inner_lr": 1.0,
              "sparsity": {"kind": "l1", "gamma": gamma}, "encoding": "auto"}]
    res = run(tmp_path, clients, algos, rounds=1, local={"steps": 1, "batch_size": "full", "lr": eta})
    arrays, rows = res["pfedmac"]
    th = personal(arrays, 2)
    closed = np.sign(b) * np.maximum(np.abs(b) - gamma, 0.0)       # H = I
    zero = np.abs(b) <= gamma
    assert (th[zero] == 0.0).all() and (th[~zero] != 0.0).all()
    np.testing.assert_allclose(th, closed, atol=1e-6)
    assert float(rows[-1]["personal_sparsity"]) == pytest.approx(zero.mean())
    # x_k = 0 - eta lam (0 - theta_k): the upload has the same zeros; auto = min(4 * 6, 8 * nnz)
    # per client, relayed client -> edge -> cloud (two hops).
    nnz = (~zero).sum(1)
    assert float(rows[-1]["bytes_up"]) == pytest.approx(2 * np.minimum(24, 8 * nnz).sum())
    np.testing.assert_allclose(arrays["global"], (1 / 2) * eta * lam * closed.sum(0), atol=1e-6)




def test_logcosh_approaches_l1_as_rho_shrinks(tmp_path):
    clients, b = separable(0.5)
    gamma = 0.5
    l1 = np.sign(b) * np.maximum(np.abs(b) - gamma, 0.0)
    errs = []
    for rho in (0.1, 0.01):
        lr = 1.0 / (1.0 + gamma / rho)
        k = int(np.ceil(np.log(1e-8) / np.log(1 - lr)))
        algos = [{"name": "pfedmac", "lam": 1.0, "inner_steps": k, "inner_lr": lr,
                  "sparsity": {"kind": "logcosh", "gamma": gamma, "rho": rho}}]
        res = run(tmp_path, clients, algos, rounds=1, name=f"rho{rho}",
                  local={"steps": 1, "batch_size": "full", "lr": 0.5})
        th = personal(res["pfedmac"][0], 2)
        np.testing.assert_allclose(th, smooth_solution(b, gamma, rho), atol=2e-5)
        assert (th != 0).all()            # smooth: near-zeros, never exact zeros here
        errs.append(np.abs(th - l1).max())
    assert errs[1] < 0.02 and errs[1] < errs[0] / 5


# ----------------------------------------------------------------------------- hyperparameters
def test_every_hyperparameter_changes_the_result(tmp_path):
    """Each accepted hyperparameter, changed alone from a base setting, changes the final global or
    personal parameters (encoding changes the bytes counted instead)."""
    clients = quadratic_clients()
    l1 = {"kind": "l1", "gamma": 0.05, "rho": 0.1}
    logcosh = {"kind": "logcosh", "gamma": 0.05, "rho": 0.1}
    base = {
        "pfedme": {"lam": 2.0, "personal_steps": 3, "personal_lr": 0.05, "beta": 0.8},
        "pfedmac": {"lam": 0.2, "beta": 0.8, "inner_steps": 3, "inner_lr": 0.05, "sparsity": l1},
        "pfedmac-lc": {"lam": 0.2, "beta": 0.8, "inner_steps": 3, "inner_lr": 0.05,
                       "sparsity": logcosh},
        "apfl": {"alpha": 0.3, "adaptive": True, "alpha_lr": 0.01},
        "ditto": {"lam": 0.5, "personal_lr": 0.05},
    }
    variants = {
        "pfedme": {"lam": 3.0, "personal_steps": 4, "personal_lr": 0.07, "beta": 1.2,
                   "train_all_clients": True, "hidden_l2": 0.1, "weighting": "uniform"},
        "pfedmac": {"lam": 0.3, "beta": 1.0, "inner_steps": 4, "inner_lr": 0.07,
                    "sparsity": {"kind": "none"}, "sparsity.gamma": {**l1, "gamma": 0.1},
                    "weighting": "uniform", "encoding": "sparse"},
        "pfedmac-lc": {"sparsity.kind": {**logcosh, "kind": "l1"},
                       "sparsity.gamma": {**logcosh, "gamma": 0.1},
                       "sparsity.rho": {**logcosh, "rho": 0.02}},
        "apfl": {"alpha": 0.6, "adaptive": False, "alpha_lr": 0.05},
        "ditto": {"lam": 1.0, "personal_lr": 0.02},
    }
    algos, pairs = [], []
    for label, params in base.items():
        name = label.split("-")[0]
        algos.append({"name": name, "label": f"{label}-base", **params})
        for key, value in variants[label].items():
            field = key.split(".")[0]
            algos.append({"name": name, "label": f"{label}-{key}", **{**params, field: value}})
            pairs.append((f"{label}-base", f"{label}-{key}", key))
    res = run(tmp_path, clients, algos, rounds=2, per_round=2,
              local={"steps": 3, "batch_size": 6, "lr": 0.05})
    for a, b, key in pairs:
        (pa, ra), (pb, rb) = res[a], res[b]
        diff = max(np.abs(pa[k] - pb[k]).max() for k in pa)
        if key == "encoding":
            assert diff == 0 and float(rb[-1]["bytes_up"]) == 2 * float(ra[-1]["bytes_up"])
        else:
            assert diff > 1e-6, f"{key} had no effect ({a} vs {b})"


def test_pfedme_train_all_clients_trains_unselected_but_aggregates_selected(tmp_path):
    """With 2 of 3 clients selected, train_all_clients leaves the global model unchanged (only the
    selected are aggregated) but refreshes the third client's personal model and costs its
    download; uploads stay those of the two selected clients (relayed: two hops each)."""
    clients = quadratic_clients()
    params = {"lam": 2.0, "personal_steps": 3, "personal_lr": 0.05}
    algos = [{"name": "pfedme", **params},
             {"name": "pfedme", "label": "all", "train_all_clients": True, **params}]
    res = run(tmp_path, clients, algos, rounds=1, per_round=2,
              local={"steps": 2, "batch_size": "full", "lr": 0.1})
    (a, ra), (b, rb) = res["pfedme"], res["all"]
    np.testing.assert_array_equal(a["global"], b["global"])
    pa, pb = personal(a, 3), personal(b, 3)
    untouched = [k for k in range(3) if np.array_equal(pa[k], np.zeros(3))]
    assert len(untouched) == 1 and not np.array_equal(pb[untouched[0]], np.zeros(3))
    model = 4 * 3
    assert float(ra[-1]["bytes_up"]) == float(rb[-1]["bytes_up"]) == 2 * 2 * model
    assert float(ra[-1]["bytes_down"]) == (1 + 2) * model
    assert float(rb[-1]["bytes_down"]) == (1 + 3) * model
    assert rb[-1]["selected"] == "2" and rb[-1]["reported"] == "2"


# ----------------------------------------------------------------------------- divergence
def test_pfedmac_divergence_is_reported_not_crashed(tmp_path):
    """Cross-entropy makes pFedMac's inner problem unbounded below; with a large inner step theta
    and x run away. The run marks pFedMac diverged in metrics.csv and stops it; FedAvg in the same
    scenario finishes every round."""
    g = np.random.default_rng(5)
    clients = []
    for k in range(3):
        x = g.normal(size=(20, 4)).astype(np.float32)
        clients.append((x, (x[:, k % 4] > 0).astype(np.int64) + k % 2))
    algos = [{"name": "pfedmac", "lam": 1.0, "inner_steps": 5, "inner_lr": 100.0},
             {"name": "fedavg"}]
    res = run(tmp_path, clients, algos, rounds=10, model="logreg", labels=True,
              local={"steps": 5, "batch_size": 5, "lr": 0.5})
    _, rows = res["pfedmac"]
    assert rows[-1]["diverged"] == "1" and len(rows) < 11
    assert all(r["diverged"] == "0" for r in rows[:-1])
    _, rows = res["fedavg"]
    assert len(rows) == 11 and all(r["diverged"] == "0" for r in rows)
    assert math.isfinite(float(rows[-1]["test_acc"]))


def test_batched_equals_sequential_autograd_executor(tmp_path):
    """The vectorised programs (closed-form gradients, all clients at once) match the reference
    executor (one client at a time, autograd gradients) on logistic regression with minibatches."""
    g = np.random.default_rng(8)
    clients = []
    for k in range(4):
        x = g.normal(size=(15 + 5 * k, 5)).astype(np.float32)
        clients.append((x, (x @ g.normal(size=5) > 0).astype(np.int64) + 2 * (k % 2)))
    algos = [{"name": "pfedme", "lam": 5.0, "personal_steps": 3, "personal_lr": 0.05,
              "hidden_l2": 0.01, "train_all_clients": True},
             {"name": "pfedmac", "lam": 0.05, "inner_steps": 3, "inner_lr": 0.05,
              "sparsity": {"kind": "l1", "gamma": 0.02}},
             {"name": "apfl", "alpha": 0.4, "adaptive": True},
             {"name": "ditto", "lam": 0.5}]
    local = {"steps": 4, "batch_size": 4, "lr": 0.1}
    out = {}
    for kind in ("batched", "sequential"):
        out[kind] = run(tmp_path, clients, algos, rounds=2, per_round=3, model="logreg",
                        labels=True, name=kind, local=local,
                        train_extra={"executor": {"kind": kind}})
    for label in ("pfedme", "pfedmac", "apfl", "ditto"):
        a, b = out["batched"][label][0], out["sequential"][label][0]
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=2e-5, err_msg=f"{label} {key}")


def test_apfl_client_that_took_no_step_keeps_its_models(tmp_path):
    """APFL wrote every selected client's rows, steps or not: a client with zero steps had its
    w_local set to the round's start model (its personal model 0.5 w0 + 0.5 w1 after two
    rounds in a reader's deadline case). Here slow clients cannot afford one step under
    deadline_partial: from w0 = 0 their personal models stay 0."""
    import numpy as np
    from conftest import make_scenario, run_outputs
    path = make_scenario(tmp_path, algorithms=[{"name": "apfl", "alpha": 0.5}], **{
        "train.rounds": 2, "train.clients_per_round": "all", "model.init": "zeros",
        "train.round": {"policy": "deadline_partial", "deadline_s": 1.0},
        "topology.clients.compute_flops": {"dist": "choice", "choices": [1.0, 1.0e12]}})
    out = run_outputs(path)
    rows = out.clients["apfl"]
    idle = {int(r["client"]) for r in rows} - {int(r["client"]) for r in rows
                                                if int(r["steps"]) > 0}
    assert idle and len(idle) < 4, [(r["client"], r["steps"]) for r in rows]
    assert np.abs(out.final("apfl")).max() > 0               # the others trained
    for k in idle:
        assert not np.abs(out.params["apfl"][f"client_{k}"]).any(), k
