"""DP-SGD inside the local steps (Abadi et al. 2016, `privacy: {kind: sample_level}`), batched
across clients.

At a step of client k with batch weights m (the plan's: 1/B_k for each row in the batch, 0 for
padding), the gradient of the data term F_k becomes

    g_k = sum_i m_i clip(g_i, C) + (z C / B_k) xi_k
        = (1 / B_k) (sum_i clip(g_i, C) + N(0, z^2 C^2 I)),

g_i the gradient of row i's own loss, clip(g, C) = g min(1, C / ||g||), xi_k ~ N(0, I_P). B_k:
- Poisson sampling (`batches.poisson_plan`): the expected batch size q_k n_k = min(B, n_k), the
  standard unbiased estimator of the mean clipped gradient; the batch itself varies and may be
  empty (then g_k is the noise alone);
- fixed size (`batches.minibatch_plan`): the rows actually in the step (an epoch's short last
  batch counted as it is).
The other terms of h_k (proximal, linear: they read no data) are added unclipped and un-noised
by the program (learn/solver.py, `TermsProgram.dp`); the optimizer and train.local.clip then
post-process g_k as any gradient.

Noise: client k's xi at its step n is drawn from a generator seeded with step_seeds(keys[k], n),
keys = batches.noise_keys(seed, round, edge round, clients): the same numbers whichever
executor, chunk of clients or company (on one device type).

Per-sample gradients (`clipped_sum`), two paths, the same maths:
- "layers": one forward pass of all C x B rows, the clients' layers batched as the model's own
  batched path does (models/grouped.py for a Sequential of known layers; the stacked affine
  layers of functional.Model), one backward pass to each parametric layer's output (no weight
  gradient), then each row's gradient from the layer's input h and output gradient dz: a dense
  layer's never formed (its norm is ||dz|| ||h||, its clipped sum one bmm of rescaled dz), a
  convolution's as the weight gradient of one convolution with a group per row;
- "func": torch.func, vmap over clients of vmap over rows of grad: any model, 3-6x slower
  (benchmarks/dpsgd.py).
"auto" takes "layers" wherever it applies."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn
from torch.func import grad, vmap
from torch.nn import functional as F

from .batches import Batch, noise_keys, poisson_expected, step_seeds
from .terms import select_rows

ROW_BUDGET = 1 << 25     # per-row elements (activations, per-row gradients) of one chunk of rows


@dataclass(frozen=True)
class DPSGD:
    """One round's DP-SGD of C clients: clip C, noise multiplier z, their noise streams and,
    under Poisson sampling, their expected batch sizes."""

    clip: float
    noise_multiplier: float
    keys: torch.Tensor                      # (C, 1) int64: batches.noise_keys
    expected: torch.Tensor | None = None    # (C, 1) q_k n_k (Poisson); None: the actual size
    path: str = "auto"                      # per-sample gradients: auto | layers | func

    def __post_init__(self) -> None:
        if not self.clip > 0:
            raise ValueError(f"DP-SGD clip must be > 0, not {self.clip}")
        if not self.noise_multiplier >= 0:
            raise ValueError(f"DP-SGD noise_multiplier must be >= 0, not "
                             f"{self.noise_multiplier}")
        if self.noise_multiplier > 0 and math.isinf(self.clip):
            raise ValueError("DP-SGD noise needs a finite clip (its std is z * clip)")
        if self.path not in ("auto", "layers", "func"):
            raise ValueError(f"DP-SGD path must be auto, layers or func, not {self.path!r}")

    def select(self, sel: torch.Tensor) -> "DPSGD":
        return replace(self, keys=select_rows(self.keys, sel),
                       expected=None if self.expected is None else
                       select_rows(self.expected, sel))

    def grad(self, model, w: torch.Tensor, b: Batch, count: torch.Tensor) -> torch.Tensor:
        """g_k of every client (module doc) at its step `count` (C, 1)."""
        g = clipped_sum(model, w, b.x, b.y, b.m, self.clip, self.path)
        if self.noise_multiplier == 0:
            return g
        den = self.expected if self.expected is not None else \
            (b.m > 0).sum(1, keepdim=True).clamp_min(1)
        scale = (self.noise_multiplier * self.clip) / den.to(w.dtype)
        return g.add_(gaussian(self.keys, count, w) * scale)


def gaussian(keys: torch.Tensor, count: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """N(0, I) rows shaped as `like` (C, P): row k from a generator seeded with
    step_seeds(keys[k], count[k])."""
    out = torch.empty_like(like)
    gen = torch.Generator(device=like.device)
    for k, s in enumerate(step_seeds(keys.cpu(), count.cpu())):
        gen.manual_seed(s)
        torch.randn(like.shape[1], generator=gen, dtype=like.dtype, device=like.device,
                    out=out[k])
    return out


def refusal(model, program=None) -> str | None:
    """Why DP-SGD cannot run on this model (or program), or None."""
    from .solver import TermsProgram
    if program is not None and type(program) is not TermsProgram:
        return (f"its local program is a {type(program).__name__}, whose gradient is not the "
                "model's data term alone (DP-SGD clips per-sample gradients of the loss)")
    if getattr(model, "stateful", False):
        return ("the model keeps per-client state (BatchNorm mixes the rows of a batch: no "
                "per-sample gradient; dropout's masks are drawn per client step): use "
                "GroupNorm and no dropout")
    return None


def attach(program, privacy, counts: np.ndarray, batch_size: int | str, seed: int,
           sel: np.ndarray, t: int, r: int):
    """`program` (a plain TermsProgram of clients `sel`, with n_k = counts) with DP-SGD for
    round (t, r): `privacy` has clip, noise_multiplier and sampling (poisson | fixed)."""
    why = refusal(program.model, program)
    if why is not None:
        raise TypeError(f"privacy sample_level (DP-SGD): {why}")
    expected = None
    if privacy.sampling == "poisson":
        expected = torch.from_numpy(poisson_expected(counts, batch_size)).to(
            program.start.dtype).unsqueeze(1)
    dp = DPSGD(float(privacy.clip), float(privacy.noise_multiplier),
               noise_keys(seed, t, r, sel), expected)
    return replace(program, dp=dp)


# ------------------------------------------------------------------------------ per-sample
def factors(norms: torch.Tensor, clip: float) -> torch.Tensor:
    """min(1, C / ||g_i||) (1 at a zero gradient, and for C = inf)."""
    return torch.clamp(clip / norms.clamp_min(1e-30), max=1.0)


def clipped_sum(model, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                clip: float, path: str = "auto") -> torch.Tensor:
    """sum_i m[c, i] clip(g_ci, C) for each client c, (C, P); rows in chunks whose per-row
    tensors (activations and their gradients; the per-row gradients formed) stay within
    ROW_BUDGET elements."""
    c, b = x.shape[0], x.shape[1]
    fn = _layers_fn(model, w, x) if path in ("auto", "layers") else None
    if fn is None and path == "layers":
        raise ValueError(f"model {getattr(model, 'name', model)!r} has no per-layer "
                         "per-sample gradients (use path func)")
    act = int(getattr(model, "act_per_sample", 0)) or \
        sum(l.n_out for l in getattr(model, "layers", ()))
    per_row = 2 * act + (_formed(model) if fn is not None else model.n_params)
    fn = fn or _func
    step = max(1, ROW_BUDGET // max(1, per_row * c))
    if b <= step:
        return fn(model, w, x, y, m, clip)
    out = w.new_zeros(w.shape)
    for i in range(0, b, step):
        out += fn(model, w, x[:, i:i + step], y[:, i:i + step], m[:, i:i + step], clip)
    return out


def _formed(model) -> int:
    """Per-row gradient entries the "layers" path forms: the convolutions' (dense layers'
    are never formed)."""
    module = getattr(model, "module", None)
    if module is None:
        return 0
    return sum(p.numel() for mod in module.modules() if isinstance(mod, nn.Conv2d)
               for p in mod.parameters(recurse=False))


def per_sample_grads(model, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(C, B, P): the gradient of each row's loss, by torch.func (the reference of the tests
    and of the "func" path)."""
    one = _row_loss(model)
    return vmap(vmap(grad(one), in_dims=(None, 0, 0)))(w, x, y)


