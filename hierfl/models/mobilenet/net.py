"""MobileNet's torch module and factory; its declaration and options: the package's
__init__.py."""
from __future__ import annotations

from torch import nn

from ..cnn.net import image_shape
from ..resnet.net import norm_layer, norm_options, widths

# (output channels, stride of the depthwise convolution) of the 13 blocks (the paper's table 1)
BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
          (1024, 2), (1024, 1)]


def mobilenet(input_shape: tuple[int, ...], num_classes: int, width: float = 1.0,
              norm: str = "batch", groups: int = 2) -> nn.Module:
    norm_options(norm, groups)
    chans = widths((32, *(c for c, _ in BLOCKS)), width)
    bias = norm == "none"
    c, h, w = image_shape(input_shape)
    layers: list[nn.Module] = [] if len(input_shape) == 3 else \
        [nn.Flatten(), nn.Unflatten(1, (c, h, w))]             # (B, d) or (B, H, W) inputs
    layers += [nn.Conv2d(c, chans[0], 3, padding=1, bias=bias),
               norm_layer(norm, chans[0], groups), nn.ReLU()]
    c = chans[0]
    for c_out, (_, stride) in zip(chans[1:], BLOCKS):
        layers += [nn.Conv2d(c, c, 3, stride=stride, padding=1, groups=c, bias=bias),
                   norm_layer(norm, c, groups), nn.ReLU(),
                   nn.Conv2d(c, c_out, 1, bias=bias), norm_layer(norm, c_out, groups),
                   nn.ReLU()]
        c = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes)]
    return nn.Sequential(*[m for m in layers if not isinstance(m, nn.Identity)])
