"""The `compress:` key of an algorithm entry: one codec per message direction. CodecSpec is the
one dataclass of every codec's keys; which keys a kind reads (and needs), whether it draws
random numbers, and the kinds there are come from the codecs' declarations (registry.py), so
adding a codec edits nothing here. Torch-free (`hierfl validate` reads it)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..config.compress import DIRECTIONS
from ..config.errors import Problems
from ..config.fields import positive, spec
from .registry import KEYS, codec, known, reads, readers, seeded, unknown_kind


def _ratio(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


MAX_LEVELS = 1 << 24    # qsgd: a float32 level and the 24-bit uniform that rounds it hold no more


def _levels(v: int) -> str | None:
    if v < 1:
        return "must be >= 1"
    return None if v <= MAX_LEVELS else f"must be at most {MAX_LEVELS} (2^24: a float32 " \
        "entry's level and its 24-bit rounding draw resolve no finer)"


def _kind(v: str) -> str | None:
    return None if known(v) else unknown_kind(v)


@dataclass(frozen=True)
class CodecSpec:
    """How one direction's messages are encoded."""

    kind: str = spec("none", "the codec: rule, bytes and reference of each in "
                     "docs/compression.md", check=_kind)
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
        if not known(self.kind):
            raise ValueError(f"kind {self.kind!r}: {unknown_kind(self.kind)}")
        decl = codec(self.kind)
        for group in decl.needs:
            given = [k for k in group if getattr(self, k) is not None]
            if len(given) != 1:
                which = f"exactly one of {', '.join(group)}" if len(group) > 1 else \
                    f"{group[0]} ({_doc(group[0])})"
                raise ValueError(f"kind {self.kind!r} needs {which}")
        _unread(self)
        if self.kind == "none" and self.error_feedback:
            raise ValueError("error_feedback needs a kind other than none")

    @property
    def active(self) -> bool:
        return self.kind != "none"


def _doc(key: str) -> str:
    return CodecSpec.__dataclass_fields__[key].metadata["doc"]


def _unread(c: CodecSpec) -> None:
    """Refuse a key (not at its default) that the kind does not read, named with the keys the
    same kinds read ("ratio and k apply to randk and topk, not 'sign'")."""
    fields = CodecSpec.__dataclass_fields__
    given = [k for k in KEYS if getattr(c, k) != fields[k].default and not reads(c.kind, k)]
    if not given:
        return
    who = readers(given[0])
    keys = [k for k in KEYS if readers(k) == who]
    verb = "applies" if len(keys) == 1 else "apply"
    raise ValueError(f"{' and '.join(keys)} {verb} to {' and '.join(who) or 'no kind'}, "
                     f"not {c.kind!r}")


def kept(spec: CodecSpec, p: int) -> int:
    """A sparse kind's entries sent per row of P entries (k, or ceil(ratio * P), at most P)."""
    k = spec.k if spec.k is not None else math.ceil(spec.ratio * p - 1e-9)
    return max(1, min(p, int(k)))


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
            if seeded(getattr(self, d).kind):
                raise ValueError(f"{d}.kind {getattr(self, d).kind!r}: random codecs are seeded "
                                 "per client and round, on up and down only")

    @property
    def active(self) -> bool:
        return any(getattr(self, d).active for d in DIRECTIONS)


def given_problems(p: Problems, key: str, raw: object, hierarchical: bool,
                   chooser: str | None = None) -> None:
    """What the dataclasses cannot see in an entry's `compress:` (at `key`) as written: a key
    given at its default (`encoding: sparse`, otherwise accepted silently) on a kind that does
    not read it (other values are CodecSpec's to refuse); `edge_up` / `edge_down` coding
    something on a flat algorithm, whose edges relay the clients' messages (coded by up /
    down) and never send an upload of their own; `down` coding something for an algorithm
    (`chooser`) whose clients start from models they choose (IFCA's clusters), not from the
    one broadcast model it codes."""
    if not isinstance(raw, dict):
        return
    fields = CodecSpec.__dataclass_fields__
    for d in DIRECTIONS:
        codec_raw = raw.get(d)
        if not isinstance(codec_raw, dict):
            continue
        kind = codec_raw.get("kind", "none")
        if d == "down" and chooser is not None and kind != "none":
            p.add(f"{key}.{d}.kind", kind, f"{chooser}'s clients start from models they choose "
                  "(IFCA: its cluster models), not from one broadcast model: down compression "
                  "is not supported for it")
        for k in KEYS:
            default = fields[k].default
            if default is not None and codec_raw.get(k) == default and not reads(kind, k):
                p.add(f"{key}.{d}.{k}", default, f"{k} applies to "
                      f"{' and '.join(readers(k))}, not {kind!r}")
        if d in ("edge_up", "edge_down") and not hierarchical and kind != "none" and \
                not seeded(kind):               # (random kinds there: CompressSpec's refusal)
            p.add(f"{key}.{d}.kind", kind, "applies to hierarchical algorithms (an "
                  "aggregator's own upload and the model its parent sends); a flat "
                  "algorithm's edges relay the clients' messages, coded by up and down")
