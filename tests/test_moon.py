"""MOON (Li, He, Song, CVPR 2021): the gradient of its local loss against a plain torch loop
written from the paper's equations (a tiny MLP, as a torch module and as the stacked `mlp`),
mu = 0 is FedAvg on a run, the previous models move only for clients that trained, and the
contrastive term changes the model where the representation depends on it."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from conftest import make_scenario, run_outputs
from hierfl.algorithms.base import RoundCtx, Setup
from hierfl.algorithms.moon.algorithm import MoonProgram
from hierfl.algorithms.registry import REGISTRY
from hierfl.config.schema import LocalSpec
from hierfl.learn.batches import Batch
from hierfl.learn.solver import SolveResult
from hierfl.models.functional import Layer, Model
from hierfl.models.torch_model import TorchModel

DT = torch.float64
D, H, O, B, C = 4, 6, 3, 5, 2
MU, T = 0.7, 0.5


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, O)).double()


def reference_grad(w: torch.Tensor, glob: torch.Tensor, prev: torch.Tensor,
                   b: Batch) -> torch.Tensor:
    """Per client, by hand: z = relu(W1 x + b1) under each model, l = CE + mu l_con with
    l_con = -log(e^{cos(z, z_glob)/T} / (e^{cos(z, z_glob)/T} + e^{cos(z, z_prev)/T})),
    weighted by m; torch autograd on the client's own leaf tensors."""
    def split(row):
        sizes = [H * D, H, O * H, O]
        w1, b1, w2, b2 = row.split(sizes)
        return w1.view(H, D), b1, w2.view(O, H), b2

    out = []
    for k in range(C):
        w1, b1, w2, b2 = (p.detach().clone().requires_grad_(True) for p in split(w[k]))
        x, y, m = b.x[k], b.y[k], b.m[k]
        z = torch.relu(x @ w1.T + b1)
        logits = z @ w2.T + b2
        ce = nn.functional.cross_entropy(logits, y, reduction="none")
        with torch.no_grad():
            g1, gb1, _, _ = split(glob[k])
            p1, pb1, _, _ = split(prev[k])
            zg = torch.relu(x @ g1.T + gb1)
            zp = torch.relu(x @ p1.T + pb1)
        sim_g = (z * zg).sum(1) / (z.norm(dim=1) * zg.norm(dim=1))
        sim_p = (z * zp).sum(1) / (z.norm(dim=1) * zp.norm(dim=1))
        lcon = -torch.log(torch.exp(sim_g / T) / (torch.exp(sim_g / T) + torch.exp(sim_p / T)))
        loss = (m * (ce + MU * lcon)).sum()
        grads = torch.autograd.grad(loss, [w1, b1, w2, b2])
        out.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(out)


