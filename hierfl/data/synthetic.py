"""Synthetic(alpha, beta) of FedProx (Li et al., MLSys 2020), seeded.

Device k: n_k = int(lognormal(4, 2)) + 50; u_k ~ N(0, alpha), B_k ~ N(0, beta) (standard
deviations); W_k (d x c) and b_k (c) ~ N(u_k, 1); v_k ~ N(B_k, 1) per coordinate;
x ~ N(v_k, Sigma) with Sigma_jj = j^-1.2; y = argmax softmax(x W_k + b_k).
Synthetic-IID: one W, b ~ N(0, 1) for all devices and v = 0.

Every client draws from its own stream ("data/synthetic/client", k): W_k, b_k, v_k then its rows'
standard normals, in that order, and shuffles its rows for the train/test split with
("data/split", k). The streams are made in bulk (data/streams.py): each client costs one draw
into a shared buffer; its shuffle is done on arrays with every other client's
(data/shuffles.py), and so is everything else, with the same floating-point operations as one
client at a time (x W_k + b_k through the same matrix product, batched over clients with the
same row count), so the numbers are those of the per-client recipe, byte for byte
(tests/test_data_streams.py). `layout` gives the counts and shapes alone, for `hierfl
validate`, without drawing a row."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import seeding
from ..config.fields import all_of, at_most, non_negative, positive, spec
from ..config.schema import DataSpec, Dist, DistSpec, HeldOut, dist_mean
from ..topology.check import dist_problem
from ..topology.dist import draw
from .federated import FederatedData
from .registry import DatasetFacts, Found, Shape, declare_dataset
from .shuffles import permutations
from .streams import normals

if TYPE_CHECKING:
    from ..config.schema import Scenario

CHUNK_DRAWS = 1 << 22           # standard normals drawn per block of clients (32 MB)
DEFAULT_SAMPLES_MEAN = math.exp(4 + 2 ** 2 / 2) + 50   # int(lognormal(4, 2)) + 50


def samples_problems(spec: "SyntheticIidSpec", base_dir: str, n_clients: int | None) -> Found:
    """A `samples:` distribution that can give a client no samples."""
    d = spec.samples
    msg = dist_problem(d, True) if d is not None else None
    if not msg:
        return []
    shown = d if not isinstance(d, DistSpec) else \
        {k: v for k, v in vars(d).items() if v is not None}
    return [("data.samples", shown, f"{msg} (every client needs samples)")]


def shape(spec: "SyntheticIidSpec", n_clients: int) -> Shape:
    """The expected rows of a client (the mean of samples:, capped), before drawing any."""
    mean = DEFAULT_SAMPLES_MEAN if spec.samples is None else max(dist_mean(spec.samples), 2.0)
    return Shape(min(mean, spec.max_samples), spec.dim, spec.classes, float(spec.max_samples))


def load(sc: "Scenario", n_clients: int) -> FederatedData:
    return generate(sc.data, n_clients, sc.seed)  # type: ignore[arg-type]


_FACTS = DatasetFacts(check=samples_problems, shape=shape,
                      layout=lambda spec, n, seed: layout(spec, n, seed))


@dataclass(frozen=True)
class Draws(DataSpec):
    """The keys of both synthetic sets: the shape of the rows and how many each client has."""

    dim: int = spec(60, "feature dimension", check=all_of(positive, at_most(1e5)))
    classes: int = spec(10, "number of classes", check=all_of(positive, at_most(1e4)))
    samples: Dist | None = spec(None, "per-client sample count distribution "
                                "(default: int(lognormal(4, 2)) + 50, the FedProx recipe)")
    max_samples: int = spec(100_000, "cap on one client's samples (resource guard)",
                            check=positive)


@dataclass(frozen=True)
class Heterogeneity(DataSpec):
    """synthetic's own keys: how much the clients' models and features differ."""

    alpha: float = spec(1.0, "std of u_k (model heterogeneity)", check=non_negative)
    beta: float = spec(1.0, "std of B_k (feature heterogeneity)", check=non_negative)


@declare_dataset("synthetic_iid", code=f"{__name__}:load", facts=_FACTS)
@dataclass(frozen=True)
class SyntheticIidSpec(HeldOut, Draws):
    """Synthetic-IID of FedProx (Li et al., MLSys 2020): one softmax model W, b ~ N(0, 1) for
    every client, features x ~ N(0, Sigma), generated from the seed; each client holds out
    `test_fraction` of its rows."""


@declare_dataset("synthetic", code=f"{__name__}:load", facts=_FACTS)
@dataclass(frozen=True)
class SyntheticSpec(SyntheticIidSpec, Heterogeneity):     # keys: alpha, beta, then the rest
    """Synthetic(alpha, beta) of FedProx (Li et al., MLSys 2020): client k's softmax model
    W_k, b_k ~ N(u_k, 1) with u_k ~ N(0, alpha) and its features x ~ N(v_k, Sigma) with
    v_k ~ N(B_k, 1), B_k ~ N(0, beta), generated from the seed; each client holds out
    `test_fraction` of its rows."""


def sample_counts(spec: SyntheticIidSpec, n_clients: int, seed: int) -> np.ndarray:
    g = seeding.rng(seed, "data/synthetic/sizes")
    if spec.samples is None:
        n = g.lognormal(4, 2, n_clients).astype(np.int64) + 50
    else:
        n = np.maximum(draw(spec.samples, g, n_clients).astype(np.int64), 2)
    return np.minimum(n, spec.max_samples)


def test_counts(counts: np.ndarray, fraction: float) -> np.ndarray:
    """Rows each client holds out (federated.split_train_test's rule, on all clients)."""
    held = np.minimum(np.round(fraction * counts).astype(np.int64), counts - 1)
    return np.where(counts > 1, held, 0)


def _offsets(n: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(n)]).astype(np.int64)


