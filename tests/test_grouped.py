"""models/grouped.py: the vmap path's grouped kernels called directly give the bytes of
`torch.func.vmap(grad_and_value(functional_call))` for modules without convolutions (losses
and gradients compared with torch.equal, not a tolerance) and agree with it to 1e-5 for CNNs
(their convolutions' sums in another order: `_GroupedConv`, checked against autograd of
`conv2d` in float64 to 1e-12), and modules it does not know stay on functorch."""
from __future__ import annotations

import math
import pickle

import pytest
import torch
from torch import nn

from hierfl.models.cnn.net import cnn
from hierfl.models.grouped import GroupedStack
from hierfl.models.torch_model import TorchModel


@pytest.fixture(autouse=True, params=["channels-last pooling", "pooling by size"])
def _pool_kernel(request, monkeypatch):
    """Every test twice: all pooling on the channels-last kernel (`_MaxPool`), and as shipped
    (it from POOL_CL_MIN elements, these small tensors mostly on max_pool2d itself)."""
    from hierfl.models import grouped
    if request.param == "channels-last pooling":
        monkeypatch.setattr(grouped, "POOL_CL_MIN", 0)


def _mlp(shape, classes):
    return nn.Sequential(nn.Linear(math.prod(shape), 12), nn.ReLU(),
                         nn.Linear(12, 9, bias=False), nn.ReLU(), nn.Linear(9, classes))


def _odd_cnn(shape, classes):
    """Layers with options the CNN of the registry does not use: no bias, strides, padding."""
    return nn.Sequential(nn.Unflatten(1, (2, 7, 7)), nn.Conv2d(2, 3, 3, bias=False),
                         nn.ReLU(), nn.MaxPool2d(3, stride=1, padding=1),
                         nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.MaxPool2d(2, ceil_mode=True),
                         nn.Flatten(), nn.Linear(4 * 2 * 2, classes))


MODULES = [  # (module factory, input shape, classes, task)
    (lambda s, k: cnn(s, k, channels=[8, 16], dense=32), (64,), 10, "classification"),
    (lambda s, k: cnn(s, k, channels=[3, 5], dense=7), (1, 8, 8), 10, "classification"),
    (lambda s, k: cnn(s, k, channels=[3, 5], dense=7), (8, 8), 10, "classification"),
    (lambda s, k: cnn(s, k, channels=[4], dense=0, kernel=3), (3, 6, 6), 4, "classification"),
    (lambda s, k: cnn(s, k, channels=[4, 6], dense=16), (1, 28, 28), 62, "classification"),
    (lambda s, k: cnn(s, k, channels=[3, 5], dense=7), (64,), 3, "regression"),
    (_mlp, (30,), 5, "classification"),
    (_odd_cnn, (98,), 6, "classification"),
    (lambda s, k: nn.Sequential(nn.Unflatten(1, (1, 6, 6)), nn.Conv2d(1, 3, 3, padding=1),
                                nn.ReLU(), nn.Flatten(), nn.Linear(108, k)), (36,), 5,
     "classification"),                                          # no pooling before the dense
]


def _batch(model: TorchModel, c: int, b: int, classes: int, g: torch.Generator,
           dtype=torch.float32):
    w = (model.init(g).expand(c, -1) + 0.05 * torch.randn(c, model.n_params, generator=g))
    x = torch.rand(c, b, math.prod(model.input_shape), generator=g)
    if model.task == "classification":
        y = torch.randint(0, classes, (c, b), generator=g)
    else:
        y = torch.randn(c, b, classes, generator=g)
    m = torch.rand(c, b, generator=g)
    m[:, b // 2 + 1:] = 0.0                                    # padding rows
    return w.to(dtype), x.to(dtype), y if model.task == "classification" else y.to(dtype), \
        m.to(dtype)


def _agree(got: torch.Tensor, ref: torch.Tensor, tol: float) -> None:
    """Each client's row of `got` within tol x that row's largest |ref| (gradients: entries
    near zero carry no relative precision of their own)."""
    scale = ref.reshape(ref.shape[0], -1).abs().amax(1, keepdim=True)
    err = (got - ref).reshape(ref.shape[0], -1).abs()
    assert bool((err <= tol * scale).all()), float((err / scale).max())


@pytest.mark.parametrize("make,shape,classes,task", MODULES)
def test_grouped_agrees_with_functorch(make, shape, classes, task):
    model = TorchModel(make(shape, classes), shape, task, "m", batching="vmap")
    assert model.grouped is not None
    convs = any(isinstance(m, nn.Conv2d) for m in model.module.modules())
    g = torch.Generator().manual_seed(7)
    for c, b in ((20, 20), (3, 7), (1, 5), (6, 61)):
        w, x, y, m = _batch(model, c, b, classes, g)
        loss, grad = model._loss_grad_vmap(w, x, y, m)
        ref_loss, ref_grad = model._loss_grad_vmap(w, x, y, m, functorch=True)
        if convs:
            _agree(loss[:, None], ref_loss[:, None], 1e-6)
            _agree(grad, ref_grad, 1e-5)
        else:
            assert torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad), (c, b)
        assert float(grad.abs().max()) > 1e-4                   # not a trivially equal zero


