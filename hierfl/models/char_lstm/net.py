"""The character LSTM's torch module and factory; its declaration and options: the package's
__init__.py."""
from __future__ import annotations

import torch
from torch import nn

from ..registry import ModelOptionError


class CharLSTM(nn.Module):
    def __init__(self, vocab: int, classes: int, embed: int, hidden: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embed(x.long()))
        return self.out(h[:, -1])


def char_lstm(input_shape: tuple[int, ...], num_classes: int, embed: int = 8,
              hidden: list[int] | int = 256, layers: int | None = None,
              vocab: int | None = None) -> nn.Module:
    if isinstance(hidden, list):           # `hidden: [256, 256]`: equal widths, one per layer
        if not hidden or len(set(hidden)) != 1:
            raise ModelOptionError("hidden", "char_lstm layers share one width: give equal "
                                   "widths, one per layer (e.g. [256, 256])")
        if layers is not None and layers != len(hidden):
            raise ModelOptionError("layers", f"hidden {hidden} gives {len(hidden)} layer(s): "
                                   "give layers or one width per layer, not both")
        layers, hidden = len(hidden), hidden[0]
    layers = 2 if layers is None else layers
    vocab = num_classes if vocab is None else vocab
    for key, v, top in (("embed", embed, 4096), ("hidden", hidden, 8192), ("layers", layers, 16),
                        ("vocab", vocab, 1 << 24)):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= top:
            raise ModelOptionError(key, f"{key} must be an integer in 1..{top}")
    if len(input_shape) != 1:
        raise ValueError(f"char_lstm needs character sequences, not inputs of shape {input_shape}")
    return CharLSTM(vocab, num_classes, embed, hidden, layers)
