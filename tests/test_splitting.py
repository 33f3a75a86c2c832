"""FedSplit, FedDR and FedPD through the simulator on a heterogeneous least-squares problem
(tests/lsq_problem.py): numpy recursions of the papers' equations (the prox steps solved by the
same full-batch GD steps), the exact minimiser of the unweighted sum of the clients' losses where
FedAvg stays biased, partial participation, FedPD's random communication and its bytes."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from hierfl.config.errors import ScenarioError
from hierfl.seeding import rng

from conftest import run_outputs
from lsq_problem import (COUNTS, D, fedavg_round, hessians, local_gd, lsq_data, lsq_scenario,
                         minimiser)

N = len(COUNTS)
STEPS, LR = 4, 0.02
SEED = 1                       # lsq_scenario's


def everyone(rounds: int) -> list[list[int]]:
    return [list(range(N))] * rounds


def fedsplit(hb, s: float, sampled: list[list[int]], steps: int, lr: float) -> np.ndarray:
    z, x = np.zeros((N, D)), np.zeros(D)
    for sel in sampled:
        for k in sel:
            v = 2 * x - z[k]
            half = local_gd(v, *hb[k], steps, lr, mu=1 / s, anchor=v)
            z[k] = z[k] + 2 * (half - x)
        x = z.mean(0)
    return x


def feddr(hb, alpha: float, eta: float, sampled: list[list[int]], steps: int,
          lr: float) -> np.ndarray:
    y, xs, xbar = np.zeros((N, D)), np.zeros((N, D)), np.zeros(D)
    for sel in sampled:
        for k in sel:
            y[k] = y[k] + alpha * (xbar - xs[k])
            xs[k] = local_gd(y[k], *hb[k], steps, lr, mu=1 / eta, anchor=y[k])
        xbar = (2 * xs - y).mean(0)
    return xbar


def fedpd(hb, eta: float, comm: list[bool], steps: int, lr: float) -> np.ndarray:
    """Every client every round; comm[t - 1]: whether round t communicates."""
    lam, x0, x0bar = np.zeros((N, D)), np.zeros((N, D)), np.zeros(D)
    synced = True
    for c in comm:
        for k in range(N):
            anchor = x0bar if synced else x0[k]
            x = local_gd(anchor, *hb[k], steps, lr, mu=1 / eta, anchor=anchor, linear=lam[k])
            lam[k] = lam[k] + (x - anchor) / eta
            x0[k] = x + eta * lam[k]
        synced = c
        if c:
            x0bar = x0.mean(0)
    return x0bar


def coins(p: float, rounds: int) -> list[bool]:
    """FedPD's shared draw per round (hierfl/algorithms/fedpd.py: seeding.rng)."""
    return [bool(rng(SEED, "fedpd-comm", t).random() < p) for t in range(1, rounds + 1)]


def test_the_recursions_of_the_papers(tmp_path):
    data, rounds = lsq_data(), 5
    algos = [{"name": "fedsplit", "step_size": 0.5},
             {"name": "feddr", "alpha": 0.7, "eta": 0.3},
             {"name": "fedpd", "eta": 0.3}]
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=rounds,
                                   edges=2))
    hb = hessians(data)
    want = {"fedsplit": fedsplit(hb, 0.5, everyone(rounds), STEPS, LR),
            "feddr": feddr(hb, 0.7, 0.3, everyone(rounds), STEPS, LR),
            "fedpd": fedpd(hb, 0.3, [True] * rounds, STEPS, LR)}
    for label, w in want.items():
        np.testing.assert_allclose(out.final(label), w, rtol=1e-5, atol=1e-6, err_msg=label)
    # they are three different methods, and not FedAvg
    avg = np.zeros(D)
    for _ in range(rounds):
        avg = fedavg_round(hb, avg, STEPS, LR)
    finals = list(want.values()) + [avg]
    assert min(np.abs(a - b).max() for i, a in enumerate(finals) for b in finals[i + 1:]) > 1e-3


def test_splitting_reaches_the_exact_minimiser_where_fedavg_is_biased(tmp_path):
    """60 local GD steps of 0.08 solve each prox to ~1e-7 here; FedSplit, FedDR and FedPD then
    converge to argmin (1/N) sum_k F_k, while FedAvg with the same local work stops at its own
    fixed point, far from it and from the sample-weighted optimum."""
    data = lsq_data()
    steps, lr, rounds = 60, 0.08, 60
    algos = [{"name": "fedavg"}, {"name": "fedsplit", "step_size": 0.5},
             {"name": "feddr", "alpha": 1.0, "eta": 0.3}, {"name": "fedpd", "eta": 0.3}]
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=steps, lr=lr, rounds=rounds,
                                   eval_every=1000))
    uniform = minimiser(data, np.full(N, 1 / N))
    weighted = minimiser(data, np.array(COUNTS, float))
    assert np.linalg.norm(uniform - weighted) > 0.25
    for label in ("fedsplit", "feddr", "fedpd"):
        np.testing.assert_allclose(out.final(label), uniform, rtol=0, atol=1e-4, err_msg=label)
    fa = out.final("fedavg")
    assert np.linalg.norm(fa - uniform) > 0.25 and np.linalg.norm(fa - weighted) > 0.1


