"""Many seeded permutations at once: `seeding.rng(seed, purpose, k).permutation(n_k)` for every
k, as array operations over all the streams instead of one generator call each.

numpy's permutation(n) shuffles arange(n) in place (Fisher-Yates): for i = n-1 down to 1, j is
drawn from 0..i and elements i and j are swapped; j by masked rejection (random_interval): with
mask the smallest 2^b - 1 >= i, 32-bit draws & mask until one is <= i. PCG64's 32-bit draw is
the low half of a 64-bit output, the next one its high half. Here every stream's outputs are
made on arrays (pcg64.step), one output of all unfinished streams at a time, and the swaps made
on a size class's together. A client of more than SMALL rows, a stream still drawing after
MAX_OUTPUTS outputs (none needs half of them) and every stream where a check against numpy's
own shuffle (once a process) finds a difference is shuffled by its own generator
(data/streams.py). tests/test_data_streams.py compares them with `permutation`."""
from __future__ import annotations

import numpy as np

from . import pcg64
from .streams import _Words, generators, seed_words

SMALL = 128                     # larger clients: one shuffle call each (its cost is the rows)
PIECE = 8192                    # streams shuffled together (their arrays stay in cache)
MAX_OUTPUTS = 4 * SMALL         # 64-bit outputs a stream may take (~0.7 a row on average)
MASKS = np.array([0] + [(1 << i.bit_length()) - 1 for i in range(1, SMALL)], np.int64)
_BULK_OK: list[bool] = []


def permutations(seed: int, purpose: str, ids: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each stream's permutation(sizes[i]) of (seed, purpose, ids[i]), concatenated."""
    sizes = np.asarray(sizes, np.int64)
    ids = np.asarray(ids, np.int64)
    starts = np.cumsum(sizes) - sizes
    perm = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
    if not bulk_ok():
        _one_by_one(seed, purpose, ids, sizes, starts, perm, np.arange(len(ids)))
        return perm
    left = [np.flatnonzero(sizes > SMALL)]
    top = 1
    while top < SMALL:          # size classes (top/2, top]: the outputs a class needs
        top *= 2
        sel = np.flatnonzero((sizes > top // 2) & (sizes <= min(top, SMALL)))
        for part in (sel[a:a + PIECE] for a in range(0, len(sel), PIECE)):   # in cache
            states = pcg64.pcg64_states(seed_words(seed, purpose, ids[part]))
            left.append(part[_bulk(states, sizes[part], starts[part], perm)])
    _one_by_one(seed, purpose, ids, sizes, starts, perm, np.sort(np.concatenate(left)))
    return perm


def _bulk(states: np.ndarray, sizes: np.ndarray, starts: np.ndarray,
          perm: np.ndarray) -> np.ndarray:
    """Shuffle perm's segments (starts, sizes <= SMALL) of the streams at `states` in place,
    one 64-bit output of every unfinished stream at a time (its low half, then its high half,
    each either rejected or one swap); the streams are compacted as they finish. Returns the
    streams left unfinished after MAX_OUTPUTS outputs."""
    lo, hi, inc_lo, inc_hi = (np.ascontiguousarray(states[:, c]) for c in range(4))
    i = np.maximum(sizes - 1, 0).astype(np.int64)      # the position each stream draws for
    live = np.flatnonzero(i > 0)
    lo, hi, inc_lo, inc_hi, i, at = lo[live], hi[live], inc_lo[live], inc_hi[live], i[live], \
        starts[live].astype(np.int64)
    for _ in range(MAX_OUTPUTS):
        if not len(live):
            break
        lo, hi, word = pcg64.step(lo, hi, inc_lo, inc_hi)
        for half in ((word & pcg64.M32).view(np.int64), (word >> np.uint64(32)).view(np.int64)):
            v = half & MASKS[i]
            ok = (v <= i) & (i > 0)
            a = at + i
            b = np.where(ok, at + v, a)
            perm[a], perm[b] = perm[b], perm[a]
            i -= ok
        if 2 * np.count_nonzero(i) <= len(i):           # compact: half are done
            keep = np.flatnonzero(i)
            lo, hi, inc_lo, inc_hi, i, at, live = lo[keep], hi[keep], inc_lo[keep], \
                inc_hi[keep], i[keep], at[keep], live[keep]
    over = np.zeros(len(sizes), bool)
    over[live[i > 0]] = True
    return over


def _one_by_one(seed: int, purpose: str, ids: np.ndarray, sizes: np.ndarray,
                starts: np.ndarray, perm: np.ndarray, which: np.ndarray) -> None:
    """The streams `which`, each shuffled by its own generator (from arange again)."""
    for g, k in zip(generators(seed, purpose, ids[which]), which.tolist()):
        seg = perm[starts[k]:starts[k] + sizes[k]]
        seg[:] = np.arange(len(seg))
        g.shuffle(seg)


def bulk_ok() -> bool:
    """Whether the bulk shuffle is numpy's here: checked once, on streams of every size up to
    SMALL, against `permutation` of generators seeded the ordinary way."""
    if not _BULK_OK:
        ids = np.arange(3 * SMALL, dtype=np.int64)
        sizes = ids % (SMALL + 1)
        states = pcg64.pcg64_states(seed_words(4321, "check", ids))
        starts = np.cumsum(sizes) - sizes
        perm = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
        over = _bulk(states, sizes, starts, perm)
        words = seed_words(4321, "check", ids)
        _BULK_OK.append(not over.any() and all(
            np.array_equal(np.random.Generator(np.random.PCG64(_Words(w))).permutation(int(n)),
                           perm[s:s + n]) for w, n, s in zip(words, sizes, starts)))
    return _BULK_OK[0]
