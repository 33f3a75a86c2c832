"""train.local.optimizer (learn/optim.py): the batched optimizers equal torch.optim run client by
client on the same minibatches (heterogeneous clients, budgets and data; FedProx's prox term's
gradient added before the step); plain SGD keeps today's path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hierfl.exec.local import BatchedExecutor
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.learn.optim import SGD, Adam
from hierfl.learn.solver import TermsProgram
from hierfl.learn.terms import L1, Prox
from hierfl.models.functional import Layer, Model

CONFIGS = {
    "sgd-momentum": (SGD(momentum=0.9), lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9)),
    "sgd-nesterov": (SGD(momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.8, nesterov=True)),
    "sgd-dampening": (SGD(momentum=0.7, dampening=0.3),
                      lambda p: torch.optim.SGD(p, lr=LR, momentum=0.7, dampening=0.3)),
    "sgd-weight-decay": (SGD(weight_decay=0.1),
                         lambda p: torch.optim.SGD(p, lr=LR, weight_decay=0.1)),
    "sgd-all": (SGD(momentum=0.5, dampening=0.2, weight_decay=0.05),
                lambda p: torch.optim.SGD(p, lr=LR, momentum=0.5, dampening=0.2,
                                          weight_decay=0.05)),
    "adam": (Adam(), lambda p: torch.optim.Adam(p, lr=LR)),
    "adam-wd": (Adam(beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
                lambda p: torch.optim.Adam(p, lr=LR, betas=(0.8, 0.99), eps=1e-6,
                                           weight_decay=0.1)),
    "adamw": (Adam(weight_decay=0.05, decoupled=True),
              lambda p: torch.optim.AdamW(p, lr=LR, weight_decay=0.05)),
    "amsgrad": (Adam(amsgrad=True), lambda p: torch.optim.Adam(p, lr=LR, amsgrad=True)),
    "adamw-amsgrad": (Adam(weight_decay=0.01, amsgrad=True, decoupled=True),
                      lambda p: torch.optim.AdamW(p, lr=LR, amsgrad=True)),
}
LR = 0.05
MAX_REL: dict[str, float] = {}


def _problem(dtype=torch.float64):
    """Five logreg clients of different sizes and data, budgets that differ (one of them 0)."""
    g = torch.Generator().manual_seed(11)
    counts = np.array([13, 7, 21, 9, 16])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    n, d, k = int(offsets[-1]), 5, 3
    x = torch.randn(n, d, generator=g, dtype=dtype) + torch.repeat_interleave(
        torch.arange(5, dtype=dtype), torch.from_numpy(counts)).unsqueeze(1) * 0.3
    y = torch.randint(0, k, (n,), generator=g)
    model = Model([Layer(d, k, True)], "classification", "logreg")
    start = 0.1 * torch.randn(5, model.n_params, generator=g, dtype=dtype)
    budgets = np.array([11, 4, 17, 0, 8])
    plan = minibatch_plan(offsets, np.arange(5), 4, budgets, 3, 1, 0, x, y)
    full = full_plan(offsets, np.arange(5), x, y).at(0)
    return model, start, budgets, plan, full


def _reference(model, start, budgets, plan, make, terms_of=None):
    """torch.optim on each client alone: the loss by hand (model.loss, autograd) plus the
    smooth terms' values, one optimizer step per minibatch of the same plan."""
    out = []
    for k in range(start.shape[0]):
        p = torch.nn.Parameter(start[k].clone())
        opt = make([p])
        for j in range(int(budgets[k])):
            b = plan.at(j)
            opt.zero_grad()
            w = p.unsqueeze(0)
            loss = model.loss(w, b.x[k:k + 1], b.y[k:k + 1], b.m[k:k + 1]).sum()
            for t in (terms_of(k) if terms_of else ()):
                loss = loss + t.value(w).sum()
            loss.backward()
            opt.step()
        out.append(p.detach())
    return torch.stack(out)


