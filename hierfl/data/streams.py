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
from . import pcg64
from .pcg64 import pcg64_states

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
    cols = ids.reshape(n, ids.shape[1] if ids.ndim == 2 else 1).T.astype(np.uint32)
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
    rs = reseeder()
    if rs is None:
        for row in words:
            yield np.random.Generator(np.random.PCG64(_Words(row)))
        return
    for row in pcg64_states(words):
        rs.write(row)
        yield rs.gen


def normals(seed: int, purpose: str, ids: np.ndarray, out: np.ndarray,
            bounds: np.ndarray) -> None:
    """out[bounds[i]:bounds[i + 1]] = the first standard normals of `seeding.rng(seed, purpose,
    ids[i])`, for every i (out: a C-contiguous float64 array): `generators` without a Python
    call but numpy's C fill per stream, after one state write (`normal_fill`)."""
    bounds = np.asarray(bounds, np.int64)
    flat = out.reshape(-1)
    if out.dtype != np.float64 or not out.flags.c_contiguous or not out.flags.writeable \
            or len(bounds) != len(ids) + 1 \
            or (len(ids) and (bounds[0] < 0 or bounds[-1] > len(flat) or
                              (np.diff(bounds) < 0).any())):
        raise ValueError("normals: out must be writeable C-contiguous float64 holding every "
                         "[a, b) of bounds, one per id")
    if not len(ids):
        return
    rs = reseeder()
    fill = normal_fill() if rs is not None else None
    if fill is None:
        for g, a, b in zip(generators(seed, purpose, ids), bounds[:-1].tolist(),
                           bounds[1:].tolist()):
            g.standard_normal(out=flat[a:b])
        return
    states = memoryview(pcg64_states(np.ascontiguousarray(seed_words(seed, purpose, ids)))
                        ).cast("B")                   # stream i: bytes 32 i .. 32 i + 32
    state, flags, bitgen = memoryview(rs.state).cast("B"), rs.flags, rs.bg.ctypes.bit_generator
    at = (flat.ctypes.data + 8 * bounds[:-1]).tolist()
    for i, p, count in zip(range(0, len(states), 32), at, np.diff(bounds).tolist()):
        state[:] = states[i:i + 32]
        flags[0] = 0
        fill(bitgen, count, p)


_FILL: list = []


def normal_fill():
    """numpy's `random_standard_normal_fill(bitgen_t *, npy_intp count, double *out)` (numpy.random's
    C API; numpy.random._generator exports it), through ctypes: what Generator.standard_normal
    calls, without its Python call (~1 us a stream). None where it is not there, or where it
    does not give standard_normal's draws (checked once)."""
    if not _FILL:
        _FILL.append(_load_fill())
    return _FILL[0]


def _load_fill():
    import ctypes

    try:
        from numpy.random import _generator

        fill = ctypes.CDLL(_generator.__file__).random_standard_normal_fill
    except (ImportError, OSError, AttributeError):
        return None
    fill.argtypes, fill.restype = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_void_p), None
    rs = _make_reseeder()
    if rs is None:
        return None
    words = seed_words(54321, "check", np.arange(3))
    for row, st in zip(words, pcg64_states(words)):
        want = np.random.Generator(np.random.PCG64(_Words(row))).standard_normal(257)
        got = np.empty(257)
        rs.write(st)
        fill(rs.bg.ctypes.bit_generator, len(got), got.ctypes.data)
        if got.tobytes() != want.tobytes():
            return None
    return fill


def first_u32(words: np.ndarray) -> np.ndarray:
    """(n,) uint32: each generator's first 32-bit draw (`rng(...).integers(0, 2**32)`): the low
    half of PCG64's first output, XSL-RR of the state after one step from its seeding."""
    lo, hi, inc_lo, inc_hi = (np.ascontiguousarray(c) for c in pcg64_states(words).T)
    return pcg64.step(lo, hi, inc_lo, inc_hi)[2].astype(np.uint32)


_LAYOUT_OK: list[bool] = []


class Reseeder:
    """One generator whose PCG64 state is written in place: `state`, its 128-bit state and
    increment (4 uint64 words), and `flags`, whose first word is has_uint32."""

    __slots__ = ("bg", "gen", "state", "flags")

    def __init__(self, bg: np.random.PCG64, state: np.ndarray, flags: np.ndarray) -> None:
        self.bg, self.gen, self.state, self.flags = bg, np.random.Generator(bg), state, flags

    def write(self, row: np.ndarray) -> None:
        """Set the state to `row` (state low, high, inc low, high: pcg64.pcg64_states)."""
        self.state[:] = row
        self.flags[0] = 0            # has_uint32: no half of a 64-bit draw left over


def reseeder() -> Reseeder | None:
    """A fresh Reseeder (its pcg64_state: a pointer to the 128-bit state and increment, then
    the buffered 32-bit half), or None where that layout is not this numpy's: checked once
    against PCG64 seeded the ordinary way, draws of 64 and of 32 bits."""
    if not _LAYOUT_OK:
        _LAYOUT_OK.append(_layout_ok())
    return _make_reseeder() if _LAYOUT_OK[0] else None


def _make_reseeder() -> Reseeder | None:
    import ctypes

    try:
        bg = np.random.PCG64(0)
        addr = bg.ctypes.state_address
        state = np.ctypeslib.as_array((ctypes.c_uint64 * 4).from_address(
            ctypes.c_void_p.from_address(addr).value))
        flags = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(
            addr + ctypes.sizeof(ctypes.c_void_p)))
    except Exception:           # noqa: BLE001 - no ctypes view: the ordinary way
        return None
    return Reseeder(bg, state, flags)


def _layout_ok() -> bool:
    rs = _make_reseeder()
    if rs is None:
        return False
    words = seed_words(12345, "check", np.arange(3))
    for row, st in zip(words, pcg64_states(words)):
        want = np.random.Generator(np.random.PCG64(_Words(row)))
        expected = (want.random(3).tobytes(), want.integers(0, 7, 5).tobytes())
        rs.gen.integers(0, 7, 1)            # leaves a 32-bit half buffered: must be dropped
        rs.write(st)
        if (rs.gen.random(3).tobytes(), rs.gen.integers(0, 7, 5).tobytes()) != expected:
            return False
    return True
