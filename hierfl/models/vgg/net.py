"""VGG's torch module and factory; its declaration and options: the package's __init__.py."""
from __future__ import annotations

from torch import nn

from ..cnn.net import image_shape
from ..lenet5.net import dropout_layers
from ..registry import ModelOptionError

# channels of each 3x3 convolution, "M" a 2x2 max-pooling (the paper's table 1)
CONFIGS: dict[int, list[int | str]] = {
    11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
         512, 512, 512, "M"]}


def vgg(input_shape: tuple[int, ...], num_classes: int, depth: int = 16,
        batch_norm: bool = False, dropout: float = 0.0) -> nn.Module:
    if isinstance(depth, bool) or depth not in CONFIGS:
        raise ModelOptionError("depth", f"depth must be one of 11, 16, not {depth!r}")
    if not isinstance(batch_norm, bool):
        raise ModelOptionError("batch_norm", f"batch_norm must be true or false, not "
                               f"{batch_norm!r}")
    drop = dropout_layers(dropout)
    c, h, w = image_shape(input_shape)
    if min(h, w) < 32:
        raise ValueError(f"vgg needs images of at least 32x32 pixels (five 2x2 poolings), "
                         f"not {h}x{w}")
    layers: list[nn.Module] = [] if len(input_shape) == 3 else \
        [nn.Flatten(), nn.Unflatten(1, (c, h, w))]             # (B, d) or (B, H, W) inputs
    for v in CONFIGS[depth]:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
            continue
        layers.append(nn.Conv2d(c, v, 3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU())
        c = v
    if h // 32 > 1 or w // 32 > 1:
        layers.append(nn.AdaptiveAvgPool2d(1))
    layers += [nn.Flatten(), *drop, nn.Linear(c, 512), nn.ReLU(), *dropout_layers(dropout),
               nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)
