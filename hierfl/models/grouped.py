"""C clients' copies of a plain `nn.Sequential` (convolutions, max-pooling, ReLU, dense layers) as
grouped kernels called directly, with plain autograd instead of the functorch layer.

Under `torch.func.vmap` a convolution whose input and weight are both batched over clients
becomes one convolution with `groups` multiplied by C (the clients moved into the channels:
(B, C*Cin, H, W) against (C*Cout, Cin, k, k)), its bias a separate broadcast add; max-pooling
runs on the (C*B, ...) rows; a dense layer is `bias * 1 + bmm(h, W^T)` (functorch's
decomposition of `addmm`) whose weight gradient is taken as (grad^T h) (autograd's column-major
rule for `weight.t()`). `GroupedStack` issues the same calls for dense layers, ReLU and pooling (an
MLP's losses and gradients are the vmap path's bit for bit, tests/test_grouped.py compares them
with `torch.equal`). Convolutions are the same grouped convolution computed faster
(`_GroupedConv`): on oneDNN's channels-last kernels, which the ReLU and the pooling after them
keep, and for outputs of no more positions than the kernel has taps (the 8x8 digits CNN's second
convolution: 4x4 outputs, 25 taps) the weight gradient as a convolution of the input by the
output's gradient, where oneDNN's own takes a slow gemm path. These are the same sums in another
order, so a CNN's gradients agree with functorch's to rounding (~1e-7 relative measured; the tests
hold them to 1e-5), not bit for bit. What this saves: functorch's per-call work (wrapping every
tensor at two levels, the pytree traffic and the module re-parametrisation of `functional_call`)
and, for the digits CNN's convolutions, ~11 -> ~5.6 ms a step of 20 clients of batch 20 (oneDNN's
own timings, ONEDNN_VERBOSE=1; W6s: see benchmarks/README.md, "Real workloads").

Only the layers listed in `_PLANS` are known; a module with any other layer (or not a
`Sequential`) gets no plan and stays on vmap."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules import module as mm

Layer = Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]


class _Dense(torch.autograd.Function):
    """bmm(h, W^T) for (C, B, F) rows and (C, O, F) weights, with the backward of vmap's `mm`:
    grad_h = grad W, grad_W = grad^T h (the weight gradient in W's own orientation)."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(h, w)
        return torch.bmm(h, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, w = ctx.saved_tensors
        gh = grad.bmm(w) if ctx.needs_input_grad[0] else None
        gw = grad.transpose(1, 2).bmm(h) if ctx.needs_input_grad[1] else None
        return gh, gw


def _linear(m: nn.Linear, prefix: str) -> Layer:
    def run(h: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
        out = _Dense.apply(h, p[prefix + "weight"])
        if m.bias is None:
            return out
        return torch.add(p[prefix + "bias"].unsqueeze(1) * 1, out)
    return run


def _conv(m: nn.Conv2d, prefix: str) -> Layer:
    args = (m.stride, m.padding, m.dilation)

    def run(h: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
        c, b = h.shape[0], h.shape[1]
        w = p[prefix + "weight"]
        x = h.movedim(0, 1).reshape(b, c * h.shape[2], *h.shape[3:])
        out = _GroupedConv.apply(x, w.reshape(c * w.shape[1], *w.shape[2:]), c, *args)
        out = out.view(b, c, w.shape[1], *out.shape[2:]).movedim(1, 0)
        if m.bias is None:
            return out
        return out + p[prefix + "bias"].view(c, 1, -1, 1, 1)
    return run


class _GroupedConv(torch.autograd.Function):
    """The grouped convolution of (B, G*Cin, H, W) images by (G*Cout, Cin, k, k) weights, on
    oneDNN's channels-last kernels (input, output and gradients stay channels-last), with the
    weight gradient of outputs with no more positions than the kernel has taps (`_swaps`) taken
    as a convolution of the input by the output's gradient (`_weight_grad_swapped`)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, groups: int, stride, padding,
                dilation) -> torch.Tensor:
        xc = x.contiguous(memory_format=torch.channels_last)
        ctx.save_for_backward(xc, w)
        ctx.args = (groups, stride, padding, dilation)
        return F.conv2d(xc, w, None, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        xc, w = ctx.saved_tensors
        groups, stride, padding, dilation = ctx.args
        gc = grad.contiguous(memory_format=torch.channels_last)
        need_x, need_w = ctx.needs_input_grad[:2]
        swapped = need_w and _swaps(gc, w, stride, dilation)
        gx, gw, _ = torch.ops.aten.convolution_backward(
            gc, xc, w, None, list(stride), list(padding), list(dilation), False, [0, 0],
            groups, [need_x, need_w and not swapped, False])
        if swapped:
            gw = _weight_grad_swapped(xc, gc, groups, padding)
        return gx, gw, None, None, None, None


def _swaps(grad: torch.Tensor, w: torch.Tensor, stride, dilation) -> bool:
    """Whether the weight gradient is taken by `_weight_grad_swapped`: unit stride and
    dilation, outputs of no more positions than the kernel has taps."""
    return tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and \
        grad.shape[2] * grad.shape[3] <= w.shape[2] * w.shape[3]


def _weight_grad_swapped(xc: torch.Tensor, gc: torch.Tensor, groups: int,
                         padding) -> torch.Tensor:
    """dW[g o, i] = sum_b corr(x[b, g i], dY[b, g o]) as one grouped convolution: the input's
    channels i as the batch, (group, image) as the channels, the output's gradient as the
    kernel (G*Cout, B, OH, OW); the result (Cin, G*Cout, kh, kw) transposed."""
    b, _, h, wd = xc.shape
    cin = xc.shape[1] // groups
    cout = gc.shape[1] // groups
    cl = torch.channels_last
    xs = xc.view(b, groups, cin, h, wd).permute(2, 1, 0, 3, 4) \
        .reshape(cin, groups * b, h, wd).contiguous(memory_format=cl)
    ks = gc.view(b, groups, cout, *gc.shape[2:]).permute(1, 2, 0, 3, 4) \
        .reshape(groups * cout, b, *gc.shape[2:]).contiguous(memory_format=cl)
    return F.conv2d(xs, ks, None, 1, padding, 1, groups).transpose(0, 1).contiguous()


POOL_CL_MIN = 1 << 15    # elements from which the channels-last kernel is the faster (below:
                         # the planes fit in cache and the per-plane one wins, ~2x at 10 k)


def max_pool(x: torch.Tensor, args: tuple) -> torch.Tensor:
    """max_pool2d(x, *args) of (N, C, H, W) images, by `_MaxPool` where it is the faster."""
    if x.numel() >= POOL_CL_MIN and x.device.type == "cpu":
        return _MaxPool.apply(x, *args)
    return F.max_pool2d(x, *args)


class _MaxPool(torch.autograd.Function):
    """`max_pool2d` of (N, C, H, W) planes computed by its channels-last kernel (vectorised
    over the planes: ~20x faster here than the per-plane kernel on 8x8 planes, which costs
    ~26 ns per output), from and to the usual layout. The same values and the same indices:
    both kernels scan a window in the same order and keep its first maximum (a NaN wins), so
    the backward, a scatter of the gradients to those indices in output order, is the same
    sums; the gradient comes back in the input's own layout, as max_pool2d's does."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, k, s, pad, dil, ceil) -> torch.Tensor:
        xc = x.contiguous(memory_format=torch.channels_last)
        out, idx = torch.ops.aten.max_pool2d_with_indices(xc, k, s, pad, dil, ceil)
        ctx.save_for_backward(xc, idx)
        ctx.args = (k, s, pad, dil, ceil)
        return out.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        xc, idx = ctx.saved_tensors
        g = torch.ops.aten.max_pool2d_with_indices_backward(
            grad.contiguous(memory_format=torch.channels_last), xc, *ctx.args, idx)
        return (g.contiguous(),) + (None,) * 5


def _pool_args(m: nn.MaxPool2d) -> tuple:
    return tuple(_pair(v) for v in (m.kernel_size, m.stride or m.kernel_size, m.padding,
                                    m.dilation)) + (bool(m.ceil_mode),)


def _hooked(m: nn.Module) -> bool:
    """Whether calling `m` runs hooks (its own or every module's) or a compiled forward
    (`Module.compile`), which a plan would skip."""
    return bool(m._forward_hooks or m._forward_pre_hooks or mm._global_forward_hooks or
                mm._global_forward_pre_hooks or getattr(m, "_compiled_call_impl", None))


def run_pooled(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`module(x)`, a Sequential's max-pooling of batched CPU images by `max_pool` (the same
    values and gradients as the layer's own; the layers are read as it runs, so a copy of the
    model runs its own); the module itself wherever a hook is registered."""
    if type(module) is not nn.Sequential or _hooked(module):
        return module(x)
    for m in module._modules.values():
        x = max_pool(x, _pool_args(m)) if type(m) is nn.MaxPool2d and not m.return_indices \
            and x.dim() == 4 and not _hooked(m) else m(x)
    return x


def _pool(m: nn.MaxPool2d, prefix: str, grouped: bool = False) -> Layer:
    """Max-pooling of every (H, W) plane, exact whatever the order of the planes: a
    convolution's output (clients in the channels) is pooled as it lies, and stays so for a
    convolution next (`grouped`), where vmap copies it to (C*B, ...) rows and back."""
    args = _pool_args(m)

    def run(h: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
        c, b = h.shape[0], h.shape[1]
        rows = h.movedim(0, 1)
        cl = rows.permute(0, 3, 4, 1, 2).is_contiguous()    # a _GroupedConv's channels-last
        if not cl and not rows.is_contiguous():
            out = max_pool(h.reshape(c * b, *h.shape[2:]), args)
            return out.view(c, b, *out.shape[1:])
        flat = rows.reshape(b, c * h.shape[2], *h.shape[3:])
        out = F.max_pool2d(flat, *args) if cl else max_pool(flat, args)    # (kept channels-last)
        out = out.view(b, c, h.shape[2], *out.shape[2:]).movedim(0, 1)
        return out if grouped else out.contiguous()
    return run


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _flatten(m: nn.Flatten, prefix: str) -> Layer:
    return lambda h, p: h.flatten(2)


def _unflatten(m: nn.Unflatten, prefix: str) -> Layer:
    shape = tuple(m.unflattened_size)
    return lambda h, p: h.unflatten(2, shape)


def _relu(m: nn.ReLU, prefix: str) -> Layer:
    return lambda h, p: torch.relu(h)


def _known(m: nn.Module) -> bool:
    """A layer this module computes as vmap does (the options it reproduces)."""
    if isinstance(m, nn.Conv2d):
        return type(m) is nn.Conv2d and m.groups == 1 and m.padding_mode == "zeros" \
            and not isinstance(m.padding, str)
    if isinstance(m, nn.MaxPool2d):
        return type(m) is nn.MaxPool2d and not m.return_indices
    if isinstance(m, nn.Flatten):
        return type(m) is nn.Flatten and m.start_dim == 1 and m.end_dim == -1
    if isinstance(m, nn.Unflatten):
        return type(m) is nn.Unflatten and m.dim == 1 and isinstance(m.unflattened_size, tuple)
    return type(m) in (nn.Linear, nn.ReLU)


def _ranks_fit(layers: list[nn.Module], rank: int) -> bool:
    """Whether each layer gets a sample of the rank its plan computes: a dense layer flat
    rows (its plan is a bmm of (C, B, F)), a convolution or max-pooling (Cin, H, W) images
    (a dense layer on images' last dimension, or a pooling of unbatched (H, W) planes, is
    broadcast by vmap but not by these plans)."""
    for m in layers:
        if isinstance(m, nn.Linear) and rank != 1 or \
                isinstance(m, (nn.Conv2d, nn.MaxPool2d)) and rank != 3:
            return False
        if isinstance(m, nn.Flatten):
            rank = 1
        elif isinstance(m, nn.Unflatten):
            rank += len(m.unflattened_size) - 1
    return True


_PLANS: dict[type, Callable[..., Layer]] = {
    nn.Linear: _linear, nn.Conv2d: _conv, nn.MaxPool2d: _pool, nn.Flatten: _flatten,
    nn.Unflatten: _unflatten, nn.ReLU: _relu}


class GroupedStack:
    """The forward pass of C clients' copies of a Sequential, as grouped kernels (module doc)."""

    def __init__(self, module: nn.Sequential, layers: list[Layer],
                 input_shape: tuple[int, ...]):
        self.module, self.layers, self.input_shape = module, layers, input_shape

    def __reduce__(self):
        """Pickled as its module (the layers are closures): planned again when loaded."""
        return type(self).plan, (self.module, self.input_shape)

    @classmethod
    def plan(cls, module: nn.Module, input_shape: tuple[int, ...]) -> "GroupedStack | None":
        """The plan of a Sequential of known layers, each with parameters of its own, or None
        (hooks are looked for when it is used: `usable`)."""
        if type(module) is not nn.Sequential:
            return None
        children = list(module._modules.items())     # as forward runs them (repeats kept)
        if not all(_known(m) for _, m in children):
            return None
        if not _ranks_fit([m for _, m in children], len(input_shape)):
            return None                   # a layer on inputs of another rank: vmap's own
        own = [f"{name}.{n}" for name, m in children for n, _ in m.named_parameters()]
        if own != [n for n, _ in module.named_parameters()]:
            return None                   # tied (shared) layers, or parameters of its own
        layers = []
        for i, (name, m) in enumerate(children):
            if type(m) is nn.MaxPool2d:
                after = [type(n) for _, n in children[i + 1:] if type(n) is not nn.ReLU]
                layers.append(_pool(m, name + ".", after[:1] == [nn.Conv2d]))
            else:
                layers.append(_PLANS[type(m)](m, name + "."))
        return cls(module, layers, input_shape)

    def usable(self) -> bool:
        """Whether the plan computes what calling the module would: no hook registered on it
        or a layer (now, not only when planned) and no compiled forward."""
        return not _hooked(self.module) and not any(
            _hooked(m) for m in self.module._modules.values())

    def forward(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Outputs (C, B, o) of every client's module at its parameters (views (C, *shape))
        on its rows x (C, B, d)."""
        h = x.reshape(x.shape[0], x.shape[1], *self.input_shape)
        for layer in self.layers:
            h = layer(h, params)
        return h

    def grads(self, sample_loss: Callable, params: dict[str, torch.Tensor], x: torch.Tensor,
              y: torch.Tensor, m: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """What `vmap(grad_and_value(client_loss))` gives for client_loss = sum_b m[b]
        sample_loss(f(x[b]), y[b]): the gradients by name and the (C,) losses, by plain
        autograd; `params` are leaves (C, *shape)."""
        lk = (sample_loss(self.forward(params, x), y) * m).sum(1)
        return dict(zip(params, torch.autograd.grad(lk.sum(), list(params.values())))), lk
