"""LEAF's Shakespeare model (Caldas et al., "LEAF: A Benchmark for Federated Settings", 2018;
models/shakespeare/stacked_lstm.py): an 8-dimensional character embedding, two LSTM layers of
256 units, and a dense layer over the characters applied to the last position's output.

Inputs are int64 character indices (B, T) (T = 80 in LEAF); the embedding's vocabulary is the
data's (`vocab`, given by the data set: 80 for LEAF's characters, the largest index + 1 for a
plugin's integer rows), the output one score per class (the next character in LEAF, where the
two are the same). nn.LSTM keeps two bias vectors per gate where LEAF's
TensorFlow cell has one, so it has 2 x 4 x 256 more parameters per layer (819,920 in all for 80
characters). Options: `embed`, `hidden`, `layers`, `vocab` (default: the data's)."""
from __future__ import annotations

from ..registry import declare_model

declare_model("char_lstm", code=f"{__name__}.net:char_lstm", inputs="indices",
              summary=__doc__.split("\n")[0],
              options={"embed": "character embedding width (default 8)",
                       "hidden": "LSTM width, or one equal width per layer (default 256)",
                       "layers": "LSTM layers (default 2, or the length of hidden)",
                       "vocab": "embedding vocabulary (default: the data's)"})
