"""Any `torch.nn.Module` as a stacked model: the same interface as `functional.Model`, a pure
function of a parameter matrix w (C, P) with one row per client.

A row is the module's parameters in `named_parameters()` order, each flattened row-major; a
client's module is evaluated with `torch.func.functional_call` on views into its row. Inputs
arrive as flat rows x (C, B, d) (float features, or int64 indices for text) and are reshaped to
(B, *input_shape) per client.

Gradients for C clients at once take one of two paths, both exact (the same maths, rounding
aside), chosen per model by `batching`:
- "loop": one autograd pass per client on its own parameter views, gradients written into a
  (C, P) matrix. Best where the work of one client is large enough to keep the kernels busy
  (the FedAvg CNN on 28x28 images: vmap was 0.7x of it on this CPU) and for recurrent layers
  (`nn.LSTM`'s fused kernel has no vmap rule worth having);
- "vmap": `torch.func.vmap(grad(functional_call))` over the clients, one call for all of them:
  best where per-call overhead dominates (small CNNs on 8x8 digits: 2x the loop); a Sequential
  of known layers runs the grouped kernels vmap lowers to directly, without functorch's per-call
  work (models/grouped.py: an MLP's bytes; a CNN's convolutions on faster kernels, equal to
  rounding; the digits CNN ~4.5x the loop).
"auto" picks "loop" for modules with recurrent layers or a forward pass above
`VMAP_MAX_FLOPS` per sample, else "vmap"; the choice is a fixed rule (no timing at run time), so
a scenario gives the same bytes on every run.

Local SGD on the "loop" path runs through `client_steps` (the solver's fused multi-step call):
a client's parameters stay in the module across all its steps of a span and are updated in
place, the same floating-point operations as the step-by-step path (the same bytes), without
its per-step copies (W6: 0.78x -> see benchmarks/README.md). The loop path computes a
minibatch only up to its last row of nonzero weight (`real_rows`: a short last batch's padding
is left out; the vmap path computes it), so its last bits are not the padded batch's.

Per-client model state (`stateful`): BatchNorm layers that track running statistics and dropout
(a Dropout layer, a multi-layer RNN's or an attention's, p > 0). Such a model always runs on the
"loop" path, each client's module fed its own running statistics (a (C, Q) row of `buffers`,
`init_buffers`) and, at each step, torch's generator seeded from the client's own counter-based
stream (`run.seeds`): the numbers of the module run client by client in plain torch with
`torch.manual_seed(seed)` before each step, whatever the batching. Its rows are not split into
chunks (BatchNorm's statistics are the whole minibatch's). Evaluation (`forward` with grad off)
runs the module in eval mode with given statistics: no dropout, BatchNorm by its running
statistics. Without a `Run`, a training-mode pass (a gamma check on full data) draws its masks
from seed 0 and leaves no statistics behind.

FLOPs: `fwd_flops` is counted once from the module itself with
`torch.utils.flop_counter.FlopCounterMode` on one sample (matrix products and convolutions;
elementwise work is not counted, as in the closed forms of `functional.Model`)."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable, Literal

import torch
from torch import nn
from torch.func import grad_and_value, vmap

from .aliases import call, slot_aliases
from .flops import measure as _measure
from .grouped import GroupedStack, run_pooled

Batching = Literal["auto", "loop", "vmap"]
RowUpdate = Callable[[int], "Callable[[torch.Tensor, torch.Tensor, float], None] | None"]
VMAP_MAX_FLOPS = 2.0e6      # forward FLOPs per sample below which "auto" batches with vmap
ACT_BUDGET = 1 << 24        # activation elements of one chunk of rows (64 MiB in float32)


class OneRowBatch(ValueError):
    """BatchNorm in training mode was given a minibatch of one row (torch refuses it)."""


@dataclass
class Run:
    """The per-client model state of one training pass of C clients: running statistics
    (C, Q), replaced by the pass's new ones, and each client's dropout seed for the pass."""

    buffers: torch.Tensor
    seeds: list[int]


def random_layers(module: nn.Module) -> list[tuple[str, str, float]]:
    """(path, layer type, p) of every layer that draws dropout masks (p > 0)."""
    out = []
    for path, m in module.named_modules():
        p = 0.0
        if isinstance(m, nn.modules.dropout._DropoutNd):
            p = m.p
        elif isinstance(m, nn.RNNBase) and m.num_layers > 1:
            p = m.dropout
        elif isinstance(m, nn.MultiheadAttention):
            p = m.dropout
        if p > 0:
            out.append((path or "(root)", type(m).__name__, float(p)))
    return out


def stat_buffers(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(name, buffer) of every running statistic: the buffers of BatchNorm-like layers that
    track them (running_mean, running_var, num_batches_tracked)."""
    out = []
    for path, m in module.named_modules():
        if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats:
            for n, b in m.named_buffers(recurse=False):
                if b is not None:
                    out.append((f"{path}.{n}" if path else n, b))
    return out


