"""The `compress:` key of an algorithm entry: one codec per message direction (hierfl/compress
applies them; docs/compression.md gives each kind's rule, bytes and reference)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import Problems
from .fields import compact, positive, spec

KINDS = ("none", "topk", "randk", "qsgd", "sign", "int8", "fp16")
DIRECTIONS = ("up", "down", "edge_up", "edge_down")
_SPARSE_KINDS = ("topk", "randk")
_SEEDED = ("randk", "qsgd")     # draw random numbers: need a round to seed from


def _ratio(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


MAX_LEVELS = 1 << 24    # qsgd: a float32 level and the 24-bit uniform that rounds it hold no more


def _levels(v: int) -> str | None:
    if v < 1:
        return "must be >= 1"
    return None if v <= MAX_LEVELS else f"must be at most {MAX_LEVELS} (2^24: a float32 " \
        "entry's level and its 24-bit rounding draw resolve no finer)"


@dataclass(frozen=True)
class CodecSpec:
    """How one direction's messages are encoded."""

    kind: Literal["none", "topk", "randk", "qsgd", "sign", "int8", "fp16"] = spec(
        "none", "the codec: rule, bytes and reference of each in docs/compression.md")
    ratio: float | None = spec(None, "topk, randk: fraction of each tensor's entries sent, in "
                               "(0, 1] (k = ceil(ratio * P))", check=_ratio)
    k: int | None = spec(None, "topk, randk: entries sent per tensor (instead of ratio)",
                         check=positive)
    levels: int | None = spec(None, "qsgd: quantisation levels s, 1 <= s <= 2^24",
                              check=_levels)
    error_feedback: bool = spec(False, "keep what was not sent per sender and add it to its "
                                "next message (up only)")
    encoding: Literal["sparse", "bitmap", "best"] = spec(
        "sparse", "topk: how the kept entries are counted (as the ledger's sparse encodings)")

    def __post_init__(self) -> None:
        if self.kind in _SPARSE_KINDS and (self.ratio is None) == (self.k is None):
            raise ValueError(f"kind {self.kind!r} needs exactly one of ratio, k")
        if self.kind not in _SPARSE_KINDS and (self.ratio is not None or self.k is not None):
            raise ValueError(f"ratio and k apply to topk and randk, not {self.kind!r}")
        if self.kind == "qsgd" and self.levels is None:
            raise ValueError("kind 'qsgd' needs levels (s >= 1)")
        if self.kind != "qsgd" and self.levels is not None:
            raise ValueError(f"levels applies to qsgd, not {self.kind!r}")
        if self.kind == "none" and self.error_feedback:
            raise ValueError("error_feedback needs a kind other than none")
        if self.kind != "topk" and self.encoding != "sparse":
            raise ValueError(f"encoding applies to topk, not {self.kind!r}")

    @property
    def active(self) -> bool:
        return self.kind != "none"


@dataclass(frozen=True)
class CompressSpec:
    """One codec per direction: client -> edge (`up`), edge -> client (`down`), aggregator ->
    parent (`edge_up`), parent -> aggregator (`edge_down`). In a flat run the cloud's broadcast
    is `down` and the clients' uploads are `up`."""

    up: CodecSpec = spec(CodecSpec(), "client -> edge (every tensor a client uploads)")
    down: CodecSpec = spec(CodecSpec(), "edge -> client (the model the clients start from)")
    edge_up: CodecSpec = spec(CodecSpec(), "aggregator -> parent (hierarchical algorithms)")
    edge_down: CodecSpec = spec(CodecSpec(), "parent -> aggregator (hierarchical algorithms)")

    def __post_init__(self) -> None:
        for d in DIRECTIONS[1:]:
            if getattr(self, d).error_feedback:
                raise ValueError(f"{d}.error_feedback: error feedback is kept per client, on up "
                                 "only")
        for d in ("edge_up", "edge_down"):
            if getattr(self, d).kind in _SEEDED:
                raise ValueError(f"{d}.kind {getattr(self, d).kind!r}: random codecs are seeded "
                                 "per client and round, on up and down only")

    @property
    def active(self) -> bool:
        return any(getattr(self, d).active for d in DIRECTIONS)


def given_problems(p: Problems, key: str, raw: object, hierarchical: bool,
                   chooser: str | None = None) -> None:
    """What the dataclasses cannot see in an entry's `compress:` (at `key`) as written:
    `encoding: sparse` (the default, so otherwise accepted silently) on a kind other than topk
    (bitmap and best are CodecSpec's to refuse); `edge_up` / `edge_down` coding something on a
    flat algorithm, whose edges relay the clients' messages (coded by up / down) and never send
    an upload of their own; `down` coding something for an algorithm (`chooser`) whose clients
    start from models they choose (IFCA's clusters), not from the one broadcast model it codes."""
    if not isinstance(raw, dict):
        return
    for d in DIRECTIONS:
        codec = raw.get(d)
        if not isinstance(codec, dict):
            continue
        kind = codec.get("kind", "none")
        if d == "down" and chooser is not None and kind != "none":
            p.add(f"{key}.{d}.kind", kind, f"{chooser}'s clients start from models they choose "
                  "(IFCA: its cluster models), not from one broadcast model: down compression "
                  "is not supported for it")
        if codec.get("encoding") == "sparse" and kind != "topk":
            p.add(f"{key}.{d}.encoding", "sparse", f"encoding applies to topk, not {kind!r}")
        if d in ("edge_up", "edge_down") and not hierarchical and kind != "none" and \
                kind not in _SEEDED:            # (random kinds there: CompressSpec's refusal)
            p.add(f"{key}.{d}.kind", kind, "applies to hierarchical algorithms (an "
                  "aggregator's own upload and the model its parent sends); a flat "
                  "algorithm's edges relay the clients' messages, coded by up and down")


def described(comp: object) -> str:
    """The directions an entry codes, as written in summary.json ("up={kind=topk, ratio=0.01,
    error_feedback=True}, edge_up={kind=int8}"; defaults left out); "" for none."""
    if not isinstance(comp, dict):
        return ""
    on = {d: {k: v for k, v in c.items() if v is not None and v is not False
              and not (k == "encoding" and v == "sparse")}
          for d, c in comp.items() if isinstance(c, dict) and c.get("kind") != "none"}
    return compact(on)
