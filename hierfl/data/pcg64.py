"""PCG64, numpy's default bit generator, on arrays of many streams: its seeding from seed words
and its 64-bit outputs, so that what a million streams draw first is a few array operations.

PCG64 (numpy/random/src/pcg64): a 128-bit LCG, state <- state * MULT + inc (mod 2^128), whose
output after each step is XSL-RR: (high ^ low) of the new state rotated right by the new
state's top 6 bits. A stream is four uint64 words: state low, high, increment low, high."""
from __future__ import annotations

import numpy as np

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


def step(lo: np.ndarray, hi: np.ndarray, inc_lo: np.ndarray,
         inc_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of every stream (state words lo, hi; increment inc_lo, inc_hi): the new state's
    (lo, hi) and its 64-bit output."""
    p_hi, p_lo = _mul64(lo, MULT_LO)
    hi = p_hi + lo * U64(MULT_HI) + hi * U64(MULT_LO)
    lo = p_lo + inc_lo
    hi += inc_hi + (lo < p_lo).astype(np.uint64)
    x, rot = hi ^ lo, hi >> U64(58)
    return lo, hi, (x >> rot) | (x << ((U64(64) - rot) & U64(63)))


def outputs(states: np.ndarray, n_out: int) -> np.ndarray:
    """(n_out, n) uint64: the first n_out 64-bit outputs of each of the n streams in `states`
    (as pcg64_states gives them), what `random_raw(n_out)` of each stream returns."""
    lo, hi, inc_lo, inc_hi = (np.ascontiguousarray(states[:, i]) for i in range(4))
    out = np.empty((n_out, len(states)), np.uint64)
    for t in range(n_out):
        lo, hi, out[t] = step(lo, hi, inc_lo, inc_hi)
    return out
