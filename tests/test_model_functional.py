"""The stacked-parameter models against torch.nn.functional, one client at a time: outputs,
the closed-form gradients of one-layer models and autograd through MLPs, on narrow layers
(computed as W x^T) and wide ones (x W^T)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hierfl.models.functional import NARROW, Layer, Model


def _reference(model: Model, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """F.linear layer by layer on one client's row of parameters."""
    h, pos = x, 0
    for i, l in enumerate(model.layers):
        wt = w[pos:pos + l.n_out * l.n_in].view(l.n_out, l.n_in)
        pos += l.n_out * l.n_in
        b = None
        if l.bias:
            b = w[pos:pos + l.n_out]
            pos += l.n_out
        h = F.linear(h, wt, b)
        if i < len(model.layers) - 1:
            h = torch.relu(h)
    return h


@pytest.mark.parametrize("task,widths,bias", [
    ("classification", [7, 3], True), ("classification", [7, 3], False),
    ("classification", [5, NARROW + 8], True),            # wide output: the other product
    ("regression", [6, 1], True), ("regression", [6, 2], False),
    ("classification", [9, 40, 4], True)])               # MLP: wide hidden, narrow output
def test_models_match_torch_functional(task, widths, bias):
    g = torch.Generator().manual_seed(11)
    layers = [Layer(a, b, bias) for a, b in zip(widths[:-1], widths[1:])]
    model = Model(layers, task, "m")
    c, rows, o = 3, 17, widths[-1]
    w = 0.3 * torch.randn(c, model.n_params, generator=g, dtype=torch.float64)
    x = torch.randn(c, rows, widths[0], generator=g, dtype=torch.float64)
    if task == "classification":
        y = torch.randint(0, o, (c, rows), generator=g)
    else:
        y = torch.randn(c, rows, generator=g, dtype=torch.float64) if o == 1 else \
            torch.randn(c, rows, o, generator=g, dtype=torch.float64)
    m = torch.rand(c, rows, generator=g, dtype=torch.float64)
    m[:, -3:] = 0.0                                       # padding rows
    m = m / m.sum(1, keepdim=True)
    z = model.forward(w, x)
    loss, grad = model.loss_grad(w, x, y, m)
    for k in range(c):
        wk = w[k].clone().requires_grad_(True)
        zk = _reference(model, wk, x[k])
        torch.testing.assert_close(z[k], zk.detach(), rtol=1e-12, atol=1e-12)
        if task == "classification":
            per = F.cross_entropy(zk, y[k], reduction="none")
        else:
            per = F.mse_loss(zk, y[k].view(rows, -1), reduction="none").mean(1)
        lk = (per * m[k]).sum()
        (gk,) = torch.autograd.grad(lk, wk)
        torch.testing.assert_close(loss[k], lk.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad[k], gk, rtol=1e-10, atol=1e-12)
        if task == "classification":
            right = (zk.argmax(-1) == y[k]).double()
            torch.testing.assert_close(model.correct(w, x, y)[k], right)
