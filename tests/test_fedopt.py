"""FedOpt (Reddi et al., ICLR 2021, Alg. 2) through the simulator on a heterogeneous least-squares
problem (tests/lsq_problem.py), against a numpy recursion of the paper's equations, and the
FedAvg special case."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import run_outputs
from lsq_problem import fedavg_round, hessians, lsq_data, lsq_scenario

STEPS, LR = 4, 0.02


def fedopt_recursion(data, variant: str, rounds: int, *, server_lr: float, beta1: float,
                     beta2: float, tau: float, v0: float, edge_rounds: int = 1) -> np.ndarray:
    hb = hessians(data)
    x = np.zeros(len(hb[0][1]))
    m, v = np.zeros_like(x), np.full_like(x, v0)
    for _ in range(rounds):
        y = x
        for _ in range(edge_rounds):           # one edge: its rounds are FedAvg rounds
            y = fedavg_round(hb, y, STEPS, LR)
        d = y - x
        m = beta1 * m + (1 - beta1) * d
        if variant == "fedadam":
            v = beta2 * v + (1 - beta2) * d * d
        elif variant == "fedyogi":
            v = v - (1 - beta2) * d * d * np.sign(v - d * d)
        else:
            v = v + d * d
        x = x + server_lr * m / (np.sqrt(v) + tau)
    return x


HYPER = {"server_lr": 0.3, "beta1": 0.9, "beta2": 0.99, "tau": 0.01}


def test_fedopt_follows_the_papers_recursion(tmp_path):
    data = lsq_data()
    algos = [{"name": n, **HYPER} for n in ("fedadam", "fedyogi")] + \
        [{"name": "fedadagrad", **{k: v for k, v in HYPER.items() if k != "beta2"}},
         {"name": "fedadam", "label": "adam_v0", **HYPER, "v0": 0.5}]
    rounds = 6
    # two edges, one edge round: the cloud's Delta is the n-weighted mean over all clients
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=rounds,
                                   edges=2))
    finals = {}
    for label, variant, v0 in (("fedadam", "fedadam", 1e-4), ("fedyogi", "fedyogi", 1e-4),
                               ("fedadagrad", "fedadagrad", 1e-4), ("adam_v0", "fedadam", 0.5)):
        want = fedopt_recursion(data, variant, rounds, v0=v0, **HYPER)
        np.testing.assert_allclose(out.final(label), want, rtol=1e-5, atol=1e-6, err_msg=label)
        finals[label] = want
    # the variants and v0 matter (the comparison above is not vacuous)
    assert np.abs(finals["fedadam"] - finals["fedyogi"]).max() > 1e-3
    assert np.abs(finals["fedadam"] - finals["fedadagrad"]).max() > 1e-3
    assert np.abs(finals["fedadam"] - finals["adam_v0"]).max() > 1e-2


def test_edge_rounds_average_at_the_edge_before_the_server_step(tmp_path):
    data = lsq_data()
    path = lsq_scenario(tmp_path, data, [{"name": "fedyogi", **HYPER, "edge_rounds": 3}],
                        steps=STEPS, lr=LR, rounds=3, name="edge")
    want = fedopt_recursion(data, "fedyogi", 3, v0=1e-4, edge_rounds=3, **HYPER)
    np.testing.assert_allclose(run_outputs(path).final("fedyogi"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("edges", [1, 2])
def test_no_momentum_and_a_large_v0_is_fedavg_in_the_first_round(tmp_path, edges):
    """beta1 = 0, tau = 0, v0 = 1e12, eta = 1e6 (eta / sqrt(v0) = 1): x_1 = x_0 + Delta_0,
    FedAvg's model, to the size of Delta^2 / v0. fedadam keeps v = v0 (1 - 1e-9) with beta2 =
    1 - 1e-9 (beta2 1, which kept v0 exactly, is refused: v would never move); fedyogi and
    fedadagrad change v by Delta^2."""
    data = lsq_data()
    same = {"server_lr": 1e6, "beta1": 0.0, "tau": 0.0, "v0": 1e12}
    algos = [{"name": "fedavg"}, {"name": "fedadam", **same, "beta2": 1 - 1e-9},
             {"name": "fedyogi", **same}, {"name": "fedadagrad", **same}]
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=1,
                                   edges=edges, name=f"avg{edges}"))
    fa = out.final("fedavg")
    np.testing.assert_allclose(fa, fedavg_round(hessians(data), np.zeros(3), STEPS, LR),
                               rtol=1e-5)
    assert np.abs(fa).max() > 0.1
    for label in ("fedadam", "fedyogi", "fedadagrad"):
        np.testing.assert_allclose(out.final(label), fa, rtol=1e-5, atol=1e-7, err_msg=label)


@pytest.mark.parametrize("name, keys, needle", [
    ("fedadam", {"tau": 0.0}, "algorithms[0].tau = 0.0: must be > 0"),
    ("fedyogi", {"tau": 0}, "algorithms[0].tau = 0: must be > 0"),
    ("fedadagrad", {"tau": 0.0, "v0": 0.0}, "algorithms[0].tau = 0.0: must be > 0"),
    ("fedadam", {"beta2": 1.0}, "algorithms[0].beta2 = 1.0: must be in [0, 1)"),
    ("fedyogi", {"beta2": 1}, "algorithms[0].beta2 = 1: must be in [0, 1)"),
])
def test_a_zero_tau_or_a_unit_beta2_is_refused(tmp_path, capsys, name, keys, needle):
    """tau 0 with v0 0 (its default, tau^2) gave 0 / 0 = NaN where a pseudo-gradient
    coordinate was 0; beta2 1 never moved v. Both were accepted; tau 0 with v0 > 0 stays."""
    from conftest import make_scenario
    from hierfl import cli
    path = make_scenario(tmp_path, algorithms=[{"name": name, **keys}])
    assert cli.main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    ok = make_scenario(tmp_path, name="ok", algorithms=[{"name": name, "tau": 0.0, "v0": 1.0}])
    assert cli.main(["validate", ok]) == 0, capsys.readouterr().err
