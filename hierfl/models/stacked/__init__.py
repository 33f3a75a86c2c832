"""The stacked built-in models: logistic regression, least squares and an MLP, whose closed forms
and fused steps work on all clients' parameters at once (models/functional.py). Their factories
are torch-free until called, so they register at once with the plugins' decorator."""
from __future__ import annotations

import math

from typing import TYPE_CHECKING

from ..registry import register_model

if TYPE_CHECKING:
    from ..functional import Model


@register_model("logreg")
def logreg(input_shape: tuple[int, ...], num_classes: int, bias: bool = True) -> Model:
    """Multinomial logistic regression (closed-form gradients, fused SGD steps)."""
    from ..functional import Layer, Model       # torch: declaring stays torch-free
    return Model([Layer(math.prod(input_shape), num_classes, bias)], "classification", "logreg")


@register_model("linear", task="regression")
def linear(input_shape: tuple[int, ...], num_classes: int, bias: bool = True) -> Model:
    """Least squares (closed-form gradients, fused SGD steps); num_classes = outputs."""
    from ..functional import Layer, Model       # torch: declaring stays torch-free
    return Model([Layer(math.prod(input_shape), num_classes, bias)], "regression", "linear")


@register_model("mlp")
def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: list[int] | None = None,
        bias: bool = True) -> Model:
    """ReLU layers of `hidden` widths, autograd through stacked matrix products."""
    from ..functional import Layer, Model       # torch: declaring stays torch-free
    widths = [math.prod(input_shape), *(hidden if hidden is not None else [200, 200]),
              num_classes]
    return Model([Layer(a, b, bias) for a, b in zip(widths[:-1], widths[1:])],
                 "classification", "mlp")