def layout(spec: SyntheticIidSpec, n_clients: int, seed: int) -> FederatedData:
    """The data's counts and shapes without its values: x, y, x_test, y_test are read-only
    broadcast zeros of the right shapes (no memory), for checks that need sizes only."""
    counts = sample_counts(spec, n_clients, seed)
    held = test_counts(counts, spec.test_fraction)
    off, toff = _offsets(counts - held), _offsets(held)

    def zeros(rows: int, *shape: int, dtype=np.float32) -> np.ndarray:
        return np.broadcast_to(np.zeros((1,) * (1 + len(shape)), dtype), (rows, *shape))
    return FederatedData(zeros(int(off[-1]), spec.dim), zeros(int(off[-1]), dtype=np.int64), off,
                         zeros(int(toff[-1]), spec.dim), zeros(int(toff[-1]), dtype=np.int64),
                         toff, spec.classes)


def generate(spec: SyntheticIidSpec, n_clients: int, seed: int) -> FederatedData:
    """The set of `spec` (SyntheticSpec: heterogeneous clients; SyntheticIidSpec: one model)
    over `n_clients`, drawn from `seed`."""
    d, c = spec.dim, spec.classes
    iid = not isinstance(spec, SyntheticSpec)
    counts = sample_counts(spec, n_clients, seed)
    shared = seeding.rng(seed, "data/synthetic/shared")
    w_iid, b_iid = shared.normal(0, 1, (d, c)), shared.normal(0, 1, c)
    u = bk = np.zeros(0)                               # (synthetic_iid: no u_k, B_k)
    if isinstance(spec, SyntheticSpec):
        g_het = seeding.rng(seed, "data/synthetic/heterogeneity")
        u = g_het.normal(0, spec.alpha, n_clients)
        bk = g_het.normal(0, spec.beta, n_clients)
    held = test_counts(counts, spec.test_fraction)
    off, toff = _offsets(counts - held), _offsets(held)
    out = (np.empty((off[-1], d), np.float32), np.empty(off[-1], np.int64),
           np.empty((toff[-1], d), np.float32), np.empty(toff[-1], np.int64))
    head = 0 if iid else d * c + c + d                 # W_k, b_k, v_k before the rows
    draws = np.cumsum(head + counts * d)
    lo = 0
    while lo < n_clients:       # blocks of clients drawing about CHUNK_DRAWS normals together
        base = draws[lo - 1] if lo else 0
        hi = max(int(np.searchsorted(draws, base + CHUNK_DRAWS, "right")), lo + 1)
        ks = np.arange(lo, hi)
        if iid:
            w = np.broadcast_to(w_iid, (len(ks), d, c))
            b = np.broadcast_to(b_iid, (len(ks), c))
            v = np.zeros((len(ks), d))
        else:
            w, b, v = None, None, None
        _block(ks, counts[ks], held[ks], head, (w, b, v), u, bk, spec, seed, out,
               (off[lo], toff[lo]))
        lo = hi
    return FederatedData(*out[:2], off, *out[2:], toff, c)


