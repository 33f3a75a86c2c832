"""LeNet-5's torch module and factory; its declaration and options: the package's __init__.py."""
from __future__ import annotations

from torch import nn

from ..cnn.net import image_shape
from ..registry import ModelOptionError


def dropout_layers(p: object) -> list[nn.Module]:
    """[nn.Dropout(p)] for p in (0, 1), [] for 0 (no layer: a model without dropout keeps the
    grouped kernels of a plain Sequential); any other value is refused naming `dropout`."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ModelOptionError("dropout", f"dropout must be a number in [0, 1), not {p!r}")
    return [nn.Dropout(float(p))] if p > 0 else []


def lenet5(input_shape: tuple[int, ...], num_classes: int, dropout: float = 0.0) -> nn.Module:
    drop = dropout_layers(dropout)
    c, h, w = image_shape(input_shape)
    pad = 2 if min(h, w) < 32 else 0            # 28x28 in a 32x32 field, as LeCun's digits
    h2, w2 = ((h + 2 * pad - 4) // 2 - 4) // 2, ((w + 2 * pad - 4) // 2 - 4) // 2
    if h2 < 1 or w2 < 1:
        raise ValueError(f"lenet5 needs images of at least 10x10 pixels, not {h}x{w}")
    layers: list[nn.Module] = [] if len(input_shape) == 3 else \
        [nn.Flatten(), nn.Unflatten(1, (c, h, w))]             # (B, d) or (B, H, W) inputs
    layers += [nn.Conv2d(c, 6, 5, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
               nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
               nn.Linear(16 * h2 * w2, 120), nn.ReLU(), *drop,
               nn.Linear(120, 84), nn.ReLU(), *dropout_layers(dropout),
               nn.Linear(84, num_classes)]
    return nn.Sequential(*layers)
