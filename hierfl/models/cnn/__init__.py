"""The CNN of the FedAvg paper (McMahan et al., AISTATS 2017, "CNN" of section 3): two 5x5
convolutions with 32 and 64 channels, each followed by ReLU and 2x2 max-pooling, a dense layer
of 512 ReLU units and a softmax over the classes (1,663,370 parameters on 28x28 MNIST with 10
classes, 1,690,046 on FEMNIST's 62).

Adapted to the input: convolutions are padded ("same"), so a (C, H, W) input leaves the two
poolings as (channels[-1], H // 4, W // 4) (28x28 -> 7x7, 32x32 -> 8x8, 8x8 digits -> 2x2).
A flat input of d = s * s features is read as one s x s channel; d = 3 s^2 as three.
`channels` (one entry per convolution + pooling stage), `dense` (0: none) and `kernel` are
options: `model: {name: cnn, channels: [8, 16], dense: 32}`; `batch_norm: true` puts a
BatchNorm after every (then bias-free) convolution and `dropout: p` a dropout before the output
layer (both per-client state: docs/howto/local-training.md)."""
from __future__ import annotations

from ..registry import declare_model

declare_model("cnn", code=f"{__name__}.net:cnn", inputs="images", summary=__doc__.split("\n")[0],
              options={"channels": "convolution widths, one per convolution + 2x2 pooling stage "
                                   "(default [32, 64])",
                       "dense": "units of the dense ReLU layer before the output (default 512; 0: "
                                "none)",
                       "kernel": "odd square kernel size of every convolution (default 5)",
                       "batch_norm": "BatchNorm after every convolution (bias-free "
                                     "convolutions; default false)",
                       "dropout": "dropout before the output layer (default 0)"})
