"""Many seeded generators at once: `seeding.rng(seed, purpose, k)` for k = 0..n-1, the same
streams, without building a numpy SeedSequence per k (about 20 us each, so 20 s for 10^6).

numpy's SeedSequence hashes its entropy words into a pool of four 32-bit words and derives the
bit generator's seed from that pool (O'Neill's seed_seq hashing, numpy/random/bit_generator.pyx).
For the keys hierfl uses, (seed, crc32(purpose), k) with every word below 2^32, the entropy is
exactly those three words, so the whole hash is a fixed sequence of 32-bit multiplies, xors and
shifts: done here on arrays of all k. PCG64 then takes the four 64-bit words as it would from
the SeedSequence (`generators` hands them over through a tiny ISeedSequence), so each stream is
bit for bit `seeding.rng`'s (tests/test_data_streams.py compares them)."""
from __future__ import annotations

import zlib
from typing import Iterator

import numpy as np
from numpy.random.bit_generator import ISeedSequence

POOL = 4
INIT_A, MULT_A = 0x43B0D7E5, 0x931E8875
INIT_B, MULT_B = 0x8B51F9DD, 0x58F38DED
MIX_L, MIX_R = 0xCA01F9DD, 0x4973F715
MASK = 0xFFFFFFFF


def _hash_consts(start: int, mult: int, n: int) -> list[int]:
    """The hash constant before each of n hashmix steps (it does not depend on the data)."""
    out, h = [], start
    for _ in range(n):
        out.append(h)
        h = (h * mult) & MASK
    return out


def _hashmix(value: np.ndarray, const: int, mult: int) -> np.ndarray:
    value = value ^ np.uint32(const)
    value = value * np.uint32((const * mult) & MASK)
    return value ^ (value >> np.uint32(16))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = np.uint32(MIX_L) * x - np.uint32(MIX_R) * y
    return r ^ (r >> np.uint32(16))


def seed_words(seed: int, purpose: str, ids: np.ndarray) -> np.ndarray:
    """(len(ids), 4) uint64: what SeedSequence([seed, crc32(purpose), id]).generate_state(4,
    np.uint64) gives for each id (each below 2^32)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() > MASK):
        raise ValueError("stream ids must lie in 0..2^32-1")
    n = len(ids)
    entropy = [np.full(n, int(seed) & MASK, np.uint32),
               np.full(n, zlib.crc32(purpose.encode()), np.uint32), ids.astype(np.uint32)]
    consts = iter(_hash_consts(INIT_A, MULT_A, POOL + POOL * (POOL - 1)))
    pool = [_hashmix(entropy[i] if i < len(entropy) else np.zeros(n, np.uint32), next(consts),
                     MULT_A) for i in range(POOL)]
    for src in range(POOL):
        for dst in range(POOL):
            if src != dst:
                pool[dst] = _mix(pool[dst], _hashmix(pool[src], next(consts), MULT_A))
    out = np.empty((n, 2 * POOL), np.uint32)
    for i, const in enumerate(_hash_consts(INIT_B, MULT_B, 2 * POOL)):
        out[:, i] = _hashmix(pool[i % POOL], const, MULT_B)
    return out.view("<u8").astype(np.uint64)      # little-endian word pairs, as numpy's


class _Words(ISeedSequence):
    """A seed sequence that hands PCG64 words computed beforehand (those of `seed_words`)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def generate_state(self, n_words: int, dtype=np.uint32) -> np.ndarray:
        if n_words != POOL or np.dtype(dtype) != np.uint64:
            raise ValueError("only PCG64's 4 x uint64 seed words are precomputed")
        return self.words


def generators(seed: int, purpose: str, ids: np.ndarray) -> Iterator[np.random.Generator]:
    """`seeding.rng(seed, purpose, k)` for each k of ids, in order."""
    words = np.ascontiguousarray(seed_words(seed, purpose, ids))
    for row in words:
        yield np.random.Generator(np.random.PCG64(_Words(row)))