def test_grouped_in_float64():
    model = TorchModel(cnn((1, 8, 8), 10, channels=[3, 5], dense=7).double(), (1, 8, 8),
                       "classification", "cnn", batching="vmap")
    w, x, y, m = _batch(model, 5, 9, 10, torch.Generator().manual_seed(3), torch.float64)
    loss, grad = model._loss_grad_vmap(w, x, y, m)
    ref_loss, ref_grad = model._loss_grad_vmap(w, x, y, m, functorch=True)
    assert grad.dtype == torch.float64
    _agree(loss[:, None], ref_loss[:, None], 1e-14)
    _agree(grad, ref_grad, 1e-12)


@pytest.mark.parametrize("cin,cout,groups,hw,k,stride,pad,dil", [
    (1, 8, 20, (8, 8), 5, 1, 2, 1),       # the digits CNN's first convolution (native)
    (8, 16, 20, (4, 4), 5, 1, 2, 1),      # its second: 4x4 images, 25 taps (swapped)
    (3, 2, 4, (3, 5), 5, 1, (2, 1), 1),   # rectangular, padding per side (swapped)
    (2, 3, 1, (3, 3), 3, 1, 0, 1),        # ungrouped, no padding, 1x1 outputs (swapped)
    (2, 3, 5, (9, 7), 3, 2, 1, 1),        # stride 2 (oneDNN's weight gradient)
    (2, 2, 3, (6, 6), 3, 1, 2, 2),        # dilation 2 (oneDNN's)
])
def test_grouped_conv_gradients_are_conv2d_s(cin, cout, groups, hw, k, stride, pad, dil):
    """`_GroupedConv` is F.conv2d with groups, its input and weight gradients autograd's: in
    float64 to 1e-12 (the same maths; float32 rounding aside), both with and without the
    input's gradient, and the swapped weight gradient is the one used on small images."""
    from torch.nn import functional as F

    from hierfl.models.grouped import _GroupedConv, _pair, _swaps
    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, groups * cin, *hw, generator=g, dtype=torch.float64)
    w = torch.randn(groups * cout, cin, k, k, generator=g, dtype=torch.float64)
    args = (_pair(stride), _pair(pad), _pair(dil))
    ref = F.conv2d(x, w, None, stride, pad, dil, groups)
    grad = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    assert _swaps(grad, w, *args[::2]) == (stride == dil == 1 and ref.shape[2] *
                                           ref.shape[3] <= k * k)
    for need_x in (True, False):
        xa, wa = x.clone().requires_grad_(need_x), w.clone().requires_grad_()
        xb, wb = x.clone().requires_grad_(need_x), w.clone().requires_grad_()
        ref = F.conv2d(xa, wa, None, stride, pad, dil, groups)
        got = _GroupedConv.apply(xb, wb, groups, *args)
        _agree(got, ref.detach(), 1e-12)
        want = torch.autograd.grad(ref, [xa, wa] if need_x else [wa], grad)
        have = torch.autograd.grad(got, [xb, wb] if need_x else [wb], grad)
        for a, b in zip(want, have):
            assert a.shape == b.shape
            _agree(b.reshape(1, -1), a.reshape(1, -1), 1e-12)


