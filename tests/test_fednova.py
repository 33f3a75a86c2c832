"""FedNova (Wang et al., NeurIPS 2020) through the simulator on the heterogeneous least-squares
problem (tests/lsq_problem.py): unequal local steps (stragglers keep partial work), against a
numpy recursion of the paper's normalised averaging, with plain SGD and with momentum; equal to
FedAvg with equal steps; its optimizer refusals; a client with no step."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import make_scenario, run_outputs
from lsq_problem import COUNTS, hessians, lsq_data, lsq_scenario

STEPS, LR = 6, 0.02
STRAG = {"fraction": 0.75, "drop": "never"}


def local_sgd(w, h, b, steps: int, rho: float) -> np.ndarray:
    """torch.optim.SGD with momentum rho (buffer = the first gradient), full batch."""
    buf = None
    for _ in range(steps):
        g = h @ w - b
        buf = g if buf is None or not rho else rho * buf + g
        w = w - LR * buf
    return w


def norm_a(tau: int, rho: float) -> float:
    return float(sum((1 - rho ** j) / (1 - rho) for j in range(1, tau + 1))) if rho else tau


def fednova_recursion(data, taus: list[list[int]], rho: float) -> np.ndarray:
    """x_{t+1} = x_t - tau_eff sum p_i d_i, d_i = (x_t - x_i) / ||a_i||_1,
    tau_eff = sum p_i ||a_i||_1 (every client every round, p_i = n_i / n)."""
    hb = hessians(data)
    p = np.array(COUNTS, float) / sum(COUNTS)
    x = np.zeros(len(hb[0][1]))
    for steps in taus:
        a = np.array([norm_a(s, rho) for s in steps])
        d = [(x - local_sgd(x, h, b, s, rho)) / ak for (h, b), s, ak in zip(hb, steps, a)]
        x = x - (p @ a) * sum(pk * dk for pk, dk in zip(p, d))
    return x


def steps_of(out, label: str, rounds: int) -> list[list[int]]:
    rows = out.clients[label]
    return [[int(r["steps"]) for r in sorted((r for r in rows if int(r["round"]) == t),
                                             key=lambda r: int(r["client"]))]
            for t in range(1, rounds + 1)]


def test_fednova_normalises_unequal_steps(tmp_path):
    data = lsq_data()
    mom = {"optimizer": {"name": "sgd", "momentum": 0.9}}
    algos = [{"name": "fednova", "stragglers": STRAG},
             {"name": "fednova", "label": "nova_mom", "stragglers": STRAG, "local": mom},
             {"name": "fedavg", "stragglers": STRAG}]
    rounds = 3
    out = run_outputs(lsq_scenario(tmp_path, data, algos, steps=STEPS, lr=LR, rounds=rounds))
    taus = steps_of(out, "fednova", rounds)
    assert taus == steps_of(out, "nova_mom", rounds)
    assert len({s for t in taus for s in t}) > 2            # the steps really are unequal
    plain = fednova_recursion(data, taus, 0.0)
    momentum = fednova_recursion(data, taus, 0.9)
    np.testing.assert_allclose(out.final("fednova"), plain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.final("nova_mom"), momentum, rtol=1e-5, atol=1e-6)
    # normalising matters here: FedAvg of the same partial work is elsewhere
    assert np.abs(out.final("fedavg") - plain).max() > 1e-2
    assert np.abs(momentum - plain).max() > 1e-2


def test_equal_steps_and_plain_sgd_is_fedavg(tmp_path):
    data = lsq_data()
    out = run_outputs(lsq_scenario(tmp_path, data, [{"name": "fedavg"}, {"name": "fednova"}],
                                   steps=STEPS, lr=LR, rounds=3, edges=2))
    np.testing.assert_allclose(out.final("fednova"), out.final("fedavg"), rtol=0, atol=1e-6)
    assert np.abs(out.final("fedavg")).max() > 0.1
    for a, b in zip(out.metrics["fednova"], out.metrics["fedavg"]):
        assert float(a["sim_time_s"]) >= float(b["sim_time_s"])    # 4 bytes more to send
        # the upload is w_i and the 4-byte ||a_i||_1: 4 bytes per client more, crossing the
        # client-edge and the edge-cloud link
        assert float(a["bytes_up"]) - float(b["bytes_up"]) == 4 * 2 * 4 * int(a["round"])


@pytest.mark.parametrize("optimizer, key", [
    ({"name": "adam"}, "name"), ({"name": "adamw"}, "name"),
    ({"name": "sgd", "momentum": 0.9, "weight_decay": 1e-4}, "weight_decay"),
    ({"name": "sgd", "momentum": 0.9, "nesterov": True}, "nesterov"),
    ({"name": "sgd", "momentum": 0.9, "dampening": 0.1}, "dampening")])
def test_optimizers_without_a_normalising_vector_are_refused(tmp_path, optimizer, key):
    path = make_scenario(tmp_path, algorithms=[{"name": "fednova",
                                                "local": {"optimizer": optimizer}}])
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path], capture_output=True,
                       text=True)
    assert r.returncode == 2, r.stderr
    assert f"algorithms[0].local.optimizer.{key}" in r.stderr and "fednova" in r.stderr
    assert "Traceback" not in r.stderr


def test_momentum_is_accepted(tmp_path):
    path = make_scenario(tmp_path, algorithms=[{"name": "fednova"}],
                         **{"train.local.optimizer": {"name": "sgd", "momentum": 0.5}})
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


def test_a_client_without_a_step_has_zero_weight():
    """tau = (0, 2): client 0 uploads x_0 = x_t with ||a||_1 = 0 and is left out: the model is
    client 1's alone, x_t - 2 (x_t - x_1)/2 = x_1; with no step anywhere x stays."""
    from hierfl.algorithms.base import RoundCtx, Setup, Upload
    from hierfl.algorithms.registry import REGISTRY
    from hierfl.config.schema import LocalSpec
    from hierfl.models.functional import Layer, Model

    model = Model([Layer(1, 1, False)], "regression", "linear")
    cls = REGISTRY["fednova"]
    algo = cls(cls.Params(), Setup(model, 2, torch.tensor([1.0, 3.0], dtype=torch.float64),
                                   LocalSpec(steps=2, lr=0.1), seed=0))
    algo.init(torch.full((1,), 0.5, dtype=torch.float64))
    ctx = RoundCtx(1, 0, 0.1, torch.full((2,), 2))
    clients = torch.tensor([0, 1])
    x = torch.tensor([[0.5], [1.25]], dtype=torch.float64)
    a = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    algo.aggregate(clients, Upload((x, a), header=1), ctx)
    torch.testing.assert_close(algo.global_model(), torch.tensor([1.25], dtype=torch.float64))
    algo.aggregate(clients, Upload((x, torch.zeros(2, 1, dtype=torch.float64)), header=1), ctx)
    torch.testing.assert_close(algo.global_model(), torch.tensor([1.25], dtype=torch.float64))
