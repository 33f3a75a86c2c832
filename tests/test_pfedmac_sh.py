"""pFedMac-SH (client -> edge -> cloud pFedMac with sparsity) against numbers computed here with
numpy: closed forms on quadratics, a one-parameter round worked by hand, the hand-computed event
schedule of one cloud round.

Data: `npz` files and the `linear` model without bias, so client k's loss is
f_k(w) = (1/n_k) ||X_k w - y_k||^2 = (1/2) w^T H_k w - c_k^T w + const, H_k = 2 X_k^T X_k / n_k,
c_k = 2 X_k^T y_k / n_k. Its pFedMac inner problem min_theta f_k(theta) - lambda1 <theta, y>
[+ gamma ||theta||_1] is solved in closed form: H_k^{-1} (c_k + lambda1 y), or, for H_k = I,
soft(c_k + lambda1 y, gamma) coordinate-wise."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hierfl
from hierfl import seeding
from closed_forms import smooth_solution
from conftest import DROP, TraceBuilder, assert_trace, make_scenario, run_outputs


# ----------------------------------------------------------------------------- helpers
def run(tmp_path, clients, algorithms, topology, rounds, local, seed=3, name="t"):
    """Write data + scenario under tmp_path/name and run it.
    Returns {label: (final arrays, metrics rows, clients.csv rows, AlgoResult)}."""
    path = make_scenario(tmp_path / name, name=name, clients=clients, seed=seed,
                         topology=topology,
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         train={"rounds": rounds, "clients_per_round": "all", "local": local},
                         algorithms=algorithms, output="out")
    out = run_outputs(path)
    return {la: (out.params[la], out.metrics[la], out.clients[la], out.results[la])
            for la in out.labels}


def personal(arrays, n):
    return np.stack([arrays[f"client_{k}"] for k in range(n)])


def soft(v, t):
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def edges(assignment, **clients):
    return {"edges": {"count": len(assignment)},
            "clients": {"count": sum(map(len, assignment)), "assignment": assignment, **clients}}


# ----------------------------------------------------------------------------- reduction
def test_one_edge_one_edge_round_is_flat_pfedmac(tmp_path):
    """R = 1, one edge, S = 1. The edge starts from x_i = y_i = x^t, its clients return
    y_j = ClientUpdate(j, x^t) (the very local work of flat pFedMac from x^t: K steps of
    theta = argmin f_j - lambda1 <theta, y>, y <- y - eta1 lambda1 (y - theta)), and
        x_i = x^t - eta2 lambda2 (x^t - mean_j y_j)
        x^{t+1} = (1 - beta) x^t + beta x_i = x^t + beta eta2 lambda2 (mean_j y_j - x^t),
    flat pFedMac's server rule x^{t+1} = x^t + beta_flat (mean_j y_j - x^t) with
    beta_flat = beta eta2 lambda2 (so eta2 lambda2 = 1 gives x_i = y_i and beta_flat = beta). Both
    take the uniform mean here. Exact inner solves: GD with step 1/L for enough steps."""
    g = np.random.default_rng(5)
    clients = []
    for k, n in enumerate((12, 20, 28)):
        x = g.normal(size=(n, 3)) + np.eye(3)[k] * 1.5
        clients.append(((x).astype(np.float32),
                        (x @ g.normal(size=3) + g.normal(size=n) + k).astype(np.float32)))
    hs = [2 * x.T.astype(float) @ x / len(x) for x, _ in clients]
    cs = [2 * x.T.astype(float) @ y / len(x) for x, y in clients]
    low = min(np.linalg.eigvalsh(h).min() for h in hs)
    top = max(np.linalg.eigvalsh(h).max() for h in hs)
    lam1, eta1, k_local = float(0.4 * low), 0.5, 2
    inner = {"inner_steps": int(np.ceil(np.log(1e-10) / np.log(1 - low / top))),
             "inner_lr": float(1 / top)}
    algos = [
        {"name": "pfedmac", "label": "flat1", "lam": lam1, "beta": 0.7, "weighting": "uniform",
         **inner},
        {"name": "pfedmac_sh", "label": "sh1", "lambda1": lam1, "lambda2": 0.5, "eta2": 2.0,
         "beta": 0.7, "edges_per_round": 1, **inner},
        {"name": "pfedmac", "label": "flat2", "lam": lam1, "beta": 0.4, "weighting": "uniform",
         **inner},
        {"name": "pfedmac_sh", "label": "sh2", "lambda1": lam1, "lambda2": 2.0, "eta2": 0.25,
         "beta": 0.8, "edges_per_round": 1, **inner},
    ]
    res = run(tmp_path, clients, algos, edges([[0, 1, 2]]), rounds=3,
              local={"steps": k_local, "batch_size": "full", "lr": eta1})

    def reference(beta_flat):
        x = np.zeros(3)
        for _ in range(3):
            ys = []
            for h, c in zip(hs, cs):
                y = x.copy()
                for _ in range(k_local):
                    theta = np.linalg.solve(h, c + lam1 * y)
                    y = y - eta1 * lam1 * (y - theta)
                ys.append(y)
            x = x + beta_flat * (np.mean(ys, 0) - x)
        return x, theta

    for flat, sh, beta_flat in (("flat1", "sh1", 0.7), ("flat2", "sh2", 0.4)):
        a_flat, a_sh = res[flat][0], res[sh][0]
        np.testing.assert_allclose(a_sh["global"], a_flat["global"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(personal(a_sh, 3), personal(a_flat, 3), rtol=0, atol=1e-6)
        x_ref, _ = reference(beta_flat)
        np.testing.assert_allclose(a_sh["global"], x_ref, rtol=1e-5, atol=1e-5)
    # the two settings differ (beta eta2 lambda2 = 0.7 vs 0.4): the comparison is not vacuous
    assert np.abs(res["sh1"][0]["global"] - res["sh2"][0]["global"]).max() > 1e-2


# ----------------------------------------------------------------------------- one parameter
# d = 1, no bias, w^0 = 0, full batch. Edge 0: clients 0, 1; edge 1: client 2.
#   client 0: x = [1],    y = [2]     -> f_0(w) = (w - 2)^2,  f_0'(w) = 2 (w - 2)
#   client 1: x = [2, 2], y = [2, 2]  -> f_1(w) = 4 (w - 1)^2, f_1'(w) = 8 (w - 1)
#   client 2: x = [1],    y = [-1]    -> f_2(w) = (w + 1)^2,  f_2'(w) = 2 (w + 1)
ONE = [(np.array([[1.0]]), np.array([2.0])), (np.array([[2.0], [2.0]]), np.array([2.0, 2.0])),
       (np.array([[1.0]]), np.array([-1.0]))]
GRAD = [lambda w: 2 * (w - 2), lambda w: 8 * (w - 1), lambda w: 2 * (w + 1)]
LAM1, LAM2, ETA1, ETA2, BETA, INNER_LR = 0.5, 2.0, 0.25, 0.25, 0.5, 0.1


def client_update(k, y, lam_client):
    """K = 1 local step of 2 inner GD steps (step 0.1) from theta = y on f_k - lambda1 theta y."""
    th = y
    for _ in range(2):
        th = th - INNER_LR * (GRAD[k](th) - LAM1 * y)
    return y - ETA1 * lam_client * (y - th), th


def edge_update(members, x, lam_client, thetas):
    xi = yi = x
    for _ in range(2):                                   # R = 2
        out = [client_update(k, yi, lam_client) for k in members]
        for k, (_, th) in zip(members, out):
            thetas[k] = th
        yi = float(np.mean([y for y, _ in out]))
        xi = xi - ETA2 * LAM2 * (xi - yi)
    return xi


def test_one_parameter_round_by_hand(tmp_path):
    """Two cloud rounds, R = 2, S = 1 of the 2 edges (seed 3 draws edge 0 both times). Round 1
    by hand (lambda = lambda1 = 0.5, eta1 lambda = 0.125, eta2 lambda2 = 0.5):
    edge 0, edge round 0 from y = 0: client 0 inner gradient 2 theta - 4: theta 0.4, 0.72,
      y_0 = 0.125 * 0.72 = 0.09; client 1 (8 theta - 8): theta 0.8, 0.96, y_1 = 0.12;
      y = 0.105, x_0 = 0 + 0.5 (0.105 - 0) = 0.0525.
    edge round 1 from y = 0.105 (linear term 0.0525): client 0: theta 0.48925, 0.79665,
      y_0 = 0.105 + 0.125 (0.79665 - 0.105) = 0.19145625; client 1: theta 0.82625, 0.9705,
      y_1 = 0.2131875; y = 0.202321875, x_0 = 0.0525 + 0.5 (0.202321875 - 0.0525) = 0.1274109375.
    edge 1 (client 2, 2 theta + 2): theta -0.2, -0.36, y = -0.045, x_1 = -0.0225; then theta
      -0.23825, -0.39285: client 2 trains although edge 1 is not averaged.
    cloud: x^1 = 0.5 * 0 + 0.5 * x_0 = 0.06370546875 (edge 1's x is not used)."""
    assert [int(seeding.rng(3, "edge-sample", t).choice(2, 1, replace=False)[0])
            for t in (1, 2)] == [0, 0]
    common = {"lambda1": LAM1, "lambda2": LAM2, "eta2": ETA2, "beta": BETA, "inner_steps": 2,
              "inner_lr": INNER_LR, "edge_rounds": 2, "edges_per_round": 1}
    algos = [{"name": "pfedmac_sh", "label": "sh", **common},
             {"name": "pfedmac_sh", "label": "sh_theta", "upload": "theta", **common},
             {"name": "pfedmac_sh", "label": "sh_slides", "client_lambda": "lambda2", **common},
             {"name": "pfedmac_sh", "label": "sh_all", **{**common, "edges_per_round": "all"}}]
    res = run(tmp_path, ONE, algos, edges([[0, 1], [2]]), rounds=2,
              local={"steps": 1, "batch_size": "full", "lr": ETA1})

    thetas = [0.0, 0.0, 0.0]
    x0 = edge_update([0, 1], 0.0, LAM1, thetas)
    assert x0 == pytest.approx(0.1274109375, abs=1e-12)
    assert thetas == pytest.approx([0.79665, 0.9705, 0.0])
    edge_update([2], 0.0, LAM1, thetas)
    assert thetas[2] == pytest.approx(-0.39285)
    x1 = (1 - BETA) * 0.0 + BETA * x0
    assert x1 == pytest.approx(0.06370546875)

    def cloud(lam_client, sampled):
        x, th = 0.0, [0.0, 0.0, 0.0]
        for _ in range(2):
            xs = [edge_update([0, 1], x, lam_client, th), edge_update([2], x, lam_client, th)]
            x = (1 - BETA) * x + BETA * float(np.mean([xs[i] for i in sampled]))
        return x, th

    for label, lam_client, sampled in (("sh", LAM1, [0]), ("sh_theta", LAM1, [0]),
                                       ("sh_slides", LAM2, [0]), ("sh_all", LAM1, [0, 1])):
        x, th = cloud(lam_client, sampled)
        arrays, rows, _, _ = res[label]
        assert arrays["global"][0] == pytest.approx(x, abs=1e-6), label
        assert personal(arrays, 3)[:, 0] == pytest.approx(th, abs=1e-6), label
    # K = 1: the edge rebuilds y_j = (1 - a) y + a theta exactly from the uploaded theta
    assert res["sh_theta"][0]["global"][0] == pytest.approx(res["sh"][0]["global"][0], abs=1e-7)
    assert res["sh"][0]["global"][0] != pytest.approx(res["sh_all"][0]["global"][0], abs=1e-3)
    # edge<->cloud bytes: each round x down to both edges, x up from the sampled edge only
    assert float(res["sh"][1][-1]["bytes_edge_cloud"]) == 2 * (2 + 1) * 4
    assert float(res["sh_all"][1][-1]["bytes_edge_cloud"]) == 2 * (2 + 2) * 4


# ----------------------------------------------------------------------------- sparsity
# Separable clients: X = sqrt(3) I (d = 6), y = sqrt(3) b, so f(w) = (1/2) ||w - b||^2 (H = I,
# c = b). With inner_lr = 1 one proximal gradient step from any theta lands on
# soft(b + lambda1 y, gamma): the inner problem is solved exactly.
B = np.array([[1.0, -1.0, 0.2, -0.2, 0.4, -0.8], [0.45, -2.0, 0.05, 0.7, -0.3, 1.5],
              [-0.1, 0.2, -0.05, 0.0, 0.1, 0.15], [2.0, 1.1, -1.35, -1.4, 1.15, -1.6]])


def separable():
    s = math.sqrt(3.0)
    return [(s * np.eye(6), bk * s) for bk in B]


def sh_reference(rounds, r_edge, k_local, lam1, gamma, eta1, eta2, lam2, beta, upload="y"):
    """The three loops in numpy with exact inner solves; edges {0, 1} and {2, 3}, S = all.
    Returns the global x, the personal thetas, and every client upload's (payload, K)."""
    a = eta1 * lam1
    x, thetas, sent = np.zeros(6), np.zeros((4, 6)), []
    for _ in range(rounds):
        xs = []
        for members in ([0, 1], [2, 3]):
            xi, yi = x.copy(), x.copy()
            for _ in range(r_edge):
                rebuilt = []
                for j in members:
                    y, z = yi.copy(), np.zeros(6)
                    for _ in range(k_local):
                        th = soft(B[j] + lam1 * y, gamma)
                        y = y - a * (y - th)
                        z = (1 - a) * z + a * th
                    thetas[j] = th
                    keep = (1 - a) ** k_local
                    rebuilt.append({"y": y, "theta": keep * yi + (1 - keep) * th,
                                    "increment": keep * yi + z}[upload])
                    sent.append({"y": y, "theta": th, "increment": z}[upload])
                yi = np.mean(rebuilt, 0)
                xi = xi - eta2 * lam2 * (xi - yi)
            xs.append(xi)
        x = (1 - beta) * x + beta * np.mean(xs, 0)
    return x, thetas, sent


def best_encoding(row):
    """(bytes, name) of the smallest of dense 4 P, sparse 8 nnz, bitmap ceil(P/8) + 4 nnz."""
    p, nnz = len(row), int(np.count_nonzero(row))
    sizes = [(4 * p, "dense"), (8 * nnz, "sparse"), (-(-p // 8) + 4 * nnz, "bitmap")]
    return min(sizes, key=lambda s: s[0])   # ties: the first (dense, then sparse)


def test_l1_exact_zeros_and_sparse_uploads_through_the_hierarchy(tmp_path):
    """2 edges x 2 clients, R = 2, K = 1 or 2, 3 cloud rounds, l1 with gamma = 0.5: every personal
    model is the closed form soft(b + lambda1 y, gamma) with exact zeros where |b + lambda1 y| <=
    gamma; uploading theta (K = 1) or the increment z (any K) rebuilds y_ij exactly; uploading
    theta with K = 2 is the documented approximation (1 - a)^K y + (1 - (1 - a)^K) theta."""
    lam1, gamma, eta1, eta2, lam2, beta = 0.5, 0.5, 0.5, 0.8, 1.0, 0.9
    common = {"lambda1": lam1, "lambda2": lam2, "eta2": eta2, "beta": beta, "inner_steps": 2,
              "inner_lr": 1.0, "edge_rounds": 2, "sparsity": {"kind": "l1", "gamma": gamma}}
    algos = [{"name": "pfedmac_sh", "label": "y1", "encoding": "dense", **common},
             {"name": "pfedmac_sh", "label": "theta1", "upload": "theta", "encoding": "best",
              **common},
             {"name": "pfedmac_sh", "label": "y2", "local": {"steps": 2}, **common},
             {"name": "pfedmac_sh", "label": "inc2", "local": {"steps": 2}, "upload": "increment",
              "encoding": "sparse", **common},
             {"name": "pfedmac_sh", "label": "theta2", "local": {"steps": 2}, "upload": "theta",
              **common}]
    res = run(tmp_path, separable(), algos, edges([[0, 1], [2, 3]]), rounds=3,
              local={"steps": 1, "batch_size": "full", "lr": eta1})
    ref = {lab: sh_reference(3, 2, k, lam1, gamma, eta1, eta2, lam2, beta, up)
           for lab, k, up in (("y1", 1, "y"), ("theta1", 1, "theta"), ("y2", 2, "y"),
                              ("inc2", 2, "increment"), ("theta2", 2, "theta"))}
    for label, (x, thetas, _) in ref.items():
        arrays = res[label][0]
        np.testing.assert_allclose(arrays["global"], x, atol=1e-6, err_msg=label)
        th = personal(arrays, 4)
        np.testing.assert_allclose(th, thetas, atol=1e-6, err_msg=label)
        zero = thetas == 0
        assert (th[zero] == 0).all() and (th[~zero] != 0).all(), label
        assert 0.2 < zero.mean() < 0.8, label                      # some zeros, not all
        assert float(res[label][1][-1]["personal_sparsity"]) == pytest.approx(zero.mean())
    np.testing.assert_allclose(res["theta1"][0]["global"], res["y1"][0]["global"], atol=1e-6)
    np.testing.assert_allclose(res["inc2"][0]["global"], res["y2"][0]["global"], atol=1e-6)
    assert np.abs(res["theta2"][0]["global"] - res["y2"][0]["global"]).max() > 1e-3

    # bytes of the client uploads: y dense = 24 B; theta + its 4-byte step count under `best`;
    # the increment + step count under `sparse` (8 B per nonzero, the count is one nonzero).
    def up_bytes(label):
        return float(res[label][1][-1]["bytes_up_client_edge"])
    assert up_bytes("y1") == 3 * 2 * 4 * 24
    sent = ref["theta1"][2]
    assert up_bytes("theta1") == sum(best_encoding(s)[0] + 4 for s in sent)
    assert up_bytes("inc2") == sum(8 * np.count_nonzero(s) + 8 for s in ref["inc2"][2])
    assert up_bytes("theta1") < 0.75 * up_bytes("y1")
    # clients.csv names each upload's encoding, in the order the edges aggregated
    rows = res["theta1"][2]
    got = sorted((int(r["round"]), int(r["edge_round"]), int(r["client"]), r["encoding"],
                  float(r["up_bytes"])) for r in rows)
    want, i = [], 0
    for t in (1, 2, 3):
        for members in ([0, 1], [2, 3]):
            for r in (0, 1):
                for j in members:
                    b, enc = best_encoding(sent[i])
                    want.append((t, r, j, enc + "+dense", b + 4.0))
                    i += 1
    assert got == sorted(want)
    # client 2's model is all zeros (0 B sparse), client 3's has no zero (dense 24 B < bitmap
    # 25 B), the others are in between (bitmap): every choice happens here
    assert {w[3] for w in want} == {"bitmap+dense", "sparse+dense", "dense+dense"}




def test_logcosh_approaches_l1_through_pfedmac_sh(tmp_path):
    """One cloud round, R = 1, K = 1 from y = 0: the personal model is the minimiser of the
    smoothed inner problem (H = I), which tends to soft(b, gamma) as rho -> 0."""
    gamma, errs = 0.5, []
    algos = []
    for rho in (0.1, 0.01):
        lr = 1.0 / (1.0 + gamma / rho)                  # 1 / L of the smoothed problem
        k = int(np.ceil(np.log(1e-8) / np.log(1 - lr)))
        algos.append({"name": "pfedmac_sh", "label": f"rho{rho}", "inner_steps": k,
                      "inner_lr": lr, "sparsity": {"kind": "logcosh", "gamma": gamma, "rho": rho}})
    res = run(tmp_path, separable(), algos, edges([[0, 1], [2, 3]]), rounds=1,
              local={"steps": 1, "batch_size": "full", "lr": 0.5})
    for rho in (0.1, 0.01):
        th = personal(res[f"rho{rho}"][0], 4)
        np.testing.assert_allclose(th, smooth_solution(B, gamma, rho), atol=2e-5)
        assert (th[B != 0] != 0).all()                  # smooth: no exact zeros (b = 0: 0)
        errs.append(np.abs(th - soft(B, gamma)).max())
    assert errs[1] < 0.02 and errs[1] < errs[0] / 5


# ----------------------------------------------------------------------------- timing
# System: clients 0, 1 under edge0 and 2, 3 under edge1, n = (3, 4, 6, 9) samples; clients compute
# at 12 FLOP/s; client<->edge links: latency 0.5 s, 4 B/s; edge<->cloud: latency 0.25 s, 2 B/s.
# Model: linear, one input, no bias: P = 1, a model message is 4 B, forward = 2 FLOPs/sample.
# One local step (K = 1, full batch) of inner_steps = 2 gradients: samples = n_k x 2 x 1,
# compute = n_k x 2 x 3 x 2 FLOPs / 12 FLOP/s = n_k seconds. Transfers: 4 B on a client link
# 1 s + 0.5 s = 1.5 s; on an edge link 2 s + 0.25 s = 2.25 s. R = 2, S = 1: seed 3 draws edge0.
TRACE = TraceBuilder(4)
S, R = TRACE.send, TRACE.recv
CS, CE = TRACE.compute_start, TRACE.compute_end

SCHEDULE = [
    (0.0, "cloud", "round_start", "", 1),
    S(0.0, "cloud", "edge0"), S(0.0, "cloud", "edge1"),             # x^t to every edge
    R(2.25, "edge0", "cloud"), R(2.25, "edge1", "cloud"),
    S(2.25, "edge0", "client0"), S(2.25, "edge0", "client1"),       # edge round 0: y_i down
    S(2.25, "edge1", "client2"), S(2.25, "edge1", "client3"),
    R(3.75, "client0", "edge0"), R(3.75, "client1", "edge0"),
    R(3.75, "client2", "edge1"), R(3.75, "client3", "edge1"),
    CS(3.75, "client0"), CS(3.75, "client1"), CS(3.75, "client2"), CS(3.75, "client3"),
    CE(6.75, "client0"), S(6.75, "client0", "edge0"),               # 3.75 + 3
    CE(7.75, "client1"), S(7.75, "client1", "edge0"),               # 3.75 + 4
    R(8.25, "edge0", "client0"),                                    # 6.75 + 1.5
    R(9.25, "edge0", "client1"),
    (9.25, "edge0", "aggregate", "", 2),                            # y_0, x_0 of edge round 0
    S(9.25, "edge0", "client0"), S(9.25, "edge0", "client1"),       # edge0, edge round 1
    CE(9.75, "client2"), S(9.75, "client2", "edge1"),               # 3.75 + 6
    R(10.75, "client0", "edge0"), R(10.75, "client1", "edge0"),
    CS(10.75, "client0"), CS(10.75, "client1"),
    R(11.25, "edge1", "client2"),
    CE(12.75, "client3"), S(12.75, "client3", "edge1"),             # 3.75 + 9
    CE(13.75, "client0"), S(13.75, "client0", "edge0"),
    R(14.25, "edge1", "client3"),
    (14.25, "edge1", "aggregate", "", 2),
    S(14.25, "edge1", "client2"), S(14.25, "edge1", "client3"),     # edge1, edge round 1
    CE(14.75, "client1"), S(14.75, "client1", "edge0"),             # 10.75 + 4
    R(15.25, "edge0", "client0"),
    R(15.75, "client2", "edge1"), R(15.75, "client3", "edge1"),
    CS(15.75, "client2"), CS(15.75, "client3"),
    R(16.25, "edge0", "client1"),
    (16.25, "edge0", "aggregate", "", 2),
    S(16.25, "edge0", "cloud"),                                     # the sampled edge uploads x_0
    R(18.5, "cloud", "edge0"),                                      # 16.25 + 2.25
    (18.5, "cloud", "aggregate", "", 1),                            # one edge model
    (18.5, "cloud", "round_end", "", 1),                            # no wait for edge1
    CE(21.75, "client2"), S(21.75, "client2", "edge1"),             # edge1 finishes its work
    R(23.25, "edge1", "client2"),
    CE(24.75, "client3"), S(24.75, "client3", "edge1"),
    R(26.25, "edge1", "client3"),
    (26.25, "edge1", "aggregate", "", 2),                           # ... and uploads nothing
]


def test_cloud_round_schedule_by_hand(tmp_path):
    g = np.random.default_rng(7)
    clients = [(g.normal(size=(n, 1)), g.normal(size=n)) for n in (3, 4, 6, 9)]
    topo = {"cloud": {},
            "edges": {"count": 2, "link": {"latency_s": 0.25, "bandwidth_Bps": 2.0}},
            "clients": {"count": 4, "assignment": [[0, 1], [2, 3]], "compute_flops": 12.0,
                        "link": {"latency_s": 0.5, "bandwidth_Bps": 4.0}}}
    algos = [{"name": "pfedmac_sh", "edge_rounds": 2, "edges_per_round": 1, "inner_steps": 2,
              "inner_lr": 0.05, "lambda1": 0.1, "encoding": "dense"}]
    assert int(seeding.rng(3, "edge-sample", 1).choice(2, 1, replace=False)[0]) == 0
    res = run(tmp_path, clients, algos, topo, rounds=1,
              local={"steps": 1, "batch_size": "full", "lr": 0.1})
    _, rows, crow, result = res["pfedmac_sh"]
    got = [(float(t), n, k, p, float(v)) for t, n, k, p, v in result.trace.events]
    # events of one simulated instant may come in any order (simpy's tie order): compare each
    # instant as a multiset, and check the causal order inside an instant separately
    assert_trace(got, SCHEDULE)
    kinds = [(e[1], e[2]) for e in got]
    assert kinds.index(("cloud", "aggregate")) < kinds.index(("cloud", "round_end"))
    for edge, client in (("edge0", "client0"), ("edge1", "client2")):   # aggregate, then y down
        agg = [i for i, e in enumerate(got) if e[1:3] == (edge, "aggregate")][0]
        sends = [i for i, e in enumerate(got) if e[1:4] == (edge, "send", client)]
        assert sends[0] < agg < sends[1]
    row = rows[-1]                          # recorded when the cloud round closed, at 18.5 s
    assert float(row["sim_time_s"]) == pytest.approx(18.5)
    # edge<->cloud: x down to 2 edges + x up from the sampled one. client<->edge by 18.5 s:
    # edge0 2 rounds x (2 down + 2 up), edge1 round 0 (2 + 2) and round 1's 2 downs (sent 14.25).
    assert float(row["bytes_edge_cloud"]) == (2 + 1) * 4
    assert (float(row["bytes_up_edge_cloud"]), float(row["bytes_down_edge_cloud"])) == (4, 8)
    assert float(row["bytes_client_edge"]) == (8 + 4 + 2) * 4
    # compute time in clients.csv: n_k seconds (rows written when the round closed)
    assert {(int(r["client"]), float(r["compute_s"])) for r in crow} >= {(0, 3.0), (1, 4.0)}


# ----------------------------------------------------------------------------- errors
def test_bad_parameters_are_scenario_errors(tmp_path):
    path = make_scenario(tmp_path, name="bad", clients=separable(), seed=DROP,
                         train=DROP, topology=edges([[0, 1], [2, 3]]), model={"name": "linear"},
                         algorithms=[{"name": "pfedmac_sh", "edges_per_round": 0, "upload": "x",
                                      "client_lambda": "lambda3"}])
    with pytest.raises(hierfl.ScenarioError) as err:
        hierfl.load(path)
    msg = str(err.value)
    assert "edges_per_round" in msg and "upload" in msg and "client_lambda" in msg
