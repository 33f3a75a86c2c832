"""Minibatch plans: which rows each client uses at each local step, drawn from keys of
(seed, client, round, edge round) so every executor and every algorithm of a scenario sees the
same batches.

The draw is vectorised over clients: every (client, epoch, position) gets a 64-bit hash of the
client's key (splitmix64 of a counter), and a client's permutation for an epoch is its positions
sorted by that hash; clients of equal size are sorted together, so a call costs a few array
operations instead of one generator per client."""
from __future__ import annotations

import functools

from dataclasses import dataclass

import numpy as np
import torch

from .. import seeding


def gather(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t[idx] for an integer index tensor of any shape, through index_select: on CPU about 5x
    faster than advanced indexing for minibatch gathers (100 x 8 x 10 rows of 60 floats: 0.3
    vs 1.5 ms), the same values."""
    return torch.index_select(t, 0, idx.reshape(-1)).view(*idx.shape, *t.shape[1:])


def model_input(x: torch.Tensor) -> torch.Tensor:
    """Rows as a model reads them: uint8 pixels (image sets, kept as bytes in memory) become
    float32 in [0, 1] (x / 255), here, per batch; float features and int64 indices (text,
    embedded by the model) pass unchanged, so float data sets take no extra step."""
    if x.dtype == torch.uint8:
        return x.to(torch.float32).div_(255.0)
    return x


def weight_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype of row weights for data x: x's own for float features, float32 otherwise."""
    return x.dtype if x.is_floating_point() else torch.float32


@dataclass(frozen=True)
class Batch:
    """One step's minibatch for C clients: x (C, B, d), y (C, B[, m]), weights m (C, B).
    Built from uint8 rows, x is scaled to float32 (`model_input`); weights are always float."""

    x: torch.Tensor
    y: torch.Tensor
    m: torch.Tensor

    def __post_init__(self) -> None:
        if self.x.dtype == torch.uint8:
            object.__setattr__(self, "x", model_input(self.x))
        if not self.m.is_floating_point():
            object.__setattr__(self, "m", self.m.to(torch.float32))

    def rows(self, sel: slice | torch.Tensor) -> "Batch":
        return Batch(self.x[sel], self.y[sel], self.m[sel])


_AUGMENT = np.uint64(0xE7037ED1A0B428DB)


@dataclass(frozen=True)
class Augment:
    """Training-batch augmentation of C clients' image rows (train.local.augment): random crop
    with zero padding `pad` (offsets dx, dy in [-pad, pad]) then horizontal flip (`flip`),
    as the CIFAR baselines' RandomCrop(padding) + RandomHorizontalFlip. Row b of a client's
    step n draws its offsets and flip bit from splitmix64(key ^ A + ((n << 32) | b) * golden)
    of its key (`augment_keys`: of seed, client, round, edge round), so the images depend on
    the client and step alone, not on the clients sharing the call or on the executor."""

    keys: np.ndarray                        # (C,) uint64
    pad: int
    flip: bool
    shape: tuple[int, int, int]             # (channels, height, width) of a row

    def select(self, sel: slice | torch.Tensor) -> "Augment":
        idx = sel if isinstance(sel, slice) else np.asarray(torch.as_tensor(sel).cpu())
        return Augment(np.atleast_1d(self.keys[idx]), self.pad, self.flip, self.shape)

    def draws(self, steps: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """dx, dy (int64) and flip (bool), each (C, T, B), of steps `steps` (T,)."""
        counter = (steps.astype(np.uint64)[:, None] << np.uint64(32)) | \
            np.arange(width, dtype=np.uint64)[None, :]
        with np.errstate(over="ignore"):
            h = _mix(self.keys[:, None, None] + counter[None] * _GOLDEN)
        span = np.uint64(2 * self.pad + 1)
        dx = (h % span).astype(np.int64) - self.pad
        dy = ((h >> np.uint64(24)) % span).astype(np.int64) - self.pad
        fl = ((h >> np.uint64(63)) == 1) & self.flip
        return dx, dy, fl

    def apply(self, x: torch.Tensor, steps: np.ndarray) -> torch.Tensor:
        """x (C, T, B, d) rows of steps `steps`, augmented (a new tensor, x's dtype)."""
        c, t, b = x.shape[:3]
        ch, h, w = self.shape
        dx, dy, fl = (torch.from_numpy(a).to(x.device) for a in self.draws(steps, b))
        p = self.pad
        n = c * t * b
        img = x.reshape(n, ch, h, w)
        if p:
            padded = img.new_zeros(n, ch, h + 2 * p, w + 2 * p)
            padded[:, :, p:p + h, p:p + w] = img
        else:
            padded = img
        cols = torch.arange(w, device=x.device)
        cols = torch.where(fl.reshape(n, 1), (w - 1) - cols, cols)           # flip after crop
        iy = torch.arange(h, device=x.device)[None] + (dy.reshape(n, 1) + p)  # (n, h)
        ix = cols + (dx.reshape(n, 1) + p)                                    # (n, w)
        idx = (iy[:, :, None] * (w + 2 * p) + ix[:, None, :]).reshape(n, 1, h * w)
        out = torch.gather(padded.reshape(n, ch, -1), 2, idx.expand(n, ch, h * w))
        return out.reshape(x.shape)


def augment_keys(seed: int, round_: int, edge_round: int, clients: np.ndarray) -> np.ndarray:
    """(C,) uint64: each client's augmentation stream of (seed, client, round, edge round),
    apart from its batches, dropout and noise (another hash of the same key)."""
    keys = client_keys(seed, round_, edge_round, np.asarray(clients, dtype=np.int64))
    with np.errstate(over="ignore"):
        return _mix(keys ^ _AUGMENT)


@dataclass(frozen=True)
class BatchPlan:
    """rows (C, S, B) global row indices and weights (C, S, B); S may be 1 (full batch: reused).
    `aug`: training augmentation of the gathered rows (None: the rows as stored)."""

    rows: torch.Tensor
    weights: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    aug: Augment | None = None

    def at(self, step: int) -> Batch:
        s = step % self.rows.shape[1]
        r = self.rows[:, s]
        x = gather(self.x, r)
        if self.aug is not None:
            x = self.aug.apply(x.unsqueeze(1), np.array([step], np.int64)).squeeze(1)
        return Batch(x, gather(self.y, r), self.weights[:, s])

    def span(self, start: int, stop: int) -> Batch:
        """Steps start..stop-1 gathered at once: x (C, T, B, d), y (C, T, B), m (C, T, B)."""
        s = self.rows.shape[1]
        if s == 1:
            idx = torch.zeros(stop - start, dtype=torch.long)
        elif stop <= s:
            idx = slice(start, stop)
        else:
            idx = torch.arange(start, stop) % s
        r = self.rows[:, idx]
        x = gather(self.x, r)
        if self.aug is not None:
            x = self.aug.apply(x, np.arange(start, stop, dtype=np.int64))
        return Batch(x, gather(self.y, r), self.weights[:, idx])

    def select(self, sel: slice | torch.Tensor) -> "BatchPlan":
        aug = None if self.aug is None else self.aug.select(sel)
        return BatchPlan(self.rows[sel], self.weights[sel], self.x, self.y, aug)


def steps_for(counts: np.ndarray, batch_size: int | str, steps: int | None,
              epochs: int | None) -> np.ndarray:
    """Local steps per client: K, or E * ceil(n_k / B) (one step per epoch for full batch)."""
    if steps is not None:
        return np.full(len(counts), steps, dtype=np.int64)
    e = epochs if epochs is not None else 1
    if batch_size == "full":
        return np.full(len(counts), e, dtype=np.int64)
    return e * -(-counts // int(batch_size))


def full_plan(offsets: np.ndarray, clients: np.ndarray, x: torch.Tensor,
              y: torch.Tensor) -> BatchPlan:
    """All local rows of each client, padded to the largest (S = 1)."""
    counts = offsets[clients + 1] - offsets[clients]
    width = int(counts.max())
    pos = np.arange(width)
    valid = pos[None, :] < counts[:, None]
    rows = np.where(valid, offsets[clients][:, None] + pos[None, :], 0)
    w = valid / counts[:, None]
    return BatchPlan(torch.from_numpy(rows[:, None, :]),
                     torch.from_numpy(w[:, None, :].astype(np.float32)).to(weight_dtype(x)), x, y)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on uint64 (arithmetic wraps mod 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@functools.lru_cache(maxsize=256)
def _round_base(seed: int, round_: int, edge_round: int) -> np.uint64:
    """The batches' 64-bit base of (seed, round, edge round): a SeedSequence costs ~30 us, and a
    hierarchical round asks for it once per edge call (thousands a round at 10^5 clients)."""
    ss = np.random.SeedSequence(seeding._key(seed, "batches", (round_, edge_round)))
    return ss.generate_state(1, np.uint64)[0]


def client_keys(seed: int, round_: int, edge_round: int, clients: np.ndarray) -> np.ndarray:
    """One 64-bit key per client for (seed, client, round, edge round): a client's batches
    depend on these four numbers only, not on which other clients share the call."""
    base = _round_base(int(seed), int(round_), int(edge_round))
    with np.errstate(over="ignore"):
        return _mix(base ^ _mix((clients.astype(np.uint64) + np.uint64(1)) * _GOLDEN))


_DROPOUT = np.uint64(0xD1B54A32D192ED03)


def dropout_keys(seed: int, round_: int, edge_round: int, clients: np.ndarray) -> torch.Tensor:
    """(C, 1) int64: each client's dropout stream of (seed, client, round, edge round), apart
    from its batch shuffles (another hash of the same key)."""
    keys = client_keys(seed, round_, edge_round, np.asarray(clients, dtype=np.int64))
    with np.errstate(over="ignore"):
        return torch.from_numpy(_mix(keys ^ _DROPOUT).view(np.int64).copy()).unsqueeze(1)


def step_seeds(keys: torch.Tensor, steps: torch.Tensor) -> list[int]:
    """torch.manual_seed values of each client's step: splitmix64 of its key and step counter,
    63 bits."""
    k = keys.reshape(-1).numpy().view(np.uint64)
    n = steps.reshape(-1).numpy().astype(np.uint64)
    with np.errstate(over="ignore"):
        return (_mix(k + (n + np.uint64(1)) * _GOLDEN) >> np.uint64(1)).astype(np.int64).tolist()


def minibatch_plan(offsets: np.ndarray, clients: np.ndarray, batch_size: int | str,
                   n_steps: np.ndarray, seed: int, round_: int, edge_round: int,
                   x: torch.Tensor, y: torch.Tensor) -> BatchPlan:
    """Epoch-wise shuffled minibatches: step j of client k uses rows perm[jB:(j+1)B] of the
    current epoch's permutation; the last batch of an epoch may be short (weights say so).
    Steps beyond a client's budget hold row 0 with weight 0; padding inside a step holds the
    client's first row with weight 0."""
    if batch_size == "full":
        return full_plan(offsets, clients, x, y)
    b = int(batch_size)
    clients = np.asarray(clients, dtype=np.int64)
    steps = np.asarray(n_steps, dtype=np.int64)
    c = len(clients)
    s_max = max(int(steps.max()) if c else 0, 1)
    rows = np.zeros((c, s_max, b), np.int64)
    wts = np.zeros((c, s_max, b), np.float32)
    lo = offsets[clients]
    n = offsets[clients + 1] - lo
    act = (steps > 0) & (n > 0)
    if not act.any():
        return BatchPlan(torch.from_numpy(rows), torch.from_numpy(wts).to(weight_dtype(x)), x, y)
    keys = client_keys(seed, round_, edge_round, clients)
    for size in np.unique(n[act]):             # clients of one size are shuffled together
        size = int(size)
        idx = np.flatnonzero(act & (n == size))
        per_epoch = -(-size // b)
        n_epochs = int(-(-steps[idx].max() // per_epoch))
        counter = (np.arange(n_epochs, dtype=np.uint64)[:, None] << np.uint64(32)) | \
            np.arange(size, dtype=np.uint64)[None, :]
        with np.errstate(over="ignore"):
            h = _mix(keys[idx][:, None, None] + counter[None] * _GOLDEN)
        # distinct counters give distinct hashes (both maps are bijections of uint64): no ties
        perm = np.argsort(h.view(np.int64), axis=2)
        width = min(n_epochs * per_epoch, s_max)
        first = lo[idx][:, None, None]
        if per_epoch * b == size and steps[idx].min() >= width:     # whole batches, all live:
            whole = slice(None) if len(idx) == c else idx               # no padding, no mask
            rows[whole, :width] = perm.reshape(len(idx), n_epochs * per_epoch, b)[:, :width] \
                + first
            wts[whole, :width] = 1.0 / b          # what valid / count gives, as float32
            continue
        padded = np.full((len(idx), n_epochs, per_epoch * b), -1, np.int64)
        padded[:, :, :size] = perm
        pr = padded.reshape(len(idx), n_epochs * per_epoch, b)[:, :width]
        live = np.arange(width)[None, :, None] < steps[idx][:, None, None]
        pv = (pr >= 0) & live
        rows[idx, :width] = np.where(pv, pr + first, np.where(live, first, 0))
        cnt = pv.sum(2, keepdims=True)
        wts[idx, :width] = pv / np.maximum(cnt, 1)
    return BatchPlan(torch.from_numpy(rows), torch.from_numpy(wts).to(weight_dtype(x)), x, y)


_POISSON = np.uint64(0x8CB92BA72F3D8DD7)
_NOISE = np.uint64(0xA0761D6478BD642F)
_BLOCK = 1 << 22        # (client, step, row) draws hashed at once by poisson_plan


def noise_keys(seed: int, round_: int, edge_round: int, clients: np.ndarray) -> torch.Tensor:
    """(C, 1) int64: each client's DP-SGD noise stream of (seed, client, round, edge round)
    (learn/dpsgd.py; step n's draw seeded by `step_seeds(keys, n)`), apart from its batches
    and its dropout masks (another hash of the same key)."""
    keys = client_keys(seed, round_, edge_round, np.asarray(clients, dtype=np.int64))
    with np.errstate(over="ignore"):
        return torch.from_numpy(_mix(keys ^ _NOISE).view(np.int64).copy()).unsqueeze(1)


def poisson_expected(counts: np.ndarray, batch_size: int | str) -> np.ndarray:
    """Each client's expected Poisson batch size q_k n_k = min(B, n_k) (q_k = min(1, B / n_k);
    `full`: q_k = 1), float64."""
    counts = np.asarray(counts, dtype=np.float64)
    return counts.copy() if batch_size == "full" else np.minimum(float(batch_size), counts)


def poisson_plan(offsets: np.ndarray, clients: np.ndarray, batch_size: int | str,
                 n_steps: np.ndarray, seed: int, round_: int, edge_round: int,
                 x: torch.Tensor, y: torch.Tensor) -> BatchPlan:
    """Poisson subsampling, as DP-SGD's accountant assumes it (Abadi et al. 2016): at step j
    each of client k's n_k rows is in the batch independently with probability
    q_k = min(1, B / n_k), drawn from a hash of (the client's key, j, row), so a client's
    batches depend on (seed, client, round, edge round) only. Batch sizes vary (and may be 0):
    a step holds the rows drawn, in row order, then padding (the client's first row, weight 0)
    up to the widest batch of the call; a drawn row weighs 1 / (q_k n_k), one over the
    expected batch size, the unbiased estimator's denominator. Steps beyond a client's budget
    hold row 0 with weight 0."""
    clients = np.asarray(clients, dtype=np.int64)
    steps = np.asarray(n_steps, dtype=np.int64)
    c = len(clients)
    s_max = max(int(steps.max()) if c else 0, 1)
    lo = offsets[clients]
    n = offsets[clients + 1] - lo
    expected = poisson_expected(n, batch_size)
    with np.errstate(over="ignore"):
        keys = _mix(client_keys(seed, round_, edge_round, clients) ^ _POISSON)
    drawn = []                  # (client, first step, rows drawn first (steps, n_k), sizes)
    for k in np.flatnonzero((steps > 0) & (n > 0)).tolist():
        size, live = int(n[k]), int(steps[k])
        q = expected[k] / size
        block = max(1, _BLOCK // size)
        for a in range(0, live, block):
            j = np.arange(a, min(a + block, live), dtype=np.uint64)
            counter = (j[:, None] << np.uint64(32)) | np.arange(size, dtype=np.uint64)[None]
            with np.errstate(over="ignore"):
                u = (_mix(keys[k] + counter * _GOLDEN) >> np.uint64(11)) * 2.0 ** -53
            take = u < q                                        # (steps, rows)
            order = np.argsort(~take, axis=1, kind="stable")    # the rows drawn first
            drawn.append((k, a, order, take.sum(1)))
    width = max([1, *(int(s.max()) for *_, s in drawn if len(s))])
    rows = np.zeros((c, s_max, width), np.int64)
    wts = np.zeros((c, s_max, width), np.float32)
    for k, a, order, sizes in drawn:
        t = len(sizes)
        valid = np.arange(width)[None, :] < sizes[:, None]
        pos = order[:, :width] if order.shape[1] >= width else \
            np.pad(order, ((0, 0), (0, width - order.shape[1])))
        rows[k, a:a + t] = np.where(valid, pos + lo[k], lo[k])
        wts[k, a:a + t] = valid / np.float32(expected[k])
    return BatchPlan(torch.from_numpy(rows), torch.from_numpy(wts).to(weight_dtype(x)), x, y)
