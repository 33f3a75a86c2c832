"""Message codecs: what is sent, what it costs in bytes, what the receiver gets
(docs/compression.md). kinds.py: the codecs; draws.py: the random kinds' counter-based draws;
select.py: top-k's selection; layer.py: where the round runner applies them."""
from .draws import Draws
from .kinds import Coded, compress, kept, qsgd_bits, row_bytes
from .layer import Compressor, EdgeState, Sent, build

__all__ = ["Coded", "Compressor", "Draws", "EdgeState", "Sent", "build", "compress", "kept",
           "qsgd_bits", "row_bytes"]
