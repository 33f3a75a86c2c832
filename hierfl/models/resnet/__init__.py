"""ResNets (He, Zhang, Ren and Sun, "Deep Residual Learning for Image Recognition", CVPR 2016)
as federated-learning papers run them on CIFAR: the CIFAR ResNets of the paper's section 4.2
(`depth` 8, 20, 32, 56) and ResNet-18 with a CIFAR stem (`depth: 18`).

CIFAR ResNet of depth 6n + 2: a 3x3 convolution to 16 channels, three stages of n basic blocks
(two 3x3 convolutions each) with 16, 32 and 64 channels on 32x32, 16x16 and 8x8 maps (the first
block of stages 2 and 3 has stride 2), global average pooling and a dense layer over the
classes. Shortcuts are the paper's option A for CIFAR: identity, and where a stage halves the
map and doubles the channels, the input subsampled by 2 and zero-padded in channels (no
parameters; 269,722 parameters for ResNet-20 on 10 classes with BatchNorm). `shortcut: B`
projects with a 1x1 convolution (and a norm) instead (272,474).

ResNet-18: the ImageNet network's BasicBlock stages [2, 2, 2, 2] of 64, 128, 256 and 512
channels, with the stem FL papers use on CIFAR (after kuangliu/pytorch-cifar): one 3x3
convolution of stride 1 to 64 channels, no max-pooling; projection shortcuts (1x1 convolution
and a norm) where the shape changes (11,173,962 parameters on 10 classes with BatchNorm).

`norm`: `batch` (BatchNorm, as the paper), `group` (GroupNorm, Wu and He 2018, with `groups`
groups per layer, default 2: the replacement for BatchNorm on non-IID clients studied by Hsieh
et al., "The Non-IID Data Quagmire of Decentralized Machine Learning", ICML 2020) or `none`
(convolutions then carry a bias). Convolutions have no bias under a norm, as in the paper.
`width` multiplies every stage's channels (rounded, at least 1). A flat input of d = s * s
features is one s x s channel, d = 3 s^2 three; any size works (the maps are average-pooled)."""
from __future__ import annotations

from ..registry import declare_model

declare_model("resnet", code=f"{__name__}.net:resnet", inputs="images",
              summary=__doc__.split("\n")[0],
              options={"depth": "8, 20, 32 or 56 (CIFAR ResNet, 6n + 2 layers), or 18 "
                                "(ResNet-18, CIFAR stem) (default 20)",
                       "norm": "batch, group or none (default batch)",
                       "groups": "GroupNorm groups per layer with norm: group (default 2)",
                       "width": "channel multiplier of every stage (default 1.0)",
                       "shortcut": "A (identity, zero-padded where the shape changes) or B "
                                   "(1x1 convolution there) (default: A for the CIFAR depths, "
                                   "B for 18)"})
