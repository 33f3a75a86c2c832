"""The random numbers of the random codecs (randk, qsgd): counter-based, as Philox is — a 32-bit
hash of (key, sender, counter) with no generator state, so any sender's draws can be regenerated
alone (by the receiver, from the 4-byte key; by a batch of any size) and a round's whole (n, P)
block is made in a few vectorised uint32 numpy passes (multiplication wraps modulo 2^32 there:
no masking), no Python per sender.

- `uniform(p)`: one float32 in [0, 1) per entry (qsgd's stochastic rounding), counter = the
  entry's index; the top 24 bits of the hash.
- `subset(k, p)`: k distinct coordinates per sender, a uniformly random k-subset (randk): draws
  with replacement (counter = the draw's number, coordinate = (hash * p) >> 32) keeping the first
  k distinct (each coordinate's first draw by a minimum scatter into a table, no sort), in
  O(k + p) per sender rather than a partial sort of P keys; above k = p / 2 the p - k
  coordinates left out are drawn instead. The map hash -> coordinate favours some coordinates by
  at most p / 2^32 of their probability (1.4e-7 for p = 610)."""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

_GOLDEN = np.uint32(0x9E3779B1)                 # spreads the sender's key and the counter
_C1, _C2 = np.uint32(0x21F0AAAD), np.uint32(0x735A2D97)   # Wellons' hash prospector
_S8, _S15, _S16 = np.uint32(8), np.uint32(15), np.uint32(16)
UNIT24 = 1.0 / 16777216                        # 2^-24: 24-bit integers to [0, 1)
_COLS: dict[int, np.ndarray] = {}               # spread counters 0..p-1 by p (a few sizes a run)


def _mix(h: np.ndarray) -> np.ndarray:
    """A 32-bit integer hash, in place on uint32 values; its high bits are the well mixed."""
    h ^= h >> _S16
    return _mix_tail(h)


def _mix_tail(h: np.ndarray) -> np.ndarray:
    """_mix after its first xor-shift (which distributes over xor, so that of (row ^ counter)
    is (row's) ^ (counter's): done once per row and per counter, not per entry)."""
    h *= _C1
    h ^= h >> _S15
    h *= _C2
    return h


def _counters(p: int) -> np.ndarray:
    """The counters 0..p-1 spread and xor-shifted (see _mix_tail)."""
    c = _COLS.get(p)
    if c is None:
        c = np.arange(p, dtype=np.uint32)
        c *= _GOLDEN
        c ^= c >> _S16
        if p <= 1 << 20:
            _COLS[p] = c
    return c


TABLE_MAX = 1 << 23     # (rows x p) entries up to which `_firsts` scatters into a table


