"""LeNet-5 (LeCun, Bottou, Bengio and Haffner, "Gradient-based learning applied to document
recognition", Proc. IEEE 1998), as federated-learning papers run it on MNIST, FEMNIST and
CIFAR-10: a 5x5 convolution to 6 channels, 2x2 max-pooling, a 5x5 convolution to 16 channels,
2x2 max-pooling, dense ReLU layers of 120 and 84 units and one score per class.

Adapted as is usual: ReLU and max-pooling where the paper has scaled tanh and trainable
sub-sampling, every C3 map connected to every S2 map, a plain dense output layer where F6 fed
Euclidean RBF units. Inputs of 32x32 (CIFAR's 3 channels) take the convolutions unpadded as in
the paper (62,006 parameters for 10 classes); smaller images (FEMNIST's 28x28) have the first
convolution padded by 2, LeCun's 28x28 digits centred in a 32x32 field (66,126 parameters for
62 classes). A flat input of d = s * s features is one s x s channel, d = 3 s^2 three.
`dropout` (default 0.0) is applied after each of the two hidden dense layers' ReLU."""
from __future__ import annotations

from ..registry import declare_model

declare_model("lenet5", code=f"{__name__}.net:lenet5", inputs="images",
              summary=__doc__.split("\n")[0],
              options={"dropout": "dropout probability after each hidden dense layer (default "
                                  "0.0: no dropout layer)"})
