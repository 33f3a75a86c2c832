"""FedBN (hierfl/algorithms/fedbn): BatchNorm layers (parameters and running statistics) stay
with each client. Checked against a plain-torch FedBN (one module per client keeps its own
BatchNorm layers; the other layers are loaded from the global model each round; the server
averages), and the paper's identity: with no BatchNorm layer FedBN is FedAvg."""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from hierfl.algorithms.base import RoundCtx, Setup
from hierfl.algorithms.registry import REGISTRY
from hierfl.config.schema import LocalSpec
from hierfl.exec.carry import ClientCarry
from hierfl.exec.local import BatchedExecutor
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.models.torch_model import TorchModel, init_values

from conftest import make_scenario, read_csv
from hierfl.cli import main

COUNTS = np.array([12, 18, 10])
LR, K, B, SEED = 0.1, 4, 4, 7


def _module():
    return nn.Sequential(nn.Flatten(), nn.Linear(6, 5, bias=False), nn.BatchNorm1d(5),
                         nn.ReLU(), nn.Linear(5, 3)).double()


def test_fedbn_equals_a_plain_torch_fedbn_over_three_rounds():
    g = torch.Generator().manual_seed(0)
    offsets = np.concatenate([[0], np.cumsum(COUNTS)])
    n = int(offsets[-1])
    x = torch.randn(n, 6, generator=g, dtype=torch.float64) * \
        torch.repeat_interleave(torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64),
                                torch.from_numpy(COUNTS)).unsqueeze(1)       # feature shift
    y = torch.randint(0, 3, (n,), generator=g)
    base = _module()
    model = TorchModel(copy.deepcopy(base), (6,), "classification", "bn")
    w0 = init_values(base, torch.Generator().manual_seed(1)).double()
    algo = REGISTRY["fedbn"](REGISTRY["fedbn"].Params(),
                             Setup(model, 3, torch.from_numpy(COUNTS).double(), LocalSpec(), SEED))
    algo.init(w0)
    carry = ClientCarry(model, 3, local_norm=True)
    bn = model.norm_mask()
    assert int(bn.sum()) == 10                                   # gamma, beta of 5 channels
    refs = [copy.deepcopy(base) for _ in range(3)]
    for m in refs:
        nn.utils.vector_to_parameters(w0.clone(), m.parameters())
    clients = np.arange(3)
    for t in (1, 2, 3):
        plan = minibatch_plan(offsets, clients, B, np.full(3, K), SEED, t, 0, x, y)
        start = algo.global_model().clone()
        prog = algo.program(torch.from_numpy(clients), start, RoundCtx(t, 0, LR, torch.zeros(0)))
        import dataclasses
        prog = dataclasses.replace(prog, **carry.program_fields(clients, prog.start, SEED, t, 0))
        res = BatchedExecutor().run(prog, plan, full_plan(offsets, clients, x, y).at(0),
                                    torch.full((3,), K), LR, None, 5, measure=False)
        carry.finish(clients, res.state, prog, None)
        up = algo.finish(torch.from_numpy(clients), start, res, RoundCtx(t, 0, LR, torch.zeros(0)))
        algo.aggregate(torch.from_numpy(clients), up, RoundCtx(t, 0, LR, torch.zeros(0)))
        # plain torch: each client's module keeps its BatchNorm layer, takes the rest from w^t
        outs = []
        for k, m in enumerate(refs):
            with torch.no_grad():
                row = nn.utils.parameters_to_vector(m.parameters())
                row[~bn] = start[~bn]
                nn.utils.vector_to_parameters(row, m.parameters())
            m.train()
            opt = torch.optim.SGD(m.parameters(), lr=LR)
            for s in range(K):
                real = int((plan.weights[k, s] != 0).sum())      # the padding is not a row
                r, wts = plan.rows[k, s, :real], plan.weights[k, s, :real]
                loss = (nn.functional.cross_entropy(m(x[r]), y[r], reduction="none") * wts).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            outs.append(nn.utils.parameters_to_vector(m.parameters()).detach())
        outs = torch.stack(outs)
        mean = (torch.from_numpy(COUNTS).double() / COUNTS.sum()) @ outs
        torch.testing.assert_close(algo.global_model(), mean, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(algo.state.clients.bn, outs[:, bn], rtol=1e-10, atol=1e-12)
        stats = torch.stack([torch.cat([m[2].running_mean, m[2].running_var,
                                        m[2].num_batches_tracked.double().view(1)])
                             for m in refs])
        torch.testing.assert_close(carry.clients, stats, rtol=1e-10, atol=1e-12)
    personal = algo.personal_models()
    assert torch.equal(personal[:, ~bn], algo.global_model()[~bn].expand(3, -1))
    assert not torch.equal(personal[0, bn], personal[1, bn])     # the layers stayed local


def test_without_batchnorm_fedbn_is_fedavg(tmp_path):
    path = make_scenario(tmp_path, algorithms=[{"name": "fedavg"}, {"name": "fedbn"}],
                         train={"rounds": 3, "clients_per_round": "all",
                                "local": {"steps": 3, "batch_size": 5, "lr": 0.1}})
    assert main(["run", path, "--out", str(tmp_path / "o"), "--no-report"]) == 0
    a = read_csv(tmp_path / "o" / "fedavg" / "metrics.csv")
    b = read_csv(tmp_path / "o" / "fedbn" / "metrics.csv")
    for col in ("train_loss", "test_acc", "bytes_up", "bytes_down", "sim_time_s"):
        assert [r[col] for r in a] == [r[col] for r in b], col
