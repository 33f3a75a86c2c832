"""Optimizers of the local steps, stacked over clients (optax's shape, torch.optim's rules).

An optimizer is a pure pair: `init(w) -> state` and `update(g, state, w, lr) -> (w, state)`,
with w and g (C, P) (one row per client) and the state a tuple of (C, ...) tensors, which the
program keeps after w in its own State, so the solver's restrict / leave carries every client's
rows. Each client's numbers are those of torch.optim.SGD / Adam / AdamW (single-tensor,
non-capturable path) run on that client alone; Adam's step counter is per client, (C, 1), so a
client that joined the batch later or has a smaller budget gets its own bias correction.

`g` is the gradient of the local objective (loss plus the program's smooth terms, clipped
where the program clips); the program applies its proximal terms after `update`.
Plain SGD (every key zero) is no optimizer here: `build` gives None and the program keeps its
own step, fused over several steps where it can."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import torch

OptState = tuple[torch.Tensor, ...]


class Optimizer(Protocol):
    def init(self, w: torch.Tensor) -> OptState: ...

    def update(self, g: torch.Tensor, s: OptState, w: torch.Tensor,
               lr: float) -> tuple[torch.Tensor, OptState]: ...

    def step_(self, g: torch.Tensor, s: OptState, w: torch.Tensor, lr: float) -> None: ...


def _counter(w: torch.Tensor) -> torch.Tensor:
    """A per-client step counter, (C, 1), in float64 (torch keeps its step as a float; the bias
    corrections are computed in double precision as torch's Python floats are)."""
    return torch.zeros(w.shape[0], 1, dtype=torch.float64, device=w.device)


@dataclass(frozen=True)
class SGD:
    """torch.optim.SGD: weight decay added to the gradient, then momentum (the buffer is the
    gradient itself at a client's first step), Nesterov's look-ahead where asked.
    State: (steps (C, 1), buffer (C, P)) with momentum, () without."""

    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def init(self, w: torch.Tensor) -> OptState:
        return (_counter(w), torch.zeros_like(w)) if self.momentum else ()

    def update(self, g: torch.Tensor, s: OptState, w: torch.Tensor,
               lr: float) -> tuple[torch.Tensor, OptState]:
        if self.weight_decay:
            g = g.add(w, alpha=self.weight_decay)
        if not self.momentum:
            return w.add(g, alpha=-lr), s
        steps, buf = s
        later = buf.mul(self.momentum).add_(g, alpha=1 - self.dampening)
        buf = torch.where(steps > 0, later, g)
        d = g.add(buf, alpha=self.momentum) if self.nesterov else buf
        return w.add(d, alpha=-lr), (steps + 1, buf)

    def step_(self, g: torch.Tensor, s: OptState, w: torch.Tensor, lr: float) -> None:
        """`update` of ONE client in place: w (1, P), its state rows `s` (views it owns) and
        its gradient g (overwritten): the same operations, no new tensors (a per-client loop's
        step, models/torch_model.client_steps)."""
        if self.weight_decay:
            g.add_(w, alpha=self.weight_decay)
        if not self.momentum:
            w.add_(g, alpha=-lr)
            return
        steps, buf = s
        if float(steps) > 0:
            buf.mul_(self.momentum).add_(g, alpha=1 - self.dampening)
        else:
            buf.copy_(g)
        steps.add_(1)
        w.add_(g.add_(buf, alpha=self.momentum) if self.nesterov else buf, alpha=-lr)


@dataclass(frozen=True)
class Adam:
    """torch.optim.Adam (decoupled=False: weight decay added to the gradient) and AdamW
    (decoupled=True: w *= 1 - lr * weight_decay before the moments), AMSGrad where asked.
    State: (steps (C, 1), m (C, P), v (C, P)[, max v (C, P)])."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    amsgrad: bool = False
    decoupled: bool = False

    def init(self, w: torch.Tensor) -> OptState:
        moments = (torch.zeros_like(w),) * (3 if self.amsgrad else 2)
        return (_counter(w), *(m.clone() for m in moments))

    def update(self, g: torch.Tensor, s: OptState, w: torch.Tensor,
               lr: float) -> tuple[torch.Tensor, OptState]:
        steps, m, v = s[0] + 1, s[1], s[2]
        if self.weight_decay:
            if self.decoupled:
                w = w.mul(1 - lr * self.weight_decay)
            else:
                g = g.add(w, alpha=self.weight_decay)
        m = m.lerp(g, 1 - self.beta1)
        v = v.mul(self.beta2).addcmul_(g, g, value=1 - self.beta2)
        rest: OptState = ()
        top = v
        if self.amsgrad:
            top = torch.maximum(s[3], v)
            rest = (top,)
        # torch's bias corrections, in double precision (its step is a Python float); one
        # scalar when every client is at the same step (the usual lock-step), else per client
        lo, hi = steps.aminmax()
        if bool(lo == hi):
            k = float(lo)
            step_size = lr / (1 - self.beta1 ** k)
            denom = top.sqrt().div_((1 - self.beta2 ** k) ** 0.5).add_(self.eps)
            return w.addcdiv(m, denom, value=-step_size), (steps, m, v, *rest)
        step_size = (lr / (1 - self.beta1 ** steps)).to(w.dtype)
        bc2_sqrt = ((1 - self.beta2 ** steps) ** 0.5).to(w.dtype)
        denom = top.sqrt().div_(bc2_sqrt).add_(self.eps)
        return w - step_size * (m / denom), (steps, m, v, *rest)

    def step_(self, g: torch.Tensor, s: OptState, w: torch.Tensor, lr: float) -> None:
        """`update` of ONE client in place (see SGD.step_)."""
        steps, m, v = s[0], s[1], s[2]
        steps.add_(1)
        if self.weight_decay:
            if self.decoupled:
                w.mul_(1 - lr * self.weight_decay)
            else:
                g.add_(w, alpha=self.weight_decay)
        m.lerp_(g, 1 - self.beta1)
        v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
        top = v
        if self.amsgrad:
            torch.maximum(s[3], v, out=s[3])
            top = s[3]
        k = float(steps)
        denom = top.sqrt().div_((1 - self.beta2 ** k) ** 0.5).add_(self.eps)
        w.addcdiv_(m, denom, value=-lr / (1 - self.beta1 ** k))


def build(spec: Any) -> Optimizer | None:
    """The optimizer of a `train.local.optimizer` (config.schema.OptimizerSpec); None for plain
    SGD (the program's own steps)."""
    if spec is None or spec.plain:
        return None
    if spec.name == "sgd":
        return SGD(float(spec.value("momentum")), float(spec.value("dampening")),
                   bool(spec.value("nesterov")), float(spec.value("weight_decay")))
    b1, b2 = spec.value("betas")
    return Adam(float(b1), float(b2), float(spec.value("eps")), float(spec.value("weight_decay")),
                bool(spec.value("amsgrad")), decoupled=spec.name == "adamw")


@dataclass(frozen=True)
class Clip:
    """torch.nn.utils' gradient clipping on each client's gradient (a row of g): by norm
    (clip_grad_norm_: g * min(1, max_norm / (||g||_p + 1e-6)), p may be inf) or by value
    (clip_grad_value_: each entry clamped to [-max_value, max_value])."""

    max_norm: float | None = None
    norm_type: float = 2.0
    max_value: float | None = None

    def __call__(self, g: torch.Tensor) -> torch.Tensor:
        if self.max_value is not None:
            return g.clamp(-self.max_value, self.max_value)
        norm = torch.linalg.vector_norm(g, ord=self.norm_type, dim=1, keepdim=True)
        return g * torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)


def build_clip(spec: Any) -> Clip | None:
    """The clipping of a `train.local.clip` (config.schema.ClipSpec), or None."""
    if spec is None:
        return None
    p = math.inf if spec.norm_type == "inf" else float(spec.norm_type)
    return Clip(spec.max_norm, p, spec.max_value)