def test_the_digits_cnn_swaps_its_second_weight_gradient(monkeypatch):
    """The shipped digits CNN's second convolution (4x4 images, 5x5 kernel) takes its weight
    gradient by the swapped convolution, its first by oneDNN's; the rule is not dead code."""
    from hierfl.models import grouped
    seen = []
    real = grouped._weight_grad_swapped
    monkeypatch.setattr(grouped, "_weight_grad_swapped",
                        lambda xc, gc, *a: seen.append(tuple(xc.shape)) or real(xc, gc, *a))
    model = TorchModel(cnn((64,), 10, channels=[8, 16], dense=32), (64,), "classification",
                       "cnn")
    w, x, y, m = _batch(model, 4, 10, 10, torch.Generator().manual_seed(1))
    model.loss_grad(w, x, y, m)
    assert seen == [(10, 4 * 8, 4, 4)]


def test_the_shipped_digits_cnn_runs_grouped():
    """scenarios/digits_cnn.yaml's model (flat 64-feature digits rows) has a plan, and
    `loss_grad` of several clients goes through it (not through functorch)."""
    model = TorchModel(cnn((64,), 10, channels=[8, 16], dense=32), (64,), "classification",
                       "cnn")
    assert model.batching == "vmap" and model.grouped is not None
    w, x, y, m = _batch(model, 4, 10, 10, torch.Generator().manual_seed(1))
    calls = []
    forward = model.grouped.forward
    model.grouped.forward = lambda *a: calls.append(1) or forward(*a)
    model.loss_grad(w, x, y, m)
    assert calls


class _Scaled(nn.Linear):
    pass


@pytest.mark.parametrize("module", [
    nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)),         # unknown layer
    nn.Sequential(nn.Unflatten(1, (2, 2, 1)), nn.Conv2d(2, 2, 1, groups=2), nn.Flatten(),
                  nn.Linear(4, 2)),
    nn.Sequential(nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 1, padding="same"),
                  nn.Flatten(), nn.Linear(8, 2)),
    nn.Sequential(nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 1, padding_mode="reflect"),
                  nn.Flatten(), nn.Linear(8, 2)),
    nn.Sequential(_Scaled(4, 2)),                                       # a subclass
])
def test_unknown_modules_stay_on_functorch(module):
    model = TorchModel(module, (4,), "regression", "m", batching="vmap")
    assert model.grouped is None
    w, x, y, m = _batch(model, 3, 4, 2, torch.Generator().manual_seed(0))
    loss, grad = model.loss_grad(w, x, y, m)
    assert loss.shape == (3,) and grad.shape == (3, model.n_params)
    assert float(grad.abs().max()) > 0


def test_a_hooked_module_is_not_run_by_its_plan():
    """A hook on the module or a layer, registered before or after the model is built, sends
    the vmap path through functorch (which calls the module, so the hook runs)."""
    module = nn.Sequential(nn.Linear(4, 2))
    module[0].register_forward_hook(lambda *a: None)
    assert not GroupedStack.plan(module, (4,)).usable()
    model = TorchModel(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), (4,),
                       "classification", "m", batching="vmap")
    assert model.grouped.usable()
    calls = []
    model.module[2].register_forward_hook(lambda *a: calls.append(1))
    assert not model.grouped.usable()
    g = torch.Generator().manual_seed(0)
    w, x, y, m = _batch(model, 3, 4, 2, g)
    model.loss_grad(w, x, y, m)
    assert calls                                          # functorch called the module
    assert GroupedStack.plan(nn.Linear(4, 2), (4,)) is None             # not a Sequential
    assert GroupedStack.plan(nn.Sequential(nn.Flatten(0), nn.Linear(4, 2)), (4,)) is None


def test_tied_layers_stay_on_functorch():
    """A layer used twice has its parameters once in named_parameters(): no plan."""
    shared = nn.Linear(4, 4)
    model = TorchModel(nn.Sequential(shared, nn.ReLU(), shared), (4,), "regression", "m",
                       batching="vmap")
    assert model.grouped is None and model.n_params == 20
    w, x, y, m = _batch(model, 3, 5, 4, torch.Generator().manual_seed(2))
    assert model.loss_grad(w, x, y, m)[1].shape == (3, 20)