def _row_loss(model):
    """loss(w_row (P,), x_row, y_row): one row's loss as a function of one client's row."""
    if hasattr(model, "module"):             # a TorchModel
        def one(wr, xr, yr):
            z = model._call(model.unflatten(wr), xr.unsqueeze(0))
            return model.sample_loss(z, yr.unsqueeze(0)).sum()
    else:                                    # functional.Model: a client of one row
        def one(wr, xr, yr):
            return model.loss(wr.unsqueeze(0), xr.view(1, 1, -1), yr.view(1, 1, *yr.shape),
                              wr.new_ones(1, 1)).sum()
    return one


def _func(model, w, x, y, m, clip) -> torch.Tensor:
    g = per_sample_grads(model, w, x, y)
    f = m * factors(g.norm(dim=2), clip)
    return torch.bmm(f.unsqueeze(1).to(g.dtype), g).squeeze(1)


def _layers_fn(model, w: torch.Tensor, x: torch.Tensor):
    """The "layers" path for this model, or None where it does not apply."""
    from ..models.functional import Model
    if getattr(model, "stateful", False) or not x.is_floating_point() or x.dtype != w.dtype:
        return None
    if isinstance(model, Model):
        cls = type(model)
        if cls._forward is Model._forward and cls.sample_loss is Model.sample_loss and \
                cls.unflatten is Model.unflatten:
            return _layers_stacked
        return None
    stack = getattr(model, "grouped", None)
    if stack is not None and stack.usable():
        return _layers_grouped
    return None


