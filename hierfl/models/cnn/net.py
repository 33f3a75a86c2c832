"""The CNN's torch module and factory; its declaration and options: the package's __init__.py."""
from __future__ import annotations

import math

from torch import nn

from ..registry import ModelOptionError


def image_shape(input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(channels, height, width) of an input: given as such, (H, W), or flat square images."""
    if len(input_shape) == 3:
        return input_shape[0], input_shape[1], input_shape[2]
    if len(input_shape) == 2:
        return 1, input_shape[0], input_shape[1]
    d = math.prod(input_shape)
    for c in (1, 3):
        s = math.isqrt(d // c)
        if d % c == 0 and s * s * c == d:
            return c, s, s
    raise ValueError(f"cnn needs image inputs: the data's rows have shape {input_shape}, not "
                     f"(channels, height, width) nor a flat square image")


def cnn(input_shape: tuple[int, ...], num_classes: int, channels: list[int] | None = None,
        dense: int = 512, kernel: int = 5, batch_norm: bool = False,
        dropout: float = 0.0) -> nn.Module:
    channels = [32, 64] if channels is None else list(channels)
    if not channels or any(not isinstance(c, int) or c <= 0 or c > 4096 for c in channels):
        raise ModelOptionError("channels", "channels must be a non-empty list of integers in "
                               "1..4096")
    if not isinstance(dense, int) or dense < 0 or dense > 100_000:
        raise ModelOptionError("dense", "dense must be an integer in 0..100000 (0: no dense layer)")
    if not isinstance(kernel, int) or kernel <= 0 or kernel % 2 == 0 or kernel > 15:
        raise ModelOptionError("kernel", "kernel must be an odd integer in 1..15")
    if not isinstance(batch_norm, bool):
        raise ModelOptionError("batch_norm", "batch_norm must be true or false")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
            not 0 <= dropout < 1:
        raise ModelOptionError("dropout", "dropout must be a number in [0, 1)")
    c_in, h, w = image_shape(input_shape)
    shrink = 2 ** len(channels)
    if h // shrink == 0 or w // shrink == 0:
        raise ModelOptionError("channels", f"{len(channels)} poolings (one per entry of channels) "
                               f"halve a {h}x{w} image to nothing: use fewer")
    layers: list[nn.Module] = [] if len(input_shape) == 3 else \
        [nn.Flatten(), nn.Unflatten(1, (c_in, h, w))]           # (B, d) or (B, H, W) inputs
    for c_out in channels:
        if batch_norm:          # (no bias before BatchNorm: it would only be cancelled)
            layers += [nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=False),
                       nn.BatchNorm2d(c_out)]
        else:
            layers.append(nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2))
        layers += [nn.ReLU(), nn.MaxPool2d(2)]
        c_in = c_out
    flat = c_in * (h // shrink) * (w // shrink)
    layers.append(nn.Flatten())
    if dense:
        layers += [nn.Linear(flat, dense), nn.ReLU()]
        flat = dense
    if dropout:
        layers.append(nn.Dropout(float(dropout)))
    layers.append(nn.Linear(flat, num_classes))
    return nn.Sequential(*layers)
