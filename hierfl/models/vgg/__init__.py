"""VGG-11 and VGG-16 (Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale
Image Recognition", ICLR 2015: configurations A and D) with the CIFAR head FL papers use
(after chengyangfu/pytorch-vgg-cifar10): the paper's 3x3 convolutions (padding 1, ReLU, with a
bias) in five stages of 64, 128, 256, 512 and 512 channels, each stage ending in 2x2
max-pooling, so a 32x32 image leaves 512 x 1 x 1; then the classifier

    Dropout(p), Linear(512, 512), ReLU, Dropout(p), Linear(512, 512), ReLU, Linear(512, classes)

(the paper's 4096-wide dense layers narrowed to 512; p = `dropout`, default 0.0: no dropout
layers). 15,245,130 parameters for VGG-16 on 10 classes, 9,750,922 for VGG-11.
`batch_norm: true` puts BatchNorm after every convolution, before its ReLU (torchvision's
vgg*_bn; the convolutions keep their bias). Images need at least 32x32 pixels (five
poolings); larger ones are average-pooled to 1x1 before the classifier. A flat input of
d = s * s features is one s x s channel, d = 3 s^2 three."""
from __future__ import annotations

from ..registry import declare_model

declare_model("vgg", code=f"{__name__}.net:vgg", inputs="images",
              summary=__doc__.split("\n")[0],
              options={"depth": "11 (configuration A) or 16 (configuration D) (default 16)",
                       "batch_norm": "BatchNorm after every convolution (default false)",
                       "dropout": "dropout probability before the two hidden dense layers "
                                  "(default 0.0: no dropout layer)"})