def _dense(h: torch.Tensor, dz: torch.Tensor, bias: bool):
    """A dense layer's per-row squared gradient norms (C, B) and its clipped sums from row
    factors f (C, B): [weight (C, O, F), bias (C, O)], from its inputs h (C, B, F) and output
    gradients dz (C, B, O) (row i's weight gradient is dz_i h_i^T: never formed)."""
    dz2 = dz.square().sum(-1)
    n2 = dz2 * h.square().sum(-1) + (dz2 if bias else 0.0)

    def total(f: torch.Tensor) -> list[torch.Tensor]:
        fd = dz * f.unsqueeze(-1)
        out = [torch.bmm(fd.transpose(1, 2), h)]
        return out + [fd.sum(1)] if bias else out
    return n2, total


def _conv(h: torch.Tensor, dz: torch.Tensor, conv: nn.Conv2d):
    """`_dense` for a convolution, inputs h (C, B, Cin, H, W), output gradients
    dz (C, B, Cout, H', W'): every row's weight gradient at once, as the weight gradient of one
    convolution with a group per row (torch's convolution_backward: at one thread 2-3x faster
    here than unfold and bmm, whose im2col loops over the rows). The rows are taken in (B, C)
    order: the grouped kernels leave their outputs as (B, H, W, C, Cout) in memory (channels
    last), and regrouping them per row is then a transpose per b (2.6x faster than to (C, B))."""
    c, b, cin = h.shape[0], h.shape[1], h.shape[2]
    n, cout = c * b, dz.shape[2]
    shape = (n * cout, cin, *conv.kernel_size)
    gw = torch.ops.aten.convolution_backward(
        dz.transpose(0, 1).reshape(1, n * cout, *dz.shape[3:]),
        h.transpose(0, 1).reshape(1, n * cin, *h.shape[3:]), h.new_empty(shape), None,
        list(conv.stride), list(conv.padding), list(conv.dilation), False, [0, 0], n,
        [False, True, False])[1]
    parts = [gw.view(b, c, -1).transpose(0, 1)]
    if conv.bias is not None:
        parts.append(dz.sum((3, 4)))
    n2 = sum(p.square().sum(-1) for p in parts)

    def total(f: torch.Tensor) -> list[torch.Tensor]:
        return [torch.bmm(f.unsqueeze(1), p).squeeze(1) for p in parts]
    return n2, total


def _finish(w, m, clip, pieces, names, order) -> torch.Tensor:
    """Clip with the norms of every layer together and sum; `names`: each piece's parameters,
    `order`: theirs in a row."""
    f = m.to(w.dtype) * factors(sum(n2 for n2, _ in pieces).sqrt(), clip)
    out = {}
    for (_, total), own in zip(pieces, names):
        out.update(zip(own, total(f)))
    return torch.cat([out[n].reshape(w.shape[0], -1) for n in order], 1)


def _layers_grouped(model, w, x, y, m, clip) -> torch.Tensor:
    """A TorchModel whose Sequential has a grouped plan (models/grouped.py)."""
    stack = model.grouped
    params = model.unflatten(w.detach())
    taps = []
    with torch.enable_grad():     # (the graph from the inputs: no weight gradient is formed)
        h = x.detach().requires_grad_(True).reshape(x.shape[0], x.shape[1], *stack.input_shape)
        for (name, mod), layer in zip(stack.module._modules.items(), stack.layers):
            z = layer(h, params)
            if isinstance(mod, (nn.Linear, nn.Conv2d)):
                taps.append((name, mod, h.detach(), z))
            h = z
        loss = model.sample_loss(h, y).sum()
        dzs = torch.autograd.grad(loss, [z for *_, z in taps])
    pieces, names = [], []
    for (name, mod, hin, _), dz in zip(taps, dzs):
        pieces.append(_dense(hin, dz, mod.bias is not None) if isinstance(mod, nn.Linear)
                      else _conv(hin, dz, mod))
        names.append([f"{name}.weight"] + ([f"{name}.bias"] if mod.bias is not None else []))
    return _finish(w, m, clip, pieces, names, model.names)


def _layers_stacked(model, w, x, y, m, clip) -> torch.Tensor:
    """A functional.Model: affine layers with ReLU between them."""
    parts = model.unflatten(w.detach())
    taps = []
    with torch.enable_grad():
        h = x.detach().requires_grad_(True)
        for i, (wt, b) in enumerate(parts):
            z = torch.bmm(h, wt.transpose(1, 2)) if b is None else \
                torch.baddbmm(b.unsqueeze(1), h, wt.transpose(1, 2))
            taps.append((h.detach(), z, b is not None))
            h = torch.relu(z) if i < len(parts) - 1 else z
        loss = model.sample_loss(h, y).sum()
        dzs = torch.autograd.grad(loss, [z for _, z, _ in taps])
    pieces = [_dense(hin, dz, bias) for (hin, _, bias), dz in zip(taps, dzs)]
    names = [[(i, "w")] + ([(i, "b")] if bias else []) for i, (_, _, bias) in enumerate(taps)]
    return _finish(w, m, clip, pieces, names, [n for own in names for n in own])
