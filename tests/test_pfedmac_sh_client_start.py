"""pFedMac-SH's `client_start`: in edge rounds r >= 2 a client starts ClientUpdate from the edge's
y_i (`edge`, the default) or continues from its own last y_ij (`own`). Checked against numpy:
both readings of the slides on a least-squares problem with exact inner solves."""
from __future__ import annotations

import numpy as np
import pytest

from hierfl.config.errors import ScenarioError
from test_pfedmac_sh import edges, run


def _problem():
    g = np.random.default_rng(7)
    clients = []
    for k, n in enumerate((12, 20, 16, 24)):
        x = g.normal(size=(n, 3)) + np.eye(3)[k % 3] * 1.5
        clients.append((x.astype(np.float32),
                        (x @ g.normal(size=3) + g.normal(size=n) + k).astype(np.float32)))
    hs = [2 * x.T.astype(float) @ x / len(x) for x, _ in clients]
    cs = [2 * x.T.astype(float) @ y / len(x) for x, y in clients]
    low = min(np.linalg.eigvalsh(h).min() for h in hs)
    top = max(np.linalg.eigvalsh(h).max() for h in hs)
    inner = {"inner_steps": int(np.ceil(np.log(1e-10) / np.log(1 - low / top))),
             "inner_lr": float(1 / top)}
    return clients, hs, cs, float(0.4 * low), inner


def _reference(hs, cs, groups, lam1, eta1, k_local, r_edge, eta2lam2, beta, own, rounds):
    """The three loops in numpy, uniform means, every edge reporting."""
    x = np.zeros(3)
    for _ in range(rounds):
        xs = []
        for grp in groups:
            xi, yi = x.copy(), x.copy()
            mine = {j: None for j in grp}
            for r in range(r_edge):
                ys = []
                for j in grp:
                    y = mine[j] if (own and r > 0) else yi.copy()
                    for _ in range(k_local):
                        theta = np.linalg.solve(hs[j], cs[j] + lam1 * y)
                        y = y - eta1 * lam1 * (y - theta)
                    mine[j] = y
                    ys.append(y)
                yi = np.mean(ys, 0)
                xi = xi - eta2lam2 * (xi - yi)
            xs.append(xi)
        x = (1 - beta) * x + beta * np.mean(xs, 0)
    return x


@pytest.mark.parametrize("r_edge", [1, 2])
def test_edge_and_own_coincide_for_one_edge_round_and_differ_for_two(tmp_path, r_edge):
    clients, hs, cs, lam1, inner = _problem()
    groups = [[0, 1], [2, 3]]
    common = {"lambda1": lam1, "lambda2": 0.5, "eta2": 1.2, "beta": 0.8,
              "edge_rounds": r_edge, **inner}
    algos = [{"name": "pfedmac_sh", "label": "edge", **common},
             {"name": "pfedmac_sh", "label": "own", "client_start": "own", **common}]
    res = run(tmp_path, clients, algos, edges(groups), rounds=2,
              local={"steps": 1, "batch_size": "full", "lr": 0.5})
    for label, own in (("edge", False), ("own", True)):
        want = _reference(hs, cs, groups, lam1, 0.5, 1, r_edge, 0.6, 0.8, own, rounds=2)
        np.testing.assert_allclose(res[label][0]["global"], want, rtol=2e-4, atol=1e-5)
    a, b = res["edge"][0]["global"], res["own"][0]["global"]
    rel = np.linalg.norm(a - b) / np.linalg.norm(a)
    if r_edge == 1:
        assert rel == 0.0                                 # the same arithmetic, bit for bit
    else:
        assert rel > 1e-3                                 # the two readings differ
        # and numpy's two readings differ by the same amount
        ref = [_reference(hs, cs, groups, lam1, 0.5, 1, 2, 0.6, 0.8, o, 2) for o in (0, 1)]
        ref_rel = np.linalg.norm(ref[0] - ref[1]) / np.linalg.norm(ref[0])
        assert rel == pytest.approx(ref_rel, rel=0.05)


def test_own_needs_the_y_upload(tmp_path):
    clients, _, _, lam1, inner = _problem()
    with pytest.raises(ScenarioError) as err:
        run(tmp_path, clients, [{"name": "pfedmac_sh", "client_start": "own",
                                 "upload": "theta", **inner}],
            edges([[0, 1], [2, 3]]), rounds=1, local={"steps": 1, "batch_size": "full",
                                                      "lr": 0.5})
    assert "client_start" in str(err.value.problems[0])
