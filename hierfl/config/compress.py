"""What every part of hierfl knows of the `compress:` key without its codecs: the message
directions, and an entry's codecs as written in summary.json. The keys themselves (CodecSpec,
CompressSpec) are hierfl/compress/spec.py's, checked against the codecs' declarations."""
from __future__ import annotations

from .fields import compact

DIRECTIONS = ("up", "down", "edge_up", "edge_down")


def described(comp: object) -> str:
    """The directions an entry codes, as written in summary.json ("up={kind=topk, ratio=0.01,
    error_feedback=True}, edge_up={kind=int8}"; defaults left out); "" for none."""
    if not isinstance(comp, dict):
        return ""
    on = {d: {k: v for k, v in c.items() if v is not None and v is not False
              and not (k == "encoding" and v == "sparse")}
          for d, c in comp.items() if isinstance(c, dict) and c.get("kind") != "none"}
    return compact(on)
