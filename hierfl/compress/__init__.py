"""Message codecs: what is sent, what it costs in bytes, what the receiver gets
(docs/compression.md). kinds.py: the codecs; layer.py: where the round runner applies them."""
from .kinds import Coded, compress, kept, qsgd_bits, row_bytes, uniform
from .layer import Compressor, EdgeState, Sent, build

__all__ = ["Coded", "Compressor", "EdgeState", "Sent", "build", "compress", "kept", "qsgd_bits",
           "row_bytes", "uniform"]
