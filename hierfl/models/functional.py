"""Small models as pure functions of a stacked parameter matrix.

Every model is evaluated for C clients at once: parameters are a (C, P) tensor (one row per
client, laid out as `torch.nn.Linear` layers in `model.parameters()` order: weight (out, in)
row-major, then bias), inputs (C, B, d), per-sample weights (C, B) that sum to one per client
(zero weight = padding). `loss_grad` is the hot path: closed-form for the linear families,
autograd through stacked matmuls for MLPs. `loss_grad_autograd` is the reference used by the
sequential executor and the tests."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config.schema import ModelSpec
from . import registry
from .threads import one_thread


@dataclass(frozen=True)
class Layer:
    n_in: int
    n_out: int
    bias: bool

    @property
    def size(self) -> int:
        return self.n_out * self.n_in + (self.n_out if self.bias else 0)


class Model:
    """A stack of affine layers with ReLU between them; the loss depends on the task."""

    def __init__(self, layers: list[Layer], task: str, name: str):
        self.layers = layers
        self.task = task            # "classification" or "regression"
        self.name = name
        self.n_params = sum(l.size for l in layers)
        self.fwd_flops = float(sum(2 * l.n_in * l.n_out + (l.n_out if l.bias else 0)
                                   for l in layers))

    # --------------------------------------------------------------------------- parameters
    def init(self, gen: torch.Generator, zeros: bool = False) -> torch.Tensor:
        """torch.nn.Linear's default init (uniform +-1/sqrt(fan_in)), from `gen`."""
        parts = []
        for l in self.layers:
            bound = 1.0 / math.sqrt(l.n_in)
            parts.append(torch.empty(l.n_out * l.n_in).uniform_(-bound, bound, generator=gen))
            if l.bias:
                parts.append(torch.empty(l.n_out).uniform_(-bound, bound, generator=gen))
        w = torch.cat(parts)
        return torch.zeros_like(w) if zeros else w

    def unflatten(self, w: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Views (C, out, in) and (C, out) of each layer."""
        out, pos, c = [], 0, w.shape[0]
        for l in self.layers:
            wt = w[:, pos:pos + l.n_out * l.n_in].view(c, l.n_out, l.n_in)
            pos += l.n_out * l.n_in
            b = None
            if l.bias:
                b = w[:, pos:pos + l.n_out]
                pos += l.n_out
            out.append((wt, b))
        return out

    # --------------------------------------------------------------------------- forward / loss
    def forward(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Outputs (C, B, o); a narrow layer's (o <= NARROW) come as a transposed view."""
        return self._forward(self.unflatten(w), x)

    def _forward(self, parts: list[tuple[torch.Tensor, torch.Tensor | None]],
                 x: torch.Tensor) -> torch.Tensor:
        h = x
        for i, (wt, b) in enumerate(parts):
            h = _layer_t(h, wt, b).transpose(1, 2) if wt.shape[1] <= NARROW else \
                torch.bmm(h, wt.transpose(1, 2)) if b is None else \
                torch.baddbmm(b.unsqueeze(1), h, wt.transpose(1, 2))
            if i < len(parts) - 1:
                h = torch.relu(h)
        return h

    def sample_loss(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(C, B) per-sample loss from outputs z (C, B, o)."""
        if self.task == "classification":
            return torch.logsumexp(z, -1) - z.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        r = z - (y.unsqueeze(-1) if y.dim() == 2 else y)
        return (r * r).mean(-1)

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        return (self.sample_loss(self.forward(w, x), y) * m).sum(1)

    def loss_grad_autograd(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                           m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Autograd with every layer's weight and bias as leaves of their own: a gradient
        with respect to views of one (C, P) tensor would fill a (C, P) zero tensor per view
        and add them up (70% of an MLP step at 784-200-200-10, 20 clients of batch 20)."""
        with torch.enable_grad():
            parts = [(wt.detach().requires_grad_(True),
                      None if b is None else b.detach().requires_grad_(True))
                     for wt, b in self.unflatten(w)]
            leaves = [t for part in parts for t in part if t is not None]
            loss = (self.sample_loss(self._forward(parts, x), y) * m).sum(1)
            grads = torch.autograd.grad(loss.sum(), leaves)
        c = w.shape[0]
        return loss.detach(), torch.cat([g.reshape(c, -1) for g in grads], 1)

    def loss_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                  m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if len(self.layers) != 1:
            return self.loss_grad_autograd(w, x, y, m)
        loss, g = self._affine(w, x, y, m, True)
        assert loss is not None
        return loss, g

    def grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        """The gradient of loss_grad without the loss (the hot path of a local step)."""
        if len(self.layers) != 1:
            return self.loss_grad_autograd(w, x, y, m)[1]
        return self._affine(w, x, y, m, False)[1]

    def _affine(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                want_loss: bool) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Closed form for one affine layer: dL/dz = m (softmax(z) - onehot(y)) (cross-entropy)
        or m 2 (z - y) / o (squared error), then dL/dW = dz^T x and dL/db = sum of dz."""
        ((wt, b),) = self.unflatten(w)
        # outputs as (C, o, B): z^T = W x^T is the fast product for few outputs and many rows
        # (3-4x at o = 10, B = 80), reductions over o run along contiguous rows of B, and
        # dL/dW = dz^T x needs no transpose
        z = _layer_t(x, wt, b) if wt.shape[1] <= NARROW else \
            (torch.bmm(x, wt.transpose(1, 2)) if b is None else
             torch.baddbmm(b.unsqueeze(1), x, wt.transpose(1, 2))).transpose(1, 2)
        m3 = m.unsqueeze(1)                                       # (C, 1, B)
        loss = None
        if self.task == "classification":
            y3 = y.unsqueeze(1)
            if want_loss:
                lse = torch.logsumexp(z, 1, keepdim=True)
                loss = ((lse - z.gather(1, y3)).squeeze(1) * m).sum(1)
                dz = torch.exp(z - lse)
            else:
                dz = _softmax_1(z)
            dz = dz * m3
            dz.scatter_add_(1, y3, -m3)
        else:
            r = z - (y.unsqueeze(1) if y.dim() == 2 else y.transpose(1, 2))
            if want_loss:
                loss = ((r * r).mean(1) * m).sum(1)
            dz = r * (m3 * (2.0 / z.shape[1]))
        gw = torch.bmm(dz, x).reshape(w.shape[0], -1)
        if b is None:
            return loss, gw
        return loss, torch.cat([gw, dz.sum(2)], 1)

    # --------------------------------------------------------------------------- fused SGD
    def sgd_steps(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                  lr: float, decay: float | torch.Tensor | None = None,
                  shift: torch.Tensor | None = None) -> torch.Tensor | None:
        """T plain SGD steps at once on a one-layer model (None for deeper models):
            w <- w - lr (grad F(w; x[:, t], y[:, t], m[:, t]) + decay w + shift),  t = 0..T-1,
        with x (C, T, B, d), y (C, T, B[, o]), m (C, T, B); decay a float or (C, 1), shift (C, P)
        or (P,) (the affine terms: prox mu (w - a) and linear v). Within the call the
        parameters live as (C, o, d + 1) = [W | b] against inputs [x | 1], so that a step is
        z = x W^T, dz = m (softmax(z) - onehot(y)) (or m 2 (z - y) / o) and one
        w <- baddbmm(keep w + shift', dz^T, x, alpha = -lr): four tensor operations."""
        cls = type(self)
        if len(self.layers) != 1 or cls.grad is not Model.grad or cls._affine is not Model._affine:
            return None                   # deeper, or a subclass with its own gradients
        layer = self.layers[0]
        c, t_steps, b = x.shape[0], x.shape[1], x.shape[2]
        wa = self._to_rows(w)
        xa = torch.cat([x, x.new_ones(c, t_steps, b, 1)], -1) if layer.bias else x
        m4 = m.unsqueeze(-1)
        if self.task == "classification":
            neg = x.new_zeros(c, t_steps, b, layer.n_out).scatter_(
                -1, y.unsqueeze(-1), -m4)                          # -m onehot(y)
            scale = m4
        else:
            scale = m4 * (2.0 / layer.n_out)
            neg = -(y.unsqueeze(-1) if y.dim() == 3 else y) * scale
        keep = None if decay is None else 1.0 - lr * decay
        if isinstance(keep, torch.Tensor):
            keep = keep.reshape(-1, 1, 1)
        base = None if shift is None else self._to_rows((-lr * shift).expand(c, -1))
        for xt, nt, st in zip(xa.unbind(1), neg.unbind(1), scale.unbind(1)):
            z = torch.bmm(xt, wa.transpose(1, 2))
            if self.task == "classification":
                z = torch.softmax(z, -1)
            dz = torch.addcmul(nt, z, st)
            if keep is None:
                start = wa if base is None else wa + base
            elif base is None:
                start = wa * keep
            elif isinstance(keep, torch.Tensor):
                start = torch.addcmul(base, wa, keep)
            else:
                start = torch.add(base, wa, alpha=keep)
            wa = torch.baddbmm(start, dz.transpose(1, 2), xt, alpha=-lr)
        return self._from_rows(wa)

    def _to_rows(self, w: torch.Tensor) -> torch.Tensor:
        """(C, P) -> (C, o, d + 1): row j = (W_j, b_j) (or (C, o, d) without bias)."""
        ((wt, b),) = self.unflatten(w)
        return wt.contiguous() if b is None else torch.cat([wt, b.unsqueeze(-1)], -1)

    def _from_rows(self, wa: torch.Tensor) -> torch.Tensor:
        c = wa.shape[0]
        if not self.layers[0].bias:
            return wa.reshape(c, -1)
        return torch.cat([wa[:, :, :-1].reshape(c, -1), wa[:, :, -1]], 1)

    def reference(self) -> "Model":
        """The same model with autograd gradients and no fused steps: the reference path of
        the sequential executor (which checks the closed forms against it)."""
        return AutogradModel(self)

    def correct(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(C, B) 1.0 where the prediction is right (classification only)."""
        # argmax along a strided last dimension is ~5x slower than copying first
        return (self.forward(w, x).contiguous().argmax(-1) == y).to(x.dtype)


class AutogradModel(Model):
    """A model whose gradients come from autograd (`Model.reference`)."""

    def __init__(self, base: Model):
        super().__init__(base.layers, base.task, base.name)

    def loss_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                  m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.loss_grad_autograd(w, x, y, m)

    def grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        return self.loss_grad_autograd(w, x, y, m)[1]

    def sgd_steps(self, *args, **kwargs) -> None:
        return None                       # no fused closed form: one autograd step at a time


def _softmax_1(z: torch.Tensor) -> torch.Tensor:
    """softmax over dim 1 of (C, o, B), on one intra-op thread: torch's kernel for a softmax
    along a strided dimension splits the B columns between threads, and a column's exp is
    computed by the vector or the scalar path depending on where the split falls, so the last
    bits (HierFAVG's gamma at 1e-8) moved with --threads (models/threads.py)."""
    with one_thread():
        return torch.softmax(z, 1)


NARROW = 32     # layers with at most this many outputs are computed as W x^T (see _layer_t)


def _layer_t(x: torch.Tensor, wt: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """An affine layer's outputs transposed, (C, o, B) = W x^T + b: for narrow layers (few
    outputs, many rows) this product is 1.3-4x faster than x W^T on CPU (measured at o = 1..30,
    d = 60..784, B = 10..80,000), and it leaves the outputs contiguous along the rows."""
    xt = x.transpose(1, 2)
    return torch.bmm(wt, xt) if b is None else torch.baddbmm(b.unsqueeze(2), wt, xt)


def build_model(spec: ModelSpec, dim: int, out_dim: int, n_classes: int,
                input_shape: tuple[int, ...] | None = None):
    """The scenario's model, from the registry (`hierfl.models.registry.build_model`)."""
    return registry.build_model(spec, dim, out_dim, n_classes, input_shape)
