"""FedAvgM (Hsu, Qi, Brown 2019) through the simulator on the heterogeneous least-squares
problem (tests/lsq_problem.py), against a numpy recursion of the paper's equations, and the
FedAvg / HierFAVG special case (beta = 0, eta = 1)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import run_outputs
from lsq_problem import fedavg_round, hessians, lsq_data, lsq_scenario

STEPS, LR = 4, 0.02


def fedavgm_recursion(data, rounds: int, *, server_lr: float, server_momentum: float,
                      edge_rounds: int = 1) -> np.ndarray:
    """Delta_t = w_t - sum p_k w_k; v_t = beta v_{t-1} + Delta_t; w_{t+1} = w_t - eta v_t."""
    hb = hessians(data)
    w = np.zeros(len(hb[0][1]))
    v = np.zeros_like(w)
    for _ in range(rounds):
        y = w
        for _ in range(edge_rounds):
            y = fedavg_round(hb, y, STEPS, LR)
        v = server_momentum * v + (w - y)
        w = w - server_lr * v
    return w


@pytest.mark.parametrize("edges", [1, 2])
def test_fedavgm_follows_the_papers_recursion(tmp_path, edges):
    data = lsq_data()
    algos = [{"name": "fedavgm"},                       # defaults: eta 1, beta 0.9
             {"name": "fedavgm", "label": "slow", "server_lr": 0.5, "server_momentum": 0.7},
             {"name": "fedavgm", "label": "edge3", "server_momentum": 0.5, "edge_rounds": 3}]
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=3,
                                   edges=edges, name=f"m{edges}"))
    wants = {"fedavgm": fedavgm_recursion(data, 3, server_lr=1.0, server_momentum=0.9),
             "slow": fedavgm_recursion(data, 3, server_lr=0.5, server_momentum=0.7)}
    if edges == 1:       # one edge: its edge rounds are FedAvg rounds over every client
        wants["edge3"] = fedavgm_recursion(data, 3, server_lr=1.0, server_momentum=0.5,
                                           edge_rounds=3)
    for label, want in wants.items():
        np.testing.assert_allclose(out.final(label), want, rtol=1e-5, atol=1e-6, err_msg=label)
    # momentum and eta matter: the comparison is not vacuous
    plain = fedavgm_recursion(data, 3, server_lr=1.0, server_momentum=0.0)
    assert np.abs(wants["fedavgm"] - plain).max() > 1e-2
    assert np.abs(wants["fedavgm"] - wants["slow"]).max() > 1e-2


def test_no_momentum_and_unit_step_is_fedavg(tmp_path):
    """beta = 0, eta = 1: w_{t+1} = w_t - (w_t - mean) = mean. FedAvgM's messages are
    HierFAVG's (edges average, the cloud steps): its times and bytes equal HierFAVG's to the
    bit, its models FedAvg's and HierFAVG's to 1e-6 (float64 arithmetic, float32 state)."""
    data = lsq_data()
    algos = [{"name": "fedavg"}, {"name": "hierfavg"},
             {"name": "fedavgm", "server_lr": 1.0, "server_momentum": 0.0}]
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=4,
                                   edges=2, name="ident"))
    np.testing.assert_allclose(out.final("fedavgm"), out.final("fedavg"), rtol=0, atol=1e-6)
    np.testing.assert_allclose(out.final("fedavgm"), out.final("hierfavg"), rtol=0, atol=1e-6)
    assert np.abs(out.final("fedavg")).max() > 0.1
    for a, b in zip(out.metrics["fedavgm"], out.metrics["hierfavg"]):
        for key in ("round", "sim_time_s", "bytes_up", "bytes_down", "bytes_client_edge",
                    "bytes_edge_cloud"):
            assert a[key] == b[key], key
        assert abs(float(a["train_loss"]) - float(b["train_loss"])) <= 1e-6 * max(
            1.0, abs(float(b["train_loss"])))