def _block(ks: np.ndarray, n: np.ndarray, held: np.ndarray, head: int, wbv: tuple,
           u: np.ndarray, bk: np.ndarray, spec: SyntheticIidSpec, seed: int, out: tuple,
           at: tuple[int, int]) -> None:
    """Clients ks (consecutive): draw, label and split their rows into out's train and test
    arrays from rows at[0] and at[1] on."""
    d, c = spec.dim, spec.classes
    zo = _offsets(head + n * d)
    ro = _offsets(n)
    z = np.empty(zo[-1])
    normals(seed, "data/synthetic/client", ks, z, zo)          # each client's stream, in order
    perm = permutations(seed, "data/split", ks, n)   # each client's permutation(n_k)
    one = bool((n == n[0]).all())                    # clients of one size: views, no gathers
    if one:
        zk = z.reshape(len(ks), -1)                  # a client's draws: its head, its rows
        h, rows = zk[:, :head], zk[:, head:]
    else:
        heads = zo[:-1, None] + np.arange(head)
        h = z[heads]
        keep = np.ones(len(z), bool)                 # the rows' draws, in order: all but
        keep[heads.ravel()] = False                  # the W_k, b_k, v_k heads
        rows = z[keep].reshape(-1, d)
    w, b, v = wbv
    if head:
        w = u[ks, None, None] + h[:, :d * c].reshape(-1, d, c)
        b = u[ks, None] + h[:, d * c:d * c + c]
        v = bk[ks, None] + h[:, d * c + c:]
    x, y = _labelled(rows, n, ro, (w, b, v), d, one)
    if one:                     # test rows: each client's permutation's first held[0]
        src = perm.reshape(len(ks), -1) + ro[:-1, None]
        parts = src[:, int(held[0]):].ravel(), src[:, :int(held[0])].ravel()
    else:
        first = np.repeat(ro[:-1], n)                # each row's client's first row
        test = np.arange(ro[-1]) - first < np.repeat(held, n)
        src = perm + first
        parts = src[~test], src[test]
    x32 = x.astype(np.float32)
    for rows_of, (xo, yo), start in zip(parts, (out[:2], out[2:]), at):
        np.take(x32, rows_of, axis=0, out=xo[start:start + len(rows_of)], mode="clip")
        np.take(y, rows_of, out=yo[start:start + len(rows_of)], mode="clip")


def _labelled(rows: np.ndarray, n: np.ndarray, ro: np.ndarray, wbv: tuple, d: int,
              one: bool) -> tuple[np.ndarray, np.ndarray]:
    """The clients' rows (x = rows * sd + v_k, flat) and labels (argmax of x_k W_k + b_k): for
    clients of one size, rows is (clients, size * d), the sums made on whole rows with sd, v_k
    and b_k tiled (the same operations as broadcasting them, without numpy's inner loop per
    feature); else rows is flat, one product per size."""
    w, b, v = wbv
    sd = np.sqrt(np.arange(1, d + 1, dtype=np.float64) ** -1.2)
    if one:
        k, size = len(rows), rows.shape[1] // d
        x = rows * np.tile(sd, size)
        x += np.tile(v, size)
        logits = np.matmul(x.reshape(k, size, d), np.ascontiguousarray(w)).reshape(k, -1)
        logits += np.tile(b, size)
        return x.reshape(-1, d), np.argmax(logits.reshape(k, size, -1), axis=2).ravel()
    x = rows * sd + np.repeat(v, n, axis=0)
    y = np.empty(len(x), np.int64)
    for size in np.unique(n):                        # x_k W_k + b_k, one product per size
        sel = np.flatnonzero(n == size)
        r = (ro[sel, None] + np.arange(size)).ravel()
        logits = np.matmul(x[r].reshape(len(sel), size, d), w[sel]) + b[sel][:, None, :]
        y[r] = np.argmax(logits, axis=2).ravel()
    return x, y

