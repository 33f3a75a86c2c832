"""MobileNet (Howard et al., "MobileNets: Efficient Convolutional Neural Networks for Mobile
Vision Applications", 2017: v1, depthwise-separable blocks) with the CIFAR stem FL papers use
(after kuangliu/pytorch-cifar): a 3x3 convolution of stride 1 to 32 channels (the paper's has
stride 2), then the paper's 13 blocks, each a 3x3 depthwise convolution (stride 2 where the
channels go to 128, 256, 512 and 1024) and a 1x1 pointwise convolution, both followed by a norm
and ReLU; global average pooling and a dense layer over the classes (32x32 -> 2x2 before the
pooling; 3,217,226 parameters on 10 classes with BatchNorm).

`width` is the paper's width multiplier alpha (every layer's channels times alpha, rounded, at
least 1); `norm`: `batch` (default, as the paper), `group` (GroupNorm with `groups` groups) or
`none` (convolutions then carry a bias), as for `resnet`. A flat input of d = s * s features is
one s x s channel, d = 3 s^2 three."""
from __future__ import annotations

from ..registry import declare_model

declare_model("mobilenet", code=f"{__name__}.net:mobilenet", inputs="images",
              summary=__doc__.split("\n")[0],
              options={"width": "width multiplier alpha of every layer's channels (default 1.0)",
                       "norm": "batch, group or none (default batch)",
                       "groups": "GroupNorm groups per layer with norm: group (default 2)"})
