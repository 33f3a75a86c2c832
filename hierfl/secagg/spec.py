"""The `secure_aggregation:` key of an algorithm entry: which protocol masks the clients'
uploads at which tier, the field the masked values live in, and the sizes of the protocol's
keys, shares and ciphertexts (docs/secure-aggregation.md). Torch-free (`hierfl validate` reads
it).

The model is the honest-but-curious variant of Bonawitz et al. 2017 (no signatures, no
ConsistencyCheck round) and of its sparse-graph successor SecAgg+ (Bell et al. 2020)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..config.fields import FieldError, positive, spec

MAX_BITS = 48   # field.py rounds in float64: below 2^47 its error is under 1/32 of a step


def _bits(v: int) -> str | None:
    return None if 8 <= v <= MAX_BITS else f"must be in 8..{MAX_BITS} (the encoding rounds " \
        "in float64, which resolves a wider field's steps no better; a float32 model shows " \
        "nothing past 32)"


def _even(v: int) -> str | None:
    return None if v >= 2 and v % 2 == 0 else "must be an even number >= 2 (each client " \
        "takes k/2 neighbours on either side of the ring of a Harary graph)"


def _fraction(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (t = floor(threshold * m) + 1 of the " \
        "m holders of a secret)"


@dataclass(frozen=True)
class SecAggSpec:
    """Secure aggregation of the uploads at one tier: the aggregator there learns only the
    (weighted) sum of its children's updates, paid for in extra messages and a field
    quantisation of every value."""

    protocol: Literal["secagg", "secagg_plus"] = spec(
        "secagg", "secagg: every client shares keys and secrets with every other (Bonawitz et "
        "al. 2017); secagg_plus: with its k neighbours on a Harary graph (Bell et al. 2020)")
    at: Literal["edge", "cloud"] = spec(
        "edge", "the tier whose aggregator runs the protocol with the clients below it")
    bits: int = spec(32, "field size: values are summed modulo 2^bits, 8..48", check=_bits)
    range: float | None = spec(
        None, "values are clipped to [-range, range] before encoding; null: the round's "
        "largest |x|, which every client sends with its keys (4 bytes up and down)",
        check=positive)
    threshold: float = spec(
        0.5, "Shamir threshold as a fraction: a secret held by m clients needs t = "
        "floor(threshold * m) + 1 of them (0.5: a majority)", check=_fraction)
    neighbours: int | None = spec(
        None, "secagg_plus: neighbours k per client, even; null: 2 * ceil(log2 n) (capped at "
        "n - 1)", check=_even)
    key_bytes: int = spec(32, "one public key (X25519: 32 bytes)", check=positive)
    share_bytes: int = spec(32, "one Shamir share of a 32-byte secret (its x coordinate is "
                            "the holder's index, known to both sides)", check=positive)
    ae_bytes: int = spec(28, "authenticated-encryption overhead per ciphertext (AES-GCM: "
                         "12-byte nonce + 16-byte tag)", check=positive)

    def __post_init__(self) -> None:
        if self.neighbours is not None and self.protocol != "secagg_plus":
            raise FieldError("neighbours", "neighbours applies to secagg_plus, not "
                             f"{self.protocol!r}")

    def peers(self, n: int) -> int:
        """The clients each client exchanges shares with, of n in the protocol: n - 1
        (secagg), or k = min(neighbours or 2 ceil(log2 n), n - 1) (secagg_plus)."""
        if self.protocol == "secagg" or n <= 1:
            return max(n - 1, 0)
        k = self.neighbours if self.neighbours is not None else 2 * math.ceil(math.log2(n))
        return min(k, n - 1)

    def holders(self, n: int) -> int:
        """How many clients hold a share of one client's secrets: all n (secagg: the owner
        keeps a share too), or its k neighbours (secagg_plus)."""
        return n if self.protocol == "secagg" else self.peers(n)

    def needed(self, n: int) -> int:
        """Shares that reconstruct a secret: t = min(m, floor(threshold * m) + 1), m the
        holders."""
        m = self.holders(n)
        return min(m, math.floor(self.threshold * m) + 1)