class TorchModel:
    """A `torch.nn.Module` behind the stacked-parameter interface of `functional.Model`."""

    layers: tuple = ()      # no affine-layer description (the closed forms do not apply)

    def __init__(self, module: nn.Module, input_shape: tuple[int, ...], task: str, name: str,
                 batching: Batching = "auto"):
        self.module = module
        self.input_shape = tuple(int(s) for s in input_shape)
        self.task, self.name = task, name
        named = list(module.named_parameters())
        if not named:
            raise ValueError(f"model {name!r} has no parameters")
        self.names = [n for n, _ in named]
        self._plist = [p for _, p in named]
        self.shapes = [tuple(p.shape) for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.n_params = int(sum(self.sizes))
        self.fwd_flops, self.act_per_sample, self.out_shape = _measure(module, self.input_shape,
                                                                        named[0][1])
        recurrent = any(isinstance(m, nn.RNNBase) for m in module.modules())
        stats = stat_buffers(module)
        self._blist = [b for _, b in stats]
        self.buffer_names = [n for n, _ in stats]
        self.buffer_sizes = [b.numel() for b in self._blist]
        self.n_buffers = int(sum(self.buffer_sizes))          # Q
        self._fresh: torch.Tensor | None = None
        self.random = bool(random_layers(module))
        self.stateful = self.n_buffers > 0 or self.random
        if batching == "auto":
            batching = "loop" if recurrent or self.stateful or \
                self.fwd_flops > VMAP_MAX_FLOPS else "vmap"
        elif self.stateful:
            batching = "loop"           # per-client statistics and masks (module doc)
        self.batching = batching
        self.aliases = slot_aliases(module)     # a layer held twice: aliases.py
        self.grouped = GroupedStack.plan(module, self.input_shape)

    # --------------------------------------------------------------------------- parameters
    def init(self, gen: torch.Generator, zeros: bool = False) -> torch.Tensor:
        """torch's default initialisation of every layer, drawn from `gen` (see `init_values`)."""
        w = init_values(self.module, gen)
        return torch.zeros_like(w) if zeros else w

    def norm_mask(self) -> torch.Tensor:
        """(P,) True at the entries of BatchNorm layers' parameters (FedBN keeps them local)."""
        owners = {id(p) for m in self.module.modules()
                  if isinstance(m, nn.modules.batchnorm._BatchNorm)
                  for p in m.parameters(recurse=False)}
        return torch.cat([torch.full((size,), id(p) in owners, dtype=torch.bool)
                          for p, size in zip(self._plist, self.sizes)])

    def init_buffers(self) -> torch.Tensor:
        """The running statistics a fresh module starts from (mean 0, variance 1, no batch
        tracked) as one (Q,) row in the parameters' dtype (a new tensor)."""
        dt = self._plist[0].dtype
        if self._fresh is None or self._fresh.dtype != dt:
            fresh = copy.deepcopy(self.module)
            for m in fresh.modules():
                if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats:
                    m.reset_running_stats()
            self._fresh = torch.cat([b.detach().to(dt).reshape(-1)
                                     for _, b in stat_buffers(fresh)]) if self._blist else \
                self._plist[0].new_zeros(0)
        return self._fresh.clone()

    def _load_buffers(self, row: torch.Tensor) -> None:
        with torch.no_grad():
            for b, v in zip(self._blist, row.split(self.buffer_sizes)):
                b.copy_(v.view(b.shape))

    def _read_buffers(self, out: torch.Tensor) -> None:
        torch.cat([b.detach().to(out.dtype).reshape(-1) for b in self._blist], out=out)

    def unflatten(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of a (..., P) tensor as the module's parameters, each (..., *shape)."""
        lead, out, pos = w.shape[:-1], {}, 0
        for name, shape, size in zip(self.names, self.shapes, self.sizes):
            out[name] = w[..., pos:pos + size].view(*lead, *shape)
            pos += size
        return out

    def _call(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """One client's outputs (B, o) from its flat rows x (B, d)."""
        return call(self.module, params, self.aliases, (x.reshape(x.shape[0], *self.input_shape),))

    def _chunk(self, clients: int = 1) -> int:
        if self.n_buffers:
            return 1 << 62          # BatchNorm: the statistics of the whole minibatch
        return max(1, ACT_BUDGET // max(1, self.act_per_sample * clients))

    def _load(self, row: torch.Tensor) -> list[nn.Parameter]:
        """Copy one client's row into the module's own parameters (the loop path runs the
        module itself: functional_call costs ~0.3 ms a call, a 1.7 M row's copy ~1 ms)."""
        params = self._plist
        if params[0].dtype != row.dtype:
            self.module.to(row.dtype)
        with torch.no_grad():
            for p, v in zip(params, row.split(self.sizes)):
                p.copy_(v.view(p.shape))
        return params

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        return run_pooled(self.module, x.reshape(x.shape[0], *self.input_shape))

    # --------------------------------------------------------------------------- forward / loss
    def forward(self, w: torch.Tensor, x: torch.Tensor,
                buffers: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs (C, B, o), client by client, rows in chunks that bound the activations
        (differentiable in w when w requires a gradient). A stateful model's untraced pass is
        an evaluation: eval mode, BatchNorm by `buffers` ((Q,) shared or (C, Q); default the
        fresh statistics)."""
        traced = w.requires_grad and torch.is_grad_enabled()
        if self.stateful and not traced:
            return self._evaluate(w, x, buffers)
        step = self._chunk()
        outs = []
        for k in range(w.shape[0]):
            if traced:
                params = self.unflatten(w[k])
                parts = [self._call(params, x[k, i:i + step])
                         for i in range(0, x.shape[1], step)]
            else:
                self._load(w[k])
                parts = [self._run(x[k, i:i + step]).detach()
                         for i in range(0, x.shape[1], step)]
            outs.append(torch.cat(parts) if len(parts) != 1 else parts[0])
        return torch.stack(outs)

    def _evaluate(self, w: torch.Tensor, x: torch.Tensor,
                  buffers: torch.Tensor | None) -> torch.Tensor:
        if buffers is None:
            buffers = self.init_buffers()
        step = max(1, ACT_BUDGET // max(1, self.act_per_sample))     # eval: rows independent
        outs = []
        self.module.train(False)     # eval mode
        try:
            for k in range(w.shape[0]):
                self._load(w[k])
                if self.n_buffers:
                    self._load_buffers(buffers[k] if buffers.dim() == 2 else buffers)
                parts = [self._run(x[k, i:i + step]).detach()
                         for i in range(0, x.shape[1], step)]
                outs.append(torch.cat(parts) if len(parts) != 1 else parts[0])
        finally:
            self.module.train()
        return torch.stack(outs)

    def sample_loss(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(..., B) per-sample loss from outputs z (..., B, o): cross-entropy, or the mean
        squared error over outputs (regression)."""
        if self.task == "classification":
            return nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1),
                                               reduction="none").view(y.shape)
        r = z - (y.unsqueeze(-1) if y.dim() == z.dim() - 1 else y)
        return (r * r).mean(-1)

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        return (self.sample_loss(self.forward(w, x), y) * m).sum(1)

    def _client_loss(self, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                     m: torch.Tensor) -> torch.Tensor:
        return (self.sample_loss(self._call(params, x), y) * m).sum()

    def real_rows(self, m: torch.Tensor) -> list | None:
        """Per minibatch of weights m (..., B) (a nested list of m's leading shape), the rows
        the loop path computes: up to its last row of nonzero weight. A plan pads a client's
        short last minibatch with zero-weight rows at its end (learn/batches.py); on the loop
        path they are not computed (W6: 4.8% of the rows, W7: 11%). The sum is the same
        mathematically (the weighted mean over the real rows) but its products are blocked
        for fewer rows, so the last bits differ from the padded batch's. None on the vmap path:
        it computes every row (vmap needs one shape; so do its one-client calls, which keep the
        numbers of the shipped digits_cnn). One host sync per call, not per step. A plugin model
whose rows interact (BatchNorm in training mode; dropout is refused) sees a smaller batch
here than on the vmap path, so there the two paths differ by more than the last bits."""
        if self.batching != "loop" or m.shape[-1] == 0:
            return None
        pos = torch.arange(1, m.shape[-1] + 1, device=m.device)
        return ((m != 0) * pos).amax(-1).tolist()

    def _module_grads(self, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                      want_loss: bool = True,
                      rows: int | None = None) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
        """One client's loss sum_b m[b] loss(x[b], y[b]) and its gradients, one per module
        parameter (at the values loaded in the module), rows in chunks, gradients summed;
        `rows` (from `real_rows`): only the first rows are computed (0: zero gradients)."""
        if rows is not None and rows < x.shape[0]:
            if rows == 0:
                zero = self._plist[0].new_zeros(())
                return zero, [torch.zeros_like(p) for p in self._plist]
            x, y, m = x[:rows], y[:rows], m[:rows]
        step, n = self._chunk(), x.shape[0]
        total, acc = None, []
        with torch.enable_grad():
            for i in range(0, n, step):
                z = self._run(x[i:i + step])
                lk = (self.sample_loss(z, y[i:i + step]) * m[i:i + step]).sum()
                grads = torch.autograd.grad(lk, self._plist)
                acc = list(grads) if i == 0 else [a + gp for a, gp in zip(acc, grads)]
                if want_loss:
                    total = lk.detach() if total is None else total + lk.detach()
        return total, acc

    def loss_grad_autograd(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                           m: torch.Tensor, run: Run | None = None):
        """The reference: client by client, the row loaded into the module, one autograd pass
        (rows in chunks, gradients summed), the gradient written into row k of a (C, P).
        With `run` (a stateful model's training step, `loss_grad_run`): also the new
        statistics (C, Q)."""
        c, n = w.shape[0], x.shape[1]
        new = None if run is None else run.buffers.clone()
        if n == 0:
            out = w.new_zeros(c), w.new_zeros(c, self.n_params)
            return out if run is None else (*out, new)
        losses, g = [], w.new_empty(c, self.n_params)
        rows = self.real_rows(m)
        rng = torch.random.get_rng_state() if self.random else None
        try:
            for k in range(c):
                self._load(w[k])
                if self.n_buffers:
                    self._load_buffers(run.buffers[k] if run is not None else self._scratch())
                if self.random:
                    torch.manual_seed(run.seeds[k] if run is not None else 0)
                try:
                    total, grads = self._module_grads(x[k], y[k], m[k],
                                                      rows=None if rows is None else rows[k])
                except ValueError as exc:
                    if self.n_buffers and "more than 1 value per channel" in str(exc):
                        raise OneRowBatch(str(exc)) from None
                    raise
                torch.cat([gp.reshape(-1) for gp in grads], out=g[k])
                losses.append(total)
                if run is not None and self.n_buffers:
                    self._read_buffers(new[k])
        finally:
            if rng is not None:
                torch.random.set_rng_state(rng)
        loss = torch.stack(losses) if losses else w.new_zeros(0)
        return (loss, g) if run is None else (loss, g, new)

    def _scratch(self) -> torch.Tensor:
        """Statistics for a pass that keeps none (a measurement): the fresh ones (a training-
        mode pass normalises by the batch; the running statistics only receive it)."""
        if self._fresh is None:
            self.init_buffers()
        return self._fresh

    def _loss_grad_vmap(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                        m: torch.Tensor,
                        functorch: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The vmap path, through `grouped` where the module has a plan (module doc), else (or
        with `functorch`) through functorch itself."""
        c = w.shape[0]
        params = self.unflatten(w)
        step = self._chunk(c)
        loss, g = w.new_zeros(c), w.new_zeros(c, self.n_params)
        if functorch or self.grouped is None or x.dtype != w.dtype or not self.grouped.usable():
            grads_of = vmap(grad_and_value(self._client_loss))
        else:
            params = {n: v.detach().requires_grad_(True) for n, v in params.items()}
            grads_of = partial(self.grouped.grads, self.sample_loss)
        with torch.enable_grad():
            for i in range(0, x.shape[1], step):
                grads, lk = grads_of(params, x[:, i:i + step], y[:, i:i + step],
                                     m[:, i:i + step])
                loss += lk.detach()
                g += torch.cat([grads[n].reshape(c, -1) for n in self.names], 1)
        return loss, g

    def loss_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                  m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(C,) losses and (C, P) gradients of sum_b m[c, b] loss(x[c, b], y[c, b])."""
        if self.batching == "vmap" and w.shape[0] > 1:
            return self._loss_grad_vmap(w, x, y, m)
        return self.loss_grad_autograd(w, x, y, m)

    def loss_grad_run(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                      run: Run) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`loss_grad` of a stateful model's training step: client k's module holds its
        statistics run.buffers[k] and draws its masks after torch.manual_seed(run.seeds[k]);
        also gives the clients' new statistics (C, Q). torch's global generator is restored
        afterwards (nothing else of hierfl draws from it)."""
        return self.loss_grad_autograd(w, x, y, m, run)

    def grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        return self.loss_grad(w, x, y, m)[1]

    def reference(self) -> "TorchModel":
        """The same model on the plain per-client autograd path (the sequential executor's)."""
        ref = copy.copy(self)
        ref.batching = "loop"
        return ref

    def sgd_steps(self, *args, **kwargs) -> None:
        return None                 # no fused closed form (see `client_steps`)

    def client_steps(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                     lr: float, update: RowUpdate | None = None) -> torch.Tensor | None:
        """T local steps of every client at once on the "loop" path (None on "vmap": the
        solver then takes the steps one by one), x (C, T, B, d), y (C, T, B), m (C, T, B).
        Client by client: its row is loaded into the module once, its T steps run on the
        module's own parameters, and the result is copied out once, where the step-by-step
        path copied the row in, the gradients out into a (C, P) matrix and formed a new
        (C, P) iterate at every step (W6: ~20% of the time).

        `update` None: plain SGD, p <- p - lr g, in place per parameter (`g *= lr; p -= g`:
        the same floating-point operations as `w - lr * g` on the row, so the same bytes).
        Otherwise `update(k)` gives client k's step as an in-place map of its flat (1, P)
        iterate from its gradient row and lr (the program's terms; learn/solver.py): the
        gradients are gathered into one row, the row updated and loaded back at every step."""
        if self.batching != "loop":
            return None
        out = torch.empty_like(w)
        if out.numel() == 0 or x.shape[1] == 0:
            return out.copy_(w)
        rows = self.real_rows(m)
        for k in range(w.shape[0]):
            params = self._load(w[k])
            step = None if update is None else update(k)
            row, grow = out[k:k + 1], None
            if step is not None:
                row.copy_(w[k:k + 1])
                grow = w.new_empty(1, self.n_params)
            for t in range(x.shape[1]):
                _, grads = self._module_grads(x[k, t], y[k, t], m[k, t], want_loss=False,
                                              rows=None if rows is None else rows[k][t])
                if step is None:
                    with torch.no_grad():
                        for p, gp in zip(params, _owned(grads)):
                            p.sub_(gp.mul_(lr))
                    continue
                torch.cat([gp.reshape(-1) for gp in grads], out=grow[0])
                step(row, grow, lr)
                if t + 1 < x.shape[1]:
                    self._load(row[0])
            if step is None:
                torch.cat([p.detach().reshape(-1) for p in params], out=out[k])
        return out

    def correct(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(C, B) 1.0 where the prediction is right (classification only)."""
        return (self.forward(w, x).argmax(-1) == y).to(w.dtype)


def _owned(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """The gradients as tensors that may be overwritten. What autograd returns is its own
    memory once the graph is freed, but two gradients may share it (a plugin's `x + p1 + p2`
    gives both the same tensor, `torch.cat([p1, p2])` views of one buffer) and a broadcast is
    not a dense tensor: those are cloned first. A gradient that is a view of a buffer no other
    gradient uses is kept (the FedAvg CNN's dense weight, 95% of its parameters, comes back as
    such a view: cloning it cost 4% of W6's training time)."""
    storages: dict[int, int] = {}
    for gp in grads:
        key = gp.untyped_storage().data_ptr()
        storages[key] = storages.get(key, 0) + 1
    out = []
    for gp in grads:
        if storages[gp.untyped_storage().data_ptr()] > 1 or not gp.is_contiguous():
            gp = gp.clone()
        out.append(gp)
    return out


# ------------------------------------------------------------------------------- initialisation
def init_values(module: nn.Module, gen: torch.Generator) -> torch.Tensor:
    """Every parameter drawn from `gen` with torch's default rule for its layer, as one flat row
    in `named_parameters()` order; modules are visited in `modules()` order, parameters in
    their declaration order.
    - Linear, Conv*: weight and bias uniform(+-1/sqrt(fan_in)) (kaiming_uniform with a = sqrt 5);
    - LSTM / GRU / RNN: every parameter uniform(+-1/sqrt(hidden_size));
    - Embedding: normal(0, 1) (the padding row zero); norms: weight 1, bias 0;
    - any other layer: its own `reset_parameters()` run on a forked global generator seeded
      from `gen` (the global state is restored afterwards)."""
    values: dict[int, torch.Tensor] = {}
    for m in module.modules():
        own = list(m.named_parameters(recurse=False))
        if not own:
            continue
        if isinstance(m, (nn.Linear, nn.modules.conv._ConvNd)):
            bound = 1.0 / math.sqrt(max(1, m.weight[0].numel()))
            for _, p in own:
                values[id(p)] = _uniform(p, bound, gen)
        elif isinstance(m, nn.RNNBase):
            bound = 1.0 / math.sqrt(m.hidden_size)
            for _, p in own:
                values[id(p)] = _uniform(p, bound, gen)
        elif isinstance(m, nn.Embedding):
            v = torch.empty(m.weight.shape, dtype=m.weight.dtype).normal_(0.0, 1.0, generator=gen)
            if m.padding_idx is not None:
                v[m.padding_idx] = 0.0
            values[id(m.weight)] = v
        elif isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)):
            for n, p in own:
                values[id(p)] = (torch.ones if n == "weight" else torch.zeros)(
                    p.shape, dtype=p.dtype)
        else:
            values.update(_reset_from(m, own, gen))
    return torch.cat([values[id(p)].reshape(-1) for p in module.parameters()])


def _uniform(p: torch.Tensor, bound: float, gen: torch.Generator) -> torch.Tensor:
    return torch.empty(p.shape, dtype=p.dtype).uniform_(-bound, bound, generator=gen)


def _reset_from(m: nn.Module, own: list, gen: torch.Generator) -> dict[int, torch.Tensor]:
    reset = getattr(m, "reset_parameters", None)
    if reset is None:
        raise ValueError(f"cannot initialise {type(m).__name__} from the scenario seed: it has "
                         f"parameters but no reset_parameters()")
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        reset()
        return {id(p): p.detach().clone() for _, p in own}
