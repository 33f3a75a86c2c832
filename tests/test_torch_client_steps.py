"""TorchModel.client_steps (the per-client loop path's fused local steps: a client's parameters
stay in the module across its steps) takes the same floating-point operations as the solver's
step-by-step path: the same bytes, for every kind of term (prox, linear, per-client mu, l1's
proximal map, log-cosh), for the CNN and the char-LSTM; on the vmap path it declines (None).
Tiny shapes: a fraction of a second."""
from __future__ import annotations

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
