"""Codecs by `kind`, each declared once next to its code (hierfl/registry.py).

A built-in codec is a module `hierfl/compress/codecs/<name>.py`, torch-free at import: its
encode rule imports torch inside the function. It declares, with `declare_codec`, everything
the rest of hierfl asks of a kind:

    declare_codec(Codec(
        "topk", summary="the k entries of largest magnitude, the others 0",
        reference="Stich, Cordonnier, Jaggi, Sparsified SGD with Memory, NeurIPS 2018",
        reads=("ratio", "k", "encoding"), needs=(("ratio", "k"),), sparse=True,
        size=size, encode=encode))

- `reads`: the keys of CodecSpec (compress/spec.py) it reads; the others given are refused
  ("levels applies to qsgd, not 'sign'"); `needs`: groups of keys of which exactly one must be
  given ("kind 'topk' needs exactly one of ratio, k");
- `seeded`: it draws random numbers (a `draws.Draws` per batch, from the scenario seed: up and
  down only); `sparse`: it sends k entries of each row (`encode` returns (idx, vals));
- `size(spec, p) -> (bytes, wire)`: one row of P entries' encoded size, from the sizes alone,
  and its wire name (clients.csv `encoding`);
- `encode(x, spec, draws)`: what the receiver decodes of every row of x (n, P): a dense
  (n, P) tensor (`x` itself only where nothing changes), or for a sparse kind the kept
  (idx, vals), each (n, k).

`compress`, `row_bytes` and `sizes` (kinds.py), CodecSpec's checks, the layer's seeding and
the generated reference read the declarations; a plugin declares its own codec the same way
(a `plugins:` file or a `hierfl.plugins` entry point)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..registry import Declaration, Registry

if TYPE_CHECKING:
    import torch

    from .draws import Draws
    from .spec import CodecSpec

KEYS = ("ratio", "k", "levels", "encoding")     # CodecSpec's keys a kind may read


@dataclass(frozen=True)
class Codec:
    """One codec's declaration (its facts and its two rules)."""

    name: str
    size: "Callable[[CodecSpec, int], tuple[float, str]]"
    encode: "Callable[[torch.Tensor, CodecSpec, Draws | None], Any]"
    summary: str = ""                       # what the receiver decodes, one line
    reference: str = ""                     # the paper
    reads: tuple[str, ...] = ()             # CodecSpec keys it reads
    needs: tuple[tuple[str, ...], ...] = ()     # exactly one key of each group is required
    seeded: bool = False                    # draws random numbers (Draws of the scenario seed)
    sparse: bool = False                    # sends k entries a row: encode gives (idx, vals)

    def __post_init__(self) -> None:
        for key in (*self.reads, *(k for group in self.needs for k in group)):
            if key not in KEYS:
                raise ValueError(f"codec {self.name!r}: {key!r} is not a codec key (one of "
                                 f"{', '.join(KEYS)})")
        for group in self.needs:
            if not set(group) <= set(self.reads):
                raise ValueError(f"codec {self.name!r}: needs {group} but reads {self.reads}")


CODECS = Registry("codec", "hierfl.compress.codecs", scan="modules")


def declare_codec(codec: Codec) -> Codec:
    """Make `codec` the codec of `compress: {<direction>: {kind: <codec.name>}}`."""
    if not isinstance(codec, Codec):
        raise TypeError(f"declare_codec takes a hierfl.compress.registry.Codec, not {codec!r}")
    module = str(getattr(codec.encode, "__module__", "") or "")
    where = f"{module}:{getattr(codec.encode, '__qualname__', codec.name)}"   # its code
    CODECS.declare(Declaration("codec", codec.name, where, facts=codec, summary=codec.summary,
                               origin=module))
    return codec


def codec(kind: str) -> Codec:
    """The declaration of `kind` (KeyError when unknown), importing no torch."""
    return CODECS.declaration(kind).facts


def known(kind: Any) -> bool:
    return isinstance(kind, str) and kind in CODECS


def seeded(kind: Any) -> bool:
    """`kind` is known and draws random numbers."""
    return known(kind) and codec(kind).seeded


def reads(kind: Any, key: str) -> bool:
    return known(kind) and key in codec(kind).reads


def readers(key: str) -> list[str]:
    """The kinds that read `key`."""
    return [n for n in CODECS if key in codec(n).reads]


def unknown_kind(kind: Any) -> str:
    """Why `kind` is not a codec: the known ones, and a 'did you mean'."""
    names = CODECS.names(everything=True)
    close = difflib.get_close_matches(kind, names, n=1) if isinstance(kind, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"must be one of {', '.join(repr(n) for n in names)}{hint}"