def _sampled(out, label: str) -> list[list[int]]:
    per = defaultdict(list)
    for r in out.clients[label]:
        per[int(r["round"])].append(int(r["client"]))
    return [sorted(per[t]) for t in sorted(per)]


def test_partial_participation_updates_only_the_sampled_clients(tmp_path):
    data, rounds = lsq_data(), 6
    path = lsq_scenario(tmp_path, data, [{"name": "fedsplit", "step_size": 0.5},
                                         {"name": "feddr", "alpha": 0.7, "eta": 0.3}],
                        steps=STEPS, lr=LR, rounds=rounds, name="partial", per_round=2)
    out = run_outputs(path)
    hb = hessians(data)
    sampled = _sampled(out, "feddr")
    assert sampled == _sampled(out, "fedsplit") and all(len(s) == 2 for s in sampled)
    assert len({tuple(s) for s in sampled}) > 1
    np.testing.assert_allclose(out.final("fedsplit"), fedsplit(hb, 0.5, sampled, STEPS, LR),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.final("feddr"), feddr(hb, 0.7, 0.3, sampled, STEPS, LR),
                               rtol=1e-5, atol=1e-6)
    # the rule matters: updating every client every round gives another model
    assert np.abs(feddr(hb, 0.7, 0.3, everyone(rounds), STEPS, LR)
                  - out.final("feddr")).max() > 1e-3


def test_fedpd_communicates_with_probability_p(tmp_path):
    """p_comm = 0.4: the seeded shared coin decides each round; a silent round uploads nothing
    (0 bytes, sparse) and leaves the global model as it was; the clients go on from their own
    x_{0,i}^+ until the next communication."""
    data, rounds = lsq_data(), 8
    comm = coins(0.4, rounds)
    assert 0 < sum(comm) < rounds and not all(comm[:2])       # both kinds of round occur
    out = run_outputs(lsq_scenario(tmp_path, data, [{"name": "fedpd", "eta": 0.3,
                                                     "p_comm": 0.4}],
                                   steps=STEPS, lr=LR, rounds=rounds, name="pd"))
    np.testing.assert_allclose(out.final("fedpd"), fedpd(hessians(data), 0.3, comm, STEPS, LR),
                               rtol=1e-5, atol=1e-6)
    per_round = defaultdict(list)
    for r in out.clients["fedpd"]:
        per_round[int(r["round"])].append((float(r["up_bytes"]), r["encoding"]))
    for t, c in enumerate(comm, 1):
        want = (4.0 * D, "dense") if c else (0.0, "sparse")
        assert per_round[t] == [want] * N, t
    loss = [float(r["train_loss"]) for r in out.metrics["fedpd"]]
    for t, c in enumerate(comm, 1):
        assert (loss[t] != loss[t - 1]) == c, t
    # and the draws are not a no-op: communicating every round is another model
    assert np.abs(fedpd(hessians(data), 0.3, [True] * rounds, STEPS, LR)
                  - out.final("fedpd")).max() > 1e-3


@pytest.mark.parametrize("entry, key", [
    ({"name": "fedsplit", "edge_rounds": 2}, "edge_rounds"),
    ({"name": "feddr", "alpha": 2.0}, "alpha"),
    ({"name": "fedpd", "p_comm": 0.0}, "p_comm"),
    ({"name": "fedadam", "beta2": 1.5}, "beta2"),
    ({"name": "fedadagrad", "beta2": 0.9}, "beta2"),
    ({"name": "fedyogi", "beta1": 1.0}, "beta1"),     # m stays 0: the model never moved
    ({"name": "fedadam", "tier_rounds": [1, 0]}, "tier_rounds"),  # was named algorithms[0]
    ({"name": "hierfavg", "tier_rounds": [0]}, "tier_rounds"),
])
def test_bad_hyperparameters_name_their_key(tmp_path, entry, key):
    import hierfl
    path = lsq_scenario(tmp_path, lsq_data(), [entry], steps=1, lr=0.1, rounds=1, name="bad")
    with pytest.raises(ScenarioError) as exc:
        hierfl.load(path)
    assert any(p.key.endswith(key) for p in exc.value.problems), exc.value.problems