class Draws:
    """The draws of a batch of senders (one row each) under a 32-bit key, or one key per row
    (an array: rows of several messages, each under its own key, in one batch)."""

    def __init__(self, key: int | np.ndarray, senders: np.ndarray):
        s = np.asarray(senders).astype(np.uint32).reshape(-1)
        k = np.asarray(key, dtype=np.uint32) if isinstance(key, np.ndarray) \
            else np.uint32(key & 0xFFFFFFFF)
        r = _mix(s * _GOLDEN + k)                                         # (n,) sender hashes
        self.rows = r ^ (r >> _S16)                                       # xor-shifted
        self.n = len(s)

    def hashes(self, m: int) -> np.ndarray:
        """(n, m) uint32: the hash of (key, sender, counter) for counters 0..m-1,
        _mix(sender hash ^ spread counter)."""
        return _mix_tail(self.rows[:, None] ^ _counters(m))

    def uniform(self, p: int) -> torch.Tensor:
        """(n, p) float32 in [0, 1): 24 bits each."""
        return self.uniform24(p).mul_(UNIT24)

    def uniform24(self, p: int) -> torch.Tensor:
        """(n, p) float32: the 24-bit integers of `uniform` before their scaling by 2^-24
        (exact; a caller adding them can fold the scaling into its add, one pass fewer)."""
        return self.ints24(p).to(torch.float32)

    def ints24(self, p: int) -> torch.Tensor:
        """(n, p) int32: those 24-bit integers unconverted (a float add converts them exactly,
        in its own pass: one pass fewer again)."""
        h = self.hashes(p)
        h >>= _S8
        return torch.from_numpy(h.view(np.int32))

    def subset(self, k: int, p: int) -> torch.Tensor:
        """(n, k) int64: each row k distinct coordinates of 0..p-1, a uniform k-subset."""
        if k >= p:
            return torch.arange(p).expand(self.n, p)
        if 2 * k <= p:
            return torch.from_numpy(self._first_distinct(k, p))
        mask = np.ones((self.n, p), bool)
        mask[np.arange(self.n)[:, None], self._first_distinct(p - k, p)] = False
        return torch.from_numpy(np.nonzero(mask)[1].reshape(self.n, k))

    def _first_distinct(self, k: int, p: int, m: int | None = None,
                        table_max: int = TABLE_MAX) -> np.ndarray:
        """The first k distinct coordinates of each row's draws (with replacement), in order:
        which draws are a coordinate's first (`_firsts`), and a row's first k of those are
        where their running count is <= k; no per-row Python. `m`: draws made at first
        (default: the mean needed + 4 standard deviations; rows short of k draw more)."""
        m = _draws_needed(k, p) if m is None else m
        out = np.empty((self.n, k), np.int64)
        todo = np.arange(self.n)
        while len(todo):
            h = _mix_tail(self.rows[todo, None] ^ _counters(m)).astype(np.uint64)
            c = (h * np.uint64(p) >> np.uint64(32)).astype(np.intp)     # the draws' coordinates
            first = _firsts(c, p, table_max)
            count = np.cumsum(first, axis=1)
            enough = count[:, -1] >= k
            if enough.all():
                out[todo] = c[first & (count <= k)].reshape(-1, k)
                break
            keep = first[enough] & (count[enough] <= k)
            out[todo[enough]] = c[enough][keep].reshape(-1, k)
            todo, m = todo[~enough], 2 * m                 # rare: draw further for those
        return out


def _firsts(c: np.ndarray, p: int, table_max: int = TABLE_MAX) -> np.ndarray:
    """(n, m) bool: which of each row's draws `c` (coordinates in 0..p-1) is its coordinate's
    first. Small (n x p <= table_max): each (row, coordinate)'s first draw number by one minimum
    scatter into an (n, p) table, no sort. Large (a big model: the table would be n x p, a GB
    at 200 x 1.7 M, where the draws are a few per cent of p): two sorts of (coordinate, draw
    number) keys, memory (n, m). The same mask either way."""
    n, m = c.shape
    if n * p <= table_max:
        at = c + np.arange(0, n * p, p)[:, None]                        # in the (n, p) table
        step = np.arange(m, dtype=np.int32 if m > 32767 else np.int16)
        table = np.full(n * p, m, step.dtype)
        np.minimum.at(table, at.reshape(-1), np.broadcast_to(step, at.shape).reshape(-1))
        return table[at] == step
    bits = np.uint64(max(1, (m - 1).bit_length()))
    key = np.sort(c.astype(np.uint64) << bits | np.arange(m, dtype=np.uint64), axis=1)
    lead = np.empty(key.shape, bool)                 # first (lowest draw number) of its value
    lead[:, 0] = True
    np.not_equal(key[:, 1:] >> bits, key[:, :-1] >> bits, out=lead[:, 1:])
    first = np.zeros(c.shape, bool)
    rows = np.broadcast_to(np.arange(n)[:, None], key.shape)
    first[rows[lead], (key[lead] & np.uint64((1 << int(bits)) - 1)).astype(np.intp)] = True
    return first


@functools.lru_cache(maxsize=64)
def _draws_needed(k: int, p: int) -> int:
    """Draws made at first for k distinct of p: the mean needed + 4 standard deviations."""
    mean = sum(p / (p - i) for i in range(k)) if k < 64 else p * math.log(p / (p - k))
    return int(mean + 4 * math.sqrt(mean)) + 8
