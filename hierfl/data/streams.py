"""Many seeded generators at once: `seeding.rng(seed, purpose, k)` for k = 0..n-1, the same
streams, without building a numpy SeedSequence per k (about 20 us each, so 20 s for 10^6).

numpy's SeedSequence hashes its entropy words into a pool of four 32-bit words and derives the
bit generator's seed from that pool (O'Neill's seed_seq hashing, numpy/random/bit_generator.pyx).
For the keys hierfl uses, (seed, crc32(purpose), k) with every word below 2^32, the entropy is
exactly those three words, so the whole hash is a fixed sequence of 32-bit multiplies, xors and
shifts: done here on arrays of all k. PCG64's seeding from those four 64-bit words is one
128-bit multiply-add, done on arrays too (`pcg64_states`), and one PCG64 is set to each
client's state in place (`reseeder`, once this numpy's state layout is checked against its own
seeding; else one PCG64 per client takes the words through a tiny ISeedSequence). Each stream
is bit for bit `seeding.rng`'s (tests/test_data_streams.py compares them)."""
from __future__ import annotations

from typing import Iterator

import numpy as np
from numpy.random.bit_generator import ISeedSequence

from .. import seeding

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
    """(len(ids), 4) uint64: what SeedSequence([seed, crc32(purpose), *id]).generate_state(4,
    np.uint64) gives for each id (each word below 2^32); ids (n,) or (n, m): m words per key."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() > MASK):
        raise ValueError("stream ids must lie in 0..2^32-1")
    n = len(ids)
    cols = ids.reshape(n, -1).T.astype(np.uint32)
    entropy = [*(np.full(n, w, np.uint32) for w in seeding.key_prefix(seed, purpose)),
               *cols]                            # seeding.rng's key, one row per id
    extra = max(0, len(entropy) - POOL)
    consts = iter(_hash_consts(INIT_A, MULT_A, POOL * POOL + POOL * extra))
    pool = [_hashmix(entropy[i] if i < len(entropy) else np.zeros(n, np.uint32), next(consts),
                     MULT_A) for i in range(POOL)]
    for src in range(POOL):
        for dst in range(POOL):
            if src != dst:
                pool[dst] = _mix(pool[dst], _hashmix(pool[src], next(consts), MULT_A))
    for word in entropy[POOL:]:                  # words beyond the pool, mixed into each
        for dst in range(POOL):
            pool[dst] = _mix(pool[dst], _hashmix(word, next(consts), MULT_A))
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
    """`seeding.rng(seed, purpose, k)` for each k of ids, in order. Where PCG64's state can
    be written in place (checked: `reseeder`), one generator is reseeded for each k: use each
    before asking for the next."""
    words = np.ascontiguousarray(seed_words(seed, purpose, ids))
    fast = reseeder()
    if fast is None:
        for row in words:
            yield np.random.Generator(np.random.PCG64(_Words(row)))
        return
    states = pcg64_states(words)
    gen, write = fast
    for i in range(len(states)):
        write(i, states)
        yield gen


# PCG64 (numpy/random/src/pcg64): 128-bit LCG, state = state * MULT + inc (mod 2^128).
MULT_HI, MULT_LO = 0x2360ED051FC65DA4, 0x4385DF649FCCF645
M32, U64 = np.uint64(0xFFFFFFFF), np.uint64


def _mul64(a: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """The full 128-bit products a * b (a uint64 array, b below 2^64): (high, low) words."""
    a0, a1, b0, b1 = a & M32, a >> U64(32), U64(b & 0xFFFFFFFF), U64(b >> 32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> U64(32)) + (p01 & M32) + (p10 & M32)
    return p11 + (p01 >> U64(32)) + (p10 >> U64(32)) + (mid >> U64(32)), \
        (p00 & M32) | (mid << U64(32))


def pcg64_states(words: np.ndarray) -> np.ndarray:
    """(n, 4) uint64 (state low, high, inc low, high) after PCG64 is seeded with each row of
    `words` (pcg_setseq_128_srandom_r: inc = 2 seq + 1; state = ((inc + init) MULT + inc)."""
    init_hi, init_lo, seq_hi, seq_lo = (words[:, i].astype(np.uint64) for i in range(4))
    inc_hi = (seq_hi << U64(1)) | (seq_lo >> U64(63))
    inc_lo = (seq_lo << U64(1)) | U64(1)
    s_lo = inc_lo + init_lo
    s_hi = inc_hi + init_hi + (s_lo < inc_lo).astype(np.uint64)
    hi, lo = _mul64(s_lo, MULT_LO)
    hi = hi + s_lo * U64(MULT_HI) + s_hi * U64(MULT_LO)
    out_lo = lo + inc_lo
    out_hi = hi + inc_hi + (out_lo < lo).astype(np.uint64)
    return np.ascontiguousarray(np.stack([out_lo, out_hi, inc_lo, inc_hi], axis=1))


def first_u32(words: np.ndarray) -> np.ndarray:
    """(n,) uint32: each generator's first 32-bit draw (`rng(...).integers(0, 2**32)`): the low
    half of PCG64's first output, XSL-RR of the state after one step from its seeding."""
    lo, hi, inc_lo, inc_hi = pcg64_states(words).T
    phi, plo = _mul64(lo, MULT_LO)
    out_lo = plo + inc_lo
    out_hi = phi + lo * U64(MULT_HI) + hi * U64(MULT_LO) + inc_hi + (out_lo < plo).astype(U64)
    x, rot = out_hi ^ out_lo, out_hi >> U64(58)
    return ((x >> rot) | (x << ((U64(64) - rot) & U64(63)))).astype(np.uint32)


_LAYOUT_OK: list[bool] = []


def reseeder():
    """A fresh (generator, write(i, states)) that sets its PCG64's state to states[i] in place
    (its pcg64_state: a pointer to the 128-bit state and increment, then the buffered 32-bit
    half), or None where that layout is not this numpy's: checked once against PCG64 seeded
    the ordinary way, draws of 64 and of 32 bits."""
    if not _LAYOUT_OK:
        _LAYOUT_OK.append(_layout_ok())
    return _make_reseeder() if _LAYOUT_OK[0] else None


def _make_reseeder():
    import ctypes

    try:
        bg = np.random.PCG64(0)
        gen = np.random.Generator(bg)
        addr = bg.ctypes.state_address
        state = np.ctypeslib.as_array((ctypes.c_uint64 * 4).from_address(
            ctypes.c_void_p.from_address(addr).value))
        flags = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(
            addr + ctypes.sizeof(ctypes.c_void_p)))
    except Exception:           # noqa: BLE001 - no ctypes view: the ordinary way
        return None

    def write(i: int, states: np.ndarray, bg=bg) -> None:      # bg: kept alive with gen
        state[:] = states[i]
        flags[0] = 0            # has_uint32: no half of a 64-bit draw left over
    return gen, write


def _layout_ok() -> bool:
    fast = _make_reseeder()
    if fast is None:
        return False
    gen, write = fast
    words = seed_words(12345, "check", np.arange(3))
    states = pcg64_states(words)
    for i, row in enumerate(words):
        want = np.random.Generator(np.random.PCG64(_Words(row)))
        expected = (want.random(3).tobytes(), want.integers(0, 7, 5).tobytes())
        gen.integers(0, 7, 1)            # leaves a 32-bit half buffered: must be dropped
        write(i, states)
        if (gen.random(3).tobytes(), gen.integers(0, 7, 5).tobytes()) != expected:
            return False
    return True