def test_a_pickled_model_keeps_its_plan():
    """Process executors and sweeps pickle the model: the plan comes back (rebuilt from the
    module) and gives the same bytes."""
    model = TorchModel(cnn((64,), 10, channels=[3, 5], dense=7), (64,), "classification", "cnn")
    back = pickle.loads(pickle.dumps(model))
    assert back.grouped is not None and back.grouped.module is back.module
    w, x, y, m = _batch(model, 4, 6, 10, torch.Generator().manual_seed(5))
    loss, grad = model._loss_grad_vmap(w, x, y, m)
    loss2, grad2 = back._loss_grad_vmap(w, x, y, m)
    assert torch.equal(loss, loss2) and torch.equal(grad, grad2)


@pytest.mark.parametrize("module,shape", [
    (nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3)), (8, 8)),
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), nn.Linear(3, 4), nn.Flatten(),
                   nn.Linear(24, 3)), (1, 8, 8)),
    (nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3)), (8, 8)),
])
def test_layers_on_inputs_of_another_rank_stay_on_functorch(module, shape):
    """A dense layer on images' last dimension, or a pooling of unbatched (H, W) planes: vmap
    broadcasts them, the plans would not (a bmm of 3-d rows, a pooling of the clients'
    planes as one image), so such a module has no plan and trains as before."""
    model = TorchModel(module, shape, "classification", "m", batching="vmap")
    w, x, y, m = _batch(model, 3, 5, 3, torch.Generator().manual_seed(4))
    loss, grad = model._loss_grad_vmap(w, x, y, m)               # raised with a plan
    ref_loss, ref_grad = model._loss_grad_vmap(w, x, y, m, functorch=True)
    assert torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad)
    assert float(grad.abs().max()) > 0 and model.grouped is None


@pytest.mark.parametrize("args", [(2, 2, 0, 1, False), (3, 1, 1, 1, False), (2, 2, 0, 1, True),
                                  (3, 2, 1, 2, True), ((2, 3), (1, 2), (1, 0), 1, False)])
def test_pool_kernel_is_max_pool2d(args):
    """The channels-last pooling gives max_pool2d's values, and its gradients bit for bit,
    with ties (first maximum in window order), NaNs and overlapping windows."""
    from torch.nn import functional as F

    from hierfl.models.grouped import _MaxPool, _pair
    k, s, p, d, ceil = args
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 4, (6, 5, 9, 8), generator=g).float()     # many ties
    x[0, 0, 1, 1] = float("nan")
    x[1, 2, 3:5, 3:5] = float("nan")
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref = F.max_pool2d(a, k, s, p, d, ceil)
    got = _MaxPool.apply(b, _pair(k), _pair(s), _pair(p), _pair(d), ceil)
    assert got.is_contiguous() and torch.equal(ref.isnan(), got.isnan())
    assert torch.equal(ref.nan_to_num(), got.nan_to_num())
    grad = torch.randn(ref.shape, generator=g)
    ref.backward(grad)
    got.backward(grad)
    assert b.grad.is_contiguous() and torch.equal(a.grad, b.grad)


def test_module_forward_pools_channels_last_with_the_same_bytes():
    """The loop path and evaluation (`TorchModel._run`) pool on the channels-last kernel: the
    outputs and the parameters' gradients equal the module's own forward bit for bit; a hook
    registered on the module or a pooling layer afterwards is honoured (the module runs)."""
    model = TorchModel(_odd_cnn((98,), 6), (98,), "classification", "odd")
    g = torch.Generator().manual_seed(5)
    x = torch.rand(7, 98, generator=g)
    x[:, :20] = 0.5                                         # ties in the pooling windows
    own = model.module(x.reshape(7, *model.input_shape))
    ga = torch.autograd.grad(own.square().sum(), model._plist)
    got = model._run(x)
    gb = torch.autograd.grad(got.square().sum(), model._plist)
    assert torch.equal(own, got) and all(torch.equal(a, b) for a, b in zip(ga, gb))
    calls = []
    pool = next(m for m in model.module if isinstance(m, nn.MaxPool2d))
    pool.register_forward_hook(lambda *a: calls.append(1))
    model._run(x)
    model.module.register_forward_pre_hook(lambda *a: calls.append(2))
    model._run(x)
    assert calls == [1, 2, 1]