def batch() -> tuple[Batch, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    p = (D * H + H + H * O + O)
    base = torch.randn(p, generator=g, dtype=DT) * 0.5
    glob = base.expand(C, -1).clone()
    prev = glob + 0.3 * torch.randn(C, p, generator=g, dtype=DT)
    w = glob + 0.2 * torch.randn(C, p, generator=g, dtype=DT)
    x = torch.randn(C, B, D, generator=g, dtype=DT)
    y = torch.randint(0, O, (C, B), generator=g)
    m = torch.rand(C, B, generator=g, dtype=DT)
    m[1, -1] = 0.0                                         # a padded row
    return Batch(x, y, m / m.sum(1, keepdim=True)), w, glob, prev


def test_the_gradient_is_the_papers_loss_on_a_torch_module_and_a_stacked_mlp():
    b, w, glob, prev = batch()
    want = reference_grad(w, glob, prev, b)
    torch_model = TorchModel(tiny(), (D,), "classification", "tiny", batching="loop")
    stacked = Model([Layer(D, H, True), Layer(H, O, True)], "classification", "mlp")
    for model in (torch_model, stacked, stacked.reference()):
        prog = MoonProgram(model, glob, prev=prev, mu=MU, temperature=T)
        got = prog._grad(w, b)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        # the contrastive part is not vanishing: without it the gradient is elsewhere
        assert (got - MoonProgram(model, glob, prev=prev, mu=0.0)._grad(w, b)).norm() > 1e-3
    # under no_grad (the sequential executor's) the gradient is the same
    with torch.no_grad():
        got = MoonProgram(torch_model, glob, prev=prev, mu=MU, temperature=T)._grad(w, b)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_the_gradient_matches_finite_differences():
    b, w, glob, prev = batch()
    model = Model([Layer(D, H, True), Layer(H, O, True)], "classification", "mlp")
    from hierfl.algorithms.moon.algorithm import contrastive, representation

    def objective(row: torch.Tensor) -> float:
        wk = w.clone()
        wk[0] = row
        z = representation(model, wk, b.x)
        zg, zp = representation(model, glob, b.x), representation(model, prev, b.x)
        l = model.loss(wk, b.x, b.y, b.m) + MU * (contrastive(z, zg, zp, T) * b.m).sum(1)
        return float(l[0])

    g = MoonProgram(model, glob, prev=prev, mu=MU, temperature=T)._grad(w, b)[0]
    eps = 1e-6
    for j in range(0, w.shape[1], 7):
        e = torch.zeros(w.shape[1], dtype=DT)
        e[j] = eps
        fd = (objective(w[0] + e) - objective(w[0] - e)) / (2 * eps)
        assert abs(fd - float(g[j])) < 1e-6 * max(1.0, abs(fd)), j


def test_previous_models_move_only_for_clients_that_trained():
    model = Model([Layer(D, H, True), Layer(H, O, True)], "classification", "mlp")
    cls = REGISTRY["moon"]
    algo = cls(cls.Params(), Setup(model, 3, torch.ones(3, dtype=DT), LocalSpec(steps=2, lr=0.1),
                                   seed=0))
    w0 = torch.randn(model.n_params, dtype=DT)
    algo.init(w0)
    assert torch.equal(algo.state_tensors()["clients.prev"], w0.expand(3, -1))
    clients = torch.tensor([0, 2])
    ctx = RoundCtx(1, 0, 0.1, torch.full((2,), 2))
    trained = torch.stack([w0 + 1, w0 + 2])
    res = SolveResult((trained,), torch.tensor([3, 0]), torch.tensor([3, 0]),
                      torch.zeros(2, dtype=torch.long), torch.full((2,), float("nan")))
    up = algo.finish(clients, w0, res, ctx)
    prev = algo.state_tensors()["clients.prev"]
    assert torch.equal(prev[0], w0 + 1)                   # trained: its new model
    assert torch.equal(prev[1], w0) and torch.equal(prev[2], w0)   # not selected / no step
    assert torch.equal(up.tensors[0], trained)


def _mlp_scenario(tmp_path, algos):
    return make_scenario(tmp_path, name="moon", algorithms=algos,
                         model={"name": "mlp", "hidden": [8]},
                         data={"name": "synthetic", "dim": 5, "classes": 3, "samples": 30},
                         topology={"edges": {"count": 2}, "clients": {"count": 6}},
                         train={"rounds": 3, "clients_per_round": 4,
                                "local": {"steps": 3, "batch_size": 5, "lr": 0.1}})


MOM = {"optimizer": {"name": "sgd", "momentum": 0.9}}


def test_mu_zero_is_fedavg_and_mu_one_is_not(tmp_path):
    out = run_outputs(_mlp_scenario(tmp_path, [
        {"name": "fedavg"}, {"name": "moon", "mu": 0.0},
        {"name": "moon", "label": "moon1", "mu": 1.0, "temperature": 0.5},
        {"name": "fedavg", "label": "avg_mom", "local": MOM},
        {"name": "moon", "label": "moon_mom", "mu": 0.0, "local": MOM}]))
    np.testing.assert_allclose(out.final("moon"), out.final("fedavg"), rtol=0, atol=1e-6)
    # train.local.optimizer reaches MOON's program (TermsProgram's step on its gradient)
    np.testing.assert_allclose(out.final("moon_mom"), out.final("avg_mom"), rtol=0, atol=1e-6)
    assert np.abs(out.final("avg_mom") - out.final("fedavg")).max() > 1e-4
    assert np.abs(out.final("moon1") - out.final("fedavg")).max() > 1e-4
    for a, b in zip(out.metrics["moon"], out.metrics["fedavg"]):
        for key in ("round", "bytes_up", "bytes_down", "bytes_client_edge", "bytes_edge_cloud"):
            assert a[key] == b[key], key
        # its steps are charged two gradient evaluations (the contrastive term's forwards)
        assert float(a["sim_time_s"]) >= float(b["sim_time_s"])
