"""The image benchmarks: MNIST, Fashion-MNIST (IDX files) and CIFAR-10/100 (binary records),
with their given train/test split.

The training images are split over clients by `data.partition` (iid, Dirichlet label skew,
label shards: the same draws as digits'). The official test set is kept whole (the global test
accuracy is the standard one) and dealt to clients class by class in proportion to each
client's training rows of that class, so a client's test rows follow its own label mix (for
personalised accuracy). Pixels stay uint8 in memory (60,000 MNIST images: 47 MB); batches
are scaled to [0, 1] when gathered (`learn.batches.model_input`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import seeding
from ..config.errors import ScenarioError
from ..config.schema import DataSpec
from . import cifar, idx
from .federated import FederatedData, offsets_of
from .files import DataFileError, placement, require
from .real import partition

IDX_SETS = ("mnist", "fashion_mnist")
IMAGE_SETS = IDX_SETS + tuple(cifar.LAYOUTS)
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")


@dataclass(frozen=True)
class Source:
    """One image set on disk: sizes from the headers, and readers of labels and pixels."""

    n_train: int
    n_test: int
    input_shape: tuple[int, ...]
    n_classes: int
    labels: Callable[[bool], np.ndarray]                       # train? -> labels
    pixels: Callable[[bool, np.ndarray, int], np.ndarray]     # train?, pos, rows -> pixels

    @property
    def dim(self) -> int:
        return math.prod(self.input_shape)


def _idx_source(name: str, root: str) -> Source:
    tr_x, tr_y, te_x, te_y = (require(root, f, name) for f in IDX_FILES)
    shapes = {p: idx.header(p, 3 if p in (tr_x, te_x) else 1) for p in (tr_x, tr_y, te_x, te_y)}
    for x, y in ((tr_x, tr_y), (te_x, te_y)):
        if shapes[x][0] != shapes[y][0]:
            raise DataFileError(x, f"holds {shapes[x][0]} images, {y} {shapes[y][0]} labels")
    if shapes[tr_x][1:] != shapes[te_x][1:]:
        raise DataFileError(te_x, f"images of {shapes[te_x][1:]} pixels, the training "
                                f"images {shapes[tr_x][1:]}")
    return Source(shapes[tr_y][0], shapes[te_y][0], (1, *shapes[tr_x][1:]), 10,
                  lambda train: idx.read_labels(tr_y if train else te_y, 10),
                  lambda train, pos, n: idx.read_images(tr_x if train else te_x, pos, n))


def _cifar_source(name: str, root: str, label: str) -> Source:
    train, test = cifar.files(name, root)
    lb = cifar.LAYOUTS[name].label_bytes
    which = 0 if lb == 1 or label == "coarse" else 1
    k = cifar.classes(name, label)
    return Source(cifar.check(train, lb), cifar.check(test, lb), cifar.SHAPE, k,
                  lambda tr: cifar.read_labels(train if tr else test, lb, which, k),
                  lambda tr, pos, n: cifar.read_pixels(train if tr else test, lb, pos, n))


def source(spec: DataSpec, root: str) -> Source:
    """The set's files, found and their headers checked (a DataFileError otherwise)."""
    if spec.name in IDX_SETS:
        return _idx_source(spec.name, root)
    return _cifar_source(spec.name, root, spec.label)


def deal_test_rows(parts: list[np.ndarray], y: np.ndarray, y_test: np.ndarray,
                   n_classes: int, g: np.random.Generator) -> list[np.ndarray]:
    """Test rows per client: class c's test rows, shuffled, cut in proportion to the clients'
    training rows of class c (equal shares when no client has any); every test row is used."""
    n = len(parts)
    have = np.zeros((n, n_classes), np.int64)
    for k, rows in enumerate(parts):
        have[k] = np.bincount(y[rows], minlength=n_classes)
    out: list[list[np.ndarray]] = [[] for _ in range(n)]
    for c in range(n_classes):
        rows = g.permutation(np.flatnonzero(y_test == c))
        share = have[:, c].astype(np.float64)
        if share.sum() == 0:
            share[:] = 1.0
        cuts = np.floor(np.cumsum(share)[:-1] / share.sum() * len(rows)).astype(np.int64)
        for k, piece in enumerate(np.split(rows, cuts)):
            out[k].append(piece)
    return [np.sort(np.concatenate(o)).astype(np.int64) for o in out]


def client_problem(spec: DataSpec, n_rows: int, n_clients: int) -> tuple[str, object, str] | None:
    """(key, value, message) when `n_rows` training rows cannot be split over the clients."""
    if n_clients * 2 > n_rows:
        return ("data.name", spec.name, f"{spec.name} has {n_rows} training images: at most "
                f"{n_rows // 2} clients (two rows each), the topology has {n_clients}")
    if spec.partition.kind == "shards" and n_clients * spec.partition.shards_per_client > n_rows:
        return ("data.partition.shards_per_client", spec.partition.shards_per_client,
                f"{n_clients} clients x this many shards is more than the {n_rows} images")
    return None


def load(spec: DataSpec, n_clients: int, seed: int, root: str, file: str) -> FederatedData:
    """The set in `root`, split over `n_clients` (DataFileError for a missing or bad file)."""
    src = source(spec, root)
    bad = client_problem(spec, src.n_train, n_clients)
    if bad:
        raise ScenarioError.one(file, *bad)
    y, y_test = src.labels(True), src.labels(False)
    parts = partition(y, n_clients, spec.partition, seeding.rng(seed, "data/partition"))
    tparts = deal_test_rows(parts, y, y_test, src.n_classes,
                            seeding.rng(seed, "data/test-split"))
    x = src.pixels(True, placement(parts, len(y)), sum(len(p) for p in parts))
    x_test = src.pixels(False, placement(tparts, len(y_test)), sum(len(p) for p in tparts))

    def labels_of(labels: np.ndarray, ps: list[np.ndarray]) -> np.ndarray:
        return labels[np.concatenate(ps)]

    return FederatedData(x, labels_of(y, parts), offsets_of(parts),
                         x_test, labels_of(y_test, tparts),
                         offsets_of(tparts), src.n_classes, src.input_shape)
