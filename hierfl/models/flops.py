"""The forward FLOPs of a module, counted from the module itself: one forward pass of one sample
under `torch.utils.flop_counter.FlopCounterMode` (`measure`).

FlopCounterMode is a torch dispatch mode, and torch wraps every dispatch mode's
`__torch_dispatch__` in `torch._disable_dynamo`, which imports `torch._dynamo` at its first call
(~2 s here: half of what `hierfl validate` of a CNN scenario waited, for a module the run
never compiles). `_without_dynamo` lets that first count run the mode's own function directly
(the value `_disable_dynamo` caches after the import, set for the pass and removed after it):
the same counts, without the import. Where torch's layout differs (no such wrapper), the
count runs as before, import included."""
from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

try:                # a private name of torch's: where it is missing, the counter runs as it is
    from torch.utils.flop_counter import _FlopCounterMode
except ImportError:
    _FlopCounterMode = None  # type: ignore[assignment,misc]

_CACHE = "__dynamo_disable"     # where torch._compile._disable_dynamo caches the disabled function


@contextlib.contextmanager
def _without_dynamo() -> Iterator[None]:
    """Inside: the flop counter's dispatch runs without importing torch._dynamo (module doc)."""
    raw = None if _FlopCounterMode is None else \
        getattr(_FlopCounterMode.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    if raw is None or "torch._dynamo" in sys.modules or hasattr(raw, _CACHE):
        yield
        return
    setattr(raw, _CACHE, raw)
    try:
        yield
    finally:
        if getattr(raw, _CACHE, None) is raw:
            delattr(raw, _CACHE)


def measure(module: nn.Module, input_shape: tuple[int, ...],
             like: torch.Tensor) -> tuple[float, int, tuple | None]:
    """(forward FLOPs, activation elements, output shape, of one sample): one forward pass on a
    zero input (zero indices for embeddings) under FlopCounterMode, with hooks summing the
    outputs of every submodule. Products are counted as 2 m n k (a 5x5 convolution from Cin
    to Cout channels on an H x W output: 2 Cin Cout 25 H W); biases, activations, pooling and
    the LSTM's gate arithmetic are not."""
    embeds = any(isinstance(m, nn.Embedding) for m in module.modules())
    x = torch.zeros(1, *input_shape, dtype=torch.long if embeds else like.dtype)
    acts = [0]

    def hook(_m, _inp, out):
        for t in (out if isinstance(out, tuple) else (out,)):
            for u in (t if isinstance(t, tuple) else (t,)):
                if isinstance(u, torch.Tensor):
                    acts[0] += u.numel()

    handles = [m.register_forward_hook(hook) for m in module.modules()]
    training = module.training
    module.train(False)     # eval mode: one sample: BatchNorm in training mode refuses it (same FLOPs)
    try:
        # oneDNN's fused RNN kernel is one opaque op; without it nn.LSTM runs as the matrix
        # products FlopCounterMode counts (same values)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            with torch.backends.mkldnn.flags(enabled=False), _without_dynamo(), \
                    FlopCounterMode(display=False) as counter:
                y = module(x)
    finally:
        module.train(training)
        for h in handles:
            h.remove()
    return float(counter.get_total_flops()), max(1, acts[0]), getattr(y, "shape", None)
