"""One seed per scenario, split by stable names into independent generators.

A generator is keyed by (scenario seed, purpose, *integers) — e.g. ("batches", client, round) —
so what one node or one algorithm draws never depends on what another drew before. This is what
makes client sampling and straggler draws identical across the algorithms of a scenario, and
what makes resume exact: no generator state has to be carried."""
from __future__ import annotations

import zlib

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def key_prefix(seed: int, purpose: str) -> list[int]:
    """The first words of every stream's key: the seed's low 32 bits and crc32(purpose)."""
    return [int(seed) & 0xFFFFFFFF, zlib.crc32(purpose.encode())]


def _key(seed: int, purpose: str, ids: tuple[int, ...]) -> list[int]:
    return [*key_prefix(seed, purpose), *[int(i) for i in ids]]


def rng(seed: int, purpose: str, *ids: int) -> np.random.Generator:
    """A numpy generator for (seed, purpose, ids)."""
    return np.random.default_rng(np.random.SeedSequence(_key(seed, purpose, ids)))


def torch_gen(seed: int, purpose: str, *ids: int) -> "torch.Generator":
    """A torch CPU generator for (seed, purpose, ids)."""
    import torch                # here: the numpy side of seeding serves commands without torch

    s = np.random.SeedSequence(_key(seed, purpose, ids)).generate_state(2, np.uint64)[0]
    g = torch.Generator()
    g.manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF)
    return g
