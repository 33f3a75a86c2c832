"""TorchModel.client_steps (the per-client loop path's fused local steps: a client's parameters
stay in the module across its steps) takes the same floating-point operations as the solver's
step-by-step path: the same bytes, for every kind of term (prox, linear, per-client mu, l1's
proximal map, log-cosh), for the CNN and the char-LSTM; on the vmap path it declines (None).
The loop path computes a minibatch only up to its last row of nonzero weight (a short last
batch's zero-weight padding is left out): its gradient is the weighted mean over the real rows,
checked against that definition in float64 and against the vmap path (which computes every row).
Tiny shapes: a fraction of a second."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from hierfl.config.schema import ModelSpec
from hierfl.learn.batches import Batch
from hierfl.learn.solver import TermsProgram
from hierfl.learn.terms import L1, Linear, LogCosh, Prox
from hierfl.models.registry import build_model

MODELS = [("cnn", {"channels": [3, 5], "dense": 7}, (1, 8, 8), 10),
          ("char_lstm", {"embed": 3, "hidden": [6, 6]}, (7,), 9)]


def _setup(name, options, shape, classes, c=3, t=4, b=5):
    model = build_model(ModelSpec(name=name, options=options), math.prod(shape), classes,
                        classes, shape)
    model.batching = "loop"
    g = torch.Generator().manual_seed(1)
    d = math.prod(shape)
    w = torch.stack([model.init(g) for _ in range(c)])
    if name == "char_lstm":
        x = torch.randint(0, classes, (c, t, b, d), generator=g)
    else:
        x = torch.randn(c, t, b, d, generator=g)
    y = torch.randint(0, classes, (c, t, b), generator=g)
    m = torch.rand(c, t, b, generator=g)
    m[:, -1, -2:] = 0.0                                     # a short last batch
    return model, w, x, y, m, g


def _terms(kind: str, c: int, p: int, g: torch.Generator):
    return {"none": (),
            "prox": (Prox(0.1, torch.randn(c, p, generator=g)),),
            "feddyn": (Linear(0.01 * torch.randn(c, p, generator=g)),
                       Prox(torch.rand(c, 1, generator=g), torch.randn(p, generator=g))),
            "l1": (L1(0.01),),
            "logcosh": (LogCosh(0.01, 0.1),)}[kind]


@pytest.mark.parametrize("kind", ["none", "prox", "feddyn", "l1", "logcosh"])
@pytest.mark.parametrize("name,options,shape,classes", MODELS)
def test_client_steps_equal_step_by_step(name, options, shape, classes, kind):
    model, w, x, y, m, g = _setup(name, options, shape, classes)
    prog = TermsProgram(model, w, _terms(kind, w.shape[0], w.shape[1], g))
    with torch.no_grad():
        (fused,) = prog.run_steps((w.clone(),), Batch(x, y, m), 0.05)
        s = (w.clone(),)
        for t in range(x.shape[1]):
            s = prog.step(s, Batch(x[:, t], y[:, t], m[:, t]), 0.05)
    assert float((fused - w).abs().max()) > 1e-2                   # it moved
    assert torch.equal(fused, s[0])                                # the same bytes


def test_client_steps_only_on_the_loop_path_and_clip_steps_one_by_one():
    model, w, x, y, m, _ = _setup(*MODELS[0])
    span = Batch(x, y, m)
    assert TermsProgram(model, w, (), clip=1.0).run_steps((w,), span, 0.1) is None
    model.batching = "vmap"
    assert model.client_steps(w, x, y, m, 0.1) is None
    assert TermsProgram(model, w).run_steps((w,), span, 0.1) is None


def test_shared_and_view_gradients_are_not_overwritten():
    """A module whose two parameters get one and the same gradient tensor from autograd
    (x + (a + b)): the in-place update must not scale it twice."""

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.zeros(4))
            self.b = torch.nn.Parameter(torch.zeros(4))

        def forward(self, x):
            return x + (self.a + self.b)

    from hierfl.models.torch_model import TorchModel
    model = TorchModel(Twin(), (4,), "classification", "twin", batching="loop")
    g = torch.Generator().manual_seed(3)
    w = torch.randn(2, 8, generator=g)
    x, y = torch.randn(2, 3, 2, 4, generator=g), torch.randint(0, 4, (2, 3, 2), generator=g)
    m = torch.full((2, 3, 2), 0.5)
    prog = TermsProgram(model, w)
    with torch.no_grad():
        (fused,) = prog.run_steps((w.clone(),), Batch(x, y, m), 0.3)
        s = (w.clone(),)
        for t in range(3):
            s = prog.step(s, Batch(x[:, t], y[:, t], m[:, t]), 0.3)
    assert torch.equal(fused, s[0])


def _rows_seen(model) -> list[int]:
    seen: list[int] = []
    model.module.register_forward_hook(lambda _m, inp, _out: seen.append(inp[0].shape[0]))
    return seen


def _definition(model, w, x, y, m) -> torch.Tensor:
    """Per client, the gradient of sum over the rows of nonzero weight of m[b] loss(x[b], y[b]),
    in float64 on a copy of the module, rows with zero weight never passed to it."""
    mod = copy.deepcopy(model.module).double()
    out = []
    for k in range(w.shape[0]):
        real = m[k] != 0
        with torch.no_grad():
            for p, v in zip(mod.parameters(), w[k].double().split(model.sizes)):
                p.copy_(v.view(p.shape))
        mod.zero_grad()
        xk = x[k][real]
        z = mod((xk if xk.dtype == torch.long else xk.double()).reshape(-1, *model.input_shape))
        loss = (torch.nn.functional.cross_entropy(z, y[k][real], reduction="none")
                * m[k][real].double()).sum()
        loss.backward()
        out.append(torch.cat([p.grad.reshape(-1) for p in mod.parameters()]))
    return torch.stack(out)


@pytest.mark.filterwarnings("ignore:There is a performance drop")   # vmap over nn.LSTM
@pytest.mark.parametrize("name,options,shape,classes", MODELS)
def test_loop_path_gradient_is_the_mean_over_the_real_rows(name, options, shape, classes):
    model, w, x, y, _, g = _setup(name, options, shape, classes)
    x, y = x[:, 0], y[:, 0]                                  # (C, B, d): one step
    m = torch.zeros(3, 5)
    for k, n in enumerate((5, 3, 1)):                        # 0, 2 and 4 padding rows
        m[k, :n] = 1.0 / n
    seen = _rows_seen(model)
    _, grad = model.loss_grad(w, x, y, m)
    assert seen == [5, 3, 1]                                 # the padding is not computed
    want = _definition(model, w, x, y, m)
    assert float(want.abs().max()) > 1e-3
    torch.testing.assert_close(grad.double(), want, rtol=1e-5, atol=1e-6)
    model.batching = "vmap"                                  # every row, padding included
    assert model.real_rows(m) is None
    torch.testing.assert_close(model.loss_grad(w, x, y, m)[1], grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,options,shape,classes", MODELS)
def test_loop_path_steps_skip_padding_and_empty_steps(name, options, shape, classes):
    """client_steps: the rows computed per step follow each step's weights, a zero-weight
    row before a real one is still computed, and a step of zero weights moves nothing (the
    same bytes as the span without it)."""
    model, w, x, y, m, _ = _setup(name, options, shape, classes)
    m[0, 1, 2] = 0.0                                         # inside the batch: computed
    m[1, 2] = 0.0                                            # client 1, step 2: nothing
    seen = _rows_seen(model)
    with torch.no_grad():
        out = model.client_steps(w, x, y, m, 0.05)
    assert seen == [5, 5, 5, 3] + [5, 5, 3] + [5, 5, 5, 3]
    keep = [0, 1, 3]
    with torch.no_grad():
        alone = model.client_steps(w[1:2], x[1:2, keep], y[1:2, keep], m[1:2, keep], 0.05)
    assert torch.equal(out[1], alone[0])
    assert not torch.equal(out[0], w[0])