def _rel(got: torch.Tensor, ref: torch.Tensor, start: torch.Tensor) -> float:
    """Max relative error of the displacement from the start (the part the steps made)."""
    return float((got - ref).abs().max() / (ref - start).abs().max())


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("prox", [False, True])
def test_batched_optimizer_equals_torch_optim_per_client(name, prox):
    model, start, budgets, plan, full = _problem()
    opt, make = CONFIGS[name]
    mu = torch.tensor([[0.5], [1.0], [0.2], [0.0], [2.0]], dtype=start.dtype)
    anchor = start.flip(0).clone()
    terms = (Prox(mu, anchor),) if prox else ()
    prog = TermsProgram(model, start, terms, optimizer=opt)
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), LR, None, 5,
                                measure=False)
    ref = _reference(model, start, budgets, plan, make,
                     (lambda k: (Prox(mu[k:k + 1], anchor[k:k + 1]),)) if prox else None)
    assert res.steps.tolist() == budgets.tolist()
    assert float((res.state[0] - start).abs().max()) > 1e-2
    torch.testing.assert_close(res.state[0][3], start[3], rtol=0, atol=0)   # no budget
    rel = _rel(res.state[0], ref, start)
    MAX_REL[f"{name}{'+prox' if prox else ''}"] = rel
    assert rel < 1e-5, rel


def test_float32_adam_close_to_torch():
    model, start, budgets, plan, full = _problem(torch.float32)
    prog = TermsProgram(model, start, (), optimizer=Adam(amsgrad=True))
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), LR, None, 5,
                                measure=False)
    ref = _reference(model, start, budgets, plan, lambda p: torch.optim.Adam(p, lr=LR,
                                                                             amsgrad=True))
    assert _rel(res.state[0], ref, start) < 1e-5


def test_l1_prox_applied_after_the_optimizer_step():
    """A non-smooth term (l1) is its proximal map after the optimizer's step, with lr."""
    model, start, budgets, plan, full = _problem()
    opt = SGD(momentum=0.9)
    prog = TermsProgram(model, start, (L1(0.01),), optimizer=opt)
    s = prog.init()
    b = plan.at(0)
    got = prog.step(s, b, LR)
    w, st = opt.update(model.grad(start, b.x, b.y, b.m), opt.init(start), start, LR)
    torch.testing.assert_close(got[0], L1(0.01).prox(w, LR), rtol=0, atol=0)
    assert len(got) == 1 + len(st)


def test_plain_sgd_is_todays_path_bit_for_bit():
    """No optimizer: the fused path stays; SGD() run through the optimizer mechanism agrees."""
    model, start, budgets, plan, full = _problem()
    prog = TermsProgram(model, start, (Prox(0.3, start[0].clone()),))
    assert prog.run_steps(prog.init(), plan.span(0, 2), LR) is not None    # fused
    args = (plan, full, torch.from_numpy(budgets), LR, None, 5)
    today = BatchedExecutor().run(prog, *args, measure=False)
    via = BatchedExecutor().run(TermsProgram(model, start, (Prox(0.3, start[0].clone()),),
                                             optimizer=SGD()), *args, measure=False)
    torch.testing.assert_close(via.state[0], today.state[0], rtol=1e-12, atol=1e-12)


def test_optimizer_state_follows_w_in_the_state():
    model, start, budgets, plan, full = _problem()
    s = TermsProgram(model, start, optimizer=Adam(amsgrad=True)).init()
    assert len(s) == 5 and all(t.shape[0] == 5 for t in s)
    assert s[0] is not start and torch.equal(s[0], start)
    assert all(float(t.abs().sum()) == 0 for t in s[1:])
    assert len(TermsProgram(model, start, optimizer=SGD(weight_decay=0.1)).init()) == 1


def test_report_max_relative_error():
    """Prints the largest relative error of the comparisons above (run with -s)."""
    if MAX_REL:
        print("\nmax relative error vs torch.optim:",
              {k: f"{v:.1e}" for k, v in sorted(MAX_REL.items())})
