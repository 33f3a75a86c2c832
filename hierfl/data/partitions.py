"""How a labelled set's training rows are split over clients (`data.partition`).

Every kind draws from one generator the caller keys by the scenario seed and the stable name
"data/partition" (seeding.rng), so the same seed gives the same split and another seed another.
The rules, K clients, N rows, L labels present:

- iid: a permutation of the rows cut into K near-equal runs.
- shards: rows sorted by label, cut into K * shards_per_client near-equal shards, dealt at
  random (McMahan et al.'s pathological split; a client may get two shards of one label).
- dirichlet: per label, its rows permuted and cut by shares p ~ Dir(alpha * 1_K); a client left
  with fewer than two rows takes rows from the largest. With `min_size: m`, the rule of the
  NIID-Bench and FedLab partitioners (Li et al. 2022, `noniid-labeldir`): label by label, a
  client already holding >= N / K rows gets share 0 (p_k <- p_k [n_k < N / K], renormalised),
  and the whole draw is repeated (the same generator, drawing on) until every client has >= m
  rows, at most MAX_DRAWS times, else refused naming data.partition.min_size.
- classes_per_client (`classes: C`): every client holds exactly C distinct labels. The labels
  are laid in a random cyclic order pi and the K * C label slots filled along it, slot j getting
  label pi[j mod L]; client block b takes slots bC .. bC + C - 1 (C consecutive places of a cycle
  of length L >= C: distinct labels), and the blocks are dealt to clients by a random permutation.
  Label pi[i] is so held by m_i = floor(KC / L) clients, one more for i < KC mod L (as even as
  whole slots allow); its rows are permuted and cut into m_i near-equal pieces (sizes differ by
  at most one within a label). Needs C <= L, K * C >= L (every label goes to some client) and
  ceil(KC / L) <= the rows of the rarest label (every holder gets a row).
- quantity_skew: labels iid, sizes skewed. Weights w_k are drawn, lognormal: log w_k =
  sigma * z_k, z_k ~ N(0, 1); power_law: w_k Pareto with tail index alpha (P(w > x) = x^-alpha,
  x >= 1; log w_k ~ Exponential(alpha)). With m = min_size (default 1) and R = N - K m, client k
  gets n_k = m + floor(R w_k / sum w) rows, the R - sum floor(...) rows left over going one each
  to the largest fractional parts (ties: lower k). The sizes sum to N, every n_k >= m, and for
  n_k >> m, log n_k = log w_k + const (the sizes' log has sd sigma, or 1/alpha). A permutation of
  the rows is then cut into runs of these sizes.

An impossible request is a PartitionError naming the key (data.partition.classes, ...), which
the loaders turn into a ScenarioError (exit 2, the file and key named)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..config.schema import PartitionSpec

MAX_DRAWS = 1000        # dirichlet with min_size: draws tried before the request is refused


class PartitionError(ValueError):
    """A partition the data cannot give: key (data.partition.X), value, message."""

    def __init__(self, key: str, value: object, message: str):
        super().__init__(message)
        self.key, self.value = key, value

    def triple(self) -> tuple[str, object, str]:
        return self.key, self.value, str(self)


def partition_problem(labels: np.ndarray, n_clients: int, spec: "PartitionSpec"
                      ) -> tuple[str, object, str] | None:
    """(key, value, message) when the labels cannot be split over `n_clients` as `spec` asks
    (judged before any draw; the same for every seed), else None."""
    n = len(labels)
    if spec.kind == "classes_per_client":
        present, counts = np.unique(labels, return_counts=True)
        n_labels, c = len(present), spec.classes
        if c > n_labels:
            return ("data.partition.classes", c, f"the rows split hold {n_labels} labels: a "
                    f"client cannot hold {c} distinct ones")
        if n_clients * c < n_labels:
            return ("data.partition.classes", c, f"{n_clients} clients x {c} labels is "
                    f"{n_clients * c} label places, fewer than the {n_labels} labels: some "
                    f"labels' rows would go to no client (give classes: >= "
                    f"{math.ceil(n_labels / n_clients)})")
        share = math.ceil(n_clients * c / n_labels)
        if share > int(counts.min()):
            rare = int(present[int(np.argmin(counts))])
            return ("data.partition.classes", c, f"each label is held by up to {share} clients "
                    f"({n_clients} clients x {c} labels over {n_labels} labels), but label "
                    f"{rare} has only {int(counts.min())} training rows")
    if spec.kind in ("dirichlet", "quantity_skew") and spec.min_size is not None \
            and n_clients * spec.min_size > n:
        return ("data.partition.min_size", spec.min_size, f"{n_clients} clients x "
                f"{spec.min_size} rows is more than the {n} rows split over them")
    return None


def partition(labels: np.ndarray, n_clients: int, spec: "PartitionSpec",
              g: np.random.Generator) -> list[np.ndarray]:
    """Row indices per client (sorted), by the rule of `spec.kind` (the module's doc)."""
    bad = partition_problem(labels, n_clients, spec)
    if bad:
        raise PartitionError(*bad)
    n = len(labels)
    if spec.kind == "iid":
        return [np.sort(p) for p in np.array_split(g.permutation(n), n_clients)]
    if spec.kind == "shards":
        order = np.argsort(labels, kind="stable")
        shards = np.array_split(order, n_clients * spec.shards_per_client)
        pick = g.permutation(len(shards)).reshape(n_clients, spec.shards_per_client)
        return [np.sort(np.concatenate([shards[s] for s in row])) for row in pick]
    if spec.kind == "classes_per_client":
        return _classes_per_client(labels, n_clients, spec.classes, g)
    if spec.kind == "quantity_skew":
        return _quantity_skew(n, n_clients, spec, g)
    return _dirichlet(labels, n_clients, spec, g)


def _dirichlet_draw(labels: np.ndarray, n_clients: int, alpha: float,
                    g: np.random.Generator, capped: bool = False) -> list[list[np.ndarray]]:
    """One Dirichlet draw, label by label; `capped`: NIID-Bench's rule, a client holding N / K
    rows or more gets no share of the labels still to deal."""
    pieces: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    held = np.zeros(n_clients, np.int64)
    for cls in np.unique(labels):
        idx = g.permutation(np.flatnonzero(labels == cls))
        share = g.dirichlet(np.full(n_clients, alpha))
        if capped:
            below = held < len(labels) / n_clients        # some client is (sum held < N)
            share = share * below
            total = share.sum()                 # 0 where every share left underflowed
            share = share / total if total > 0 else below / below.sum()
        cuts = (np.cumsum(share)[:-1] * len(idx)).astype(int)
        for k, piece in enumerate(np.split(idx, cuts)):
            pieces[k].append(piece)
            held[k] += len(piece)
    return pieces


def _dirichlet(labels: np.ndarray, n_clients: int, spec: "PartitionSpec",
               g: np.random.Generator) -> list[np.ndarray]:
    capped = spec.min_size is not None
    pieces = _dirichlet_draw(labels, n_clients, spec.alpha, g, capped)
    if capped:
        tries = 1
        while min(sum(len(p) for p in ps) for ps in pieces) < spec.min_size:
            if tries == MAX_DRAWS:
                raise PartitionError(
                    "data.partition.min_size", spec.min_size,
                    f"no Dirichlet({spec.alpha:g}) draw of {MAX_DRAWS} gave every one of the "
                    f"{n_clients} clients {spec.min_size} rows or more (of {len(labels)}): "
                    "lower min_size or raise alpha")
            pieces = _dirichlet_draw(labels, n_clients, spec.alpha, g, capped)
            tries += 1
    parts = [[i for p in ps for i in p.tolist()] for ps in pieces]
    # every client needs at least two rows: move rows from the largest clients
    for k in range(n_clients):
        while len(parts[k]) < 2:
            donor = int(np.argmax([len(p) for p in parts]))
            parts[k].append(parts[donor].pop())
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def _classes_per_client(labels: np.ndarray, n_clients: int, c: int,
                        g: np.random.Generator) -> list[np.ndarray]:
    present = np.unique(labels)
    n_labels = len(present)
    cycle = g.permutation(n_labels)
    blocks = cycle[np.arange(n_clients * c) % n_labels].reshape(n_clients, c)
    owner = g.permutation(n_clients)                  # block b goes to client owner[b]
    held = np.empty((n_clients, c), np.int64)
    held[owner] = blocks
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for i, lab in enumerate(present):
        holders = np.flatnonzero((held == i).any(axis=1))         # in client order
        rows = g.permutation(np.flatnonzero(labels == lab))
        for k, piece in zip(holders, np.array_split(rows, len(holders))):
            parts[int(k)].append(piece)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


def quantity_sizes(n: int, n_clients: int, spec: "PartitionSpec",
                   g: np.random.Generator) -> np.ndarray:
    """The client sizes of quantity_skew (the module's doc): sum n, each >= min_size."""
    m = spec.min_size or 1
    if spec.sizes == "lognormal":
        logw = spec.sigma * g.standard_normal(n_clients)
    else:                                   # Pareto(alpha), x_m = 1: log w ~ Exp(alpha)
        logw = -np.log1p(-g.random(n_clients)) / spec.alpha
    w = np.exp(logw - logw.max())
    rest = n - n_clients * m
    raw = rest * w / w.sum()
    base = np.floor(raw).astype(np.int64)
    left = int(rest - base.sum())
    order = np.argsort(-(raw - base), kind="stable")
    base[order[:left]] += 1
    return m + base


def _quantity_skew(n: int, n_clients: int, spec: "PartitionSpec",
                   g: np.random.Generator) -> list[np.ndarray]:
    sizes = quantity_sizes(n, n_clients, spec, g)
    cuts = np.cumsum(sizes)[:-1]
    return [np.sort(p) for p in np.split(g.permutation(n), cuts)]


def spread(y: np.ndarray, offsets: np.ndarray) -> tuple[int, int, int, int]:
    """(fewest rows, most rows, fewest distinct labels, most distinct labels) over the clients
    whose rows y[offsets[k]:offsets[k + 1]] are (for `hierfl validate`'s summary)."""
    sizes = np.diff(offsets)
    distinct = [len(np.unique(y[a:b])) for a, b in zip(offsets[:-1], offsets[1:])]
    return int(sizes.min()), int(sizes.max()), min(distinct), max(distinct)
