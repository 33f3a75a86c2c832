"""The image benchmarks: MNIST, Fashion-MNIST (IDX files) and CIFAR-10/100 (binary records),
with their given train/test split.

The training images are split over clients by `data.partition` (data/partitions.py: iid,
Dirichlet label skew, label shards, classes per client, quantity skew; the same draws as
digits'). The official test set is kept whole (the global test accuracy is the standard
one) and dealt to clients class by class in proportion to each client's training rows of
that class, so a client's test rows follow its own label mix (for personalised accuracy).
Pixels stay uint8 in memory (60,000 MNIST images: 47 MB); batches are scaled to [0, 1] when
gathered (`learn.batches.model_input`)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal

import numpy as np

from .. import seeding
from ..config.errors import ScenarioError
from ..config.fields import spec
from ..config.schema import DataSpec, Partitioned
from . import cifar, idx
from .federated import FederatedData, offsets_of
from .files import DataFileError, fetch_hint, placement, require
from .partitions import PartitionError, partition
from .registry import DatasetFacts, Found, Remote, Shape, declare_dataset

if TYPE_CHECKING:
    from ..config.schema import Scenario

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")


# ------------------------------------------------------------------------------ declarations
@dataclass(frozen=True)
class ImagesSpec(DataSpec):
    """A set of images in the standard files of its authors, in a folder."""

    root: str | None = spec(None, "the folder of the set's standard files (relative to the "
                            "scenario); `hierfl data fetch NAME --root DIR` downloads them")


@dataclass(frozen=True)
class IdxSpec(Partitioned, ImagesSpec):
    """MNIST or Fashion-MNIST: the four IDX files (optionally .gz) in root:."""


@dataclass(frozen=True)
class Cifar10Spec(Partitioned, ImagesSpec):
    """CIFAR-10: the binary version's .bin files in root:."""


@dataclass(frozen=True)
class Cifar100Spec(Partitioned, ImagesSpec):
    """CIFAR-100: the binary version's .bin files in root:, with fine or coarse labels."""

    label: Literal["fine", "coarse"] = spec("fine", "the 100 fine or 20 coarse labels")


Images = IdxSpec | Cifar10Spec | Cifar100Spec      # the image sets' specs (partitioned)


def images_problems(spec: Images, base_dir: str, n_clients: int | None) -> Found:
    """No root:, or files missing or malformed there, or too few images for the clients."""
    if not spec.root:
        return [("data.root", None, f"{spec.name} needs root: (the folder of its files); "
                 f"{fetch_hint(spec.name, 'DIR')}")]
    try:
        src = source(spec, os.path.join(base_dir, spec.root))
    except DataFileError as exc:
        return [("data.root", spec.root, f"{exc.path}: {exc.message}")]
    bad = client_problem(spec, src.n_train, n_clients) if n_clients is not None else None
    return [bad] if bad else []


def official(rows: int, dim: int, classes: int) -> Callable[[ImagesSpec, int], Shape]:
    """The size of a set's official files (training rows, features, classes), per client."""
    def shape(spec: ImagesSpec, n_clients: int) -> Shape:
        k = 20 if isinstance(spec, Cifar100Spec) and spec.label == "coarse" else classes
        per = rows / max(n_clients, 1)
        return Shape(per, dim, k, per)
    return shape


def load_set(sc: "Scenario", n_clients: int) -> FederatedData:
    return load(sc.data, n_clients, sc.seed, sc.data.root or "", sc.file)  # type: ignore


_MNIST = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
_FASHION = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/")
_TORONTO = ("https://www.cs.toronto.edu/~kriz/",)
_IDX = tuple(f"{f}.gz" for f in IDX_FILES)


def _facts(shape: Callable[[ImagesSpec, int], Shape], fetch: tuple[Remote, ...]
           ) -> DatasetFacts:
    return DatasetFacts(files="root", check=images_problems, shape=shape, fetch=fetch)


# file names and MD5 sums as published by the sets' authors (the same as torchvision's)
declare_dataset("mnist", code=f"{__name__}:load_set", summary=(
    "MNIST (LeCun et al.): 70,000 28 x 28 handwritten digits, its four IDX files (optionally "
    ".gz) in root:, the training images split over the clients by partition:, the test set "
    "kept whole."), facts=_facts(official(60_000, 784, 10), tuple(
        Remote(n, m, _MNIST) for n, m in zip(_IDX, (
            "f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
            "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c")))))(IdxSpec)
declare_dataset("fashion_mnist", code=f"{__name__}:load_set", summary=(
    "Fashion-MNIST (Xiao et al.): 70,000 28 x 28 images of clothes in 10 classes, MNIST's "
    "file format and split."), facts=_facts(official(60_000, 784, 10), tuple(
        Remote(n, m, _FASHION) for n, m in zip(_IDX, (
            "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
            "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310")))))(IdxSpec)
declare_dataset("cifar10", code=f"{__name__}:load_set", summary=(
    "CIFAR-10 (Krizhevsky): 60,000 32 x 32 colour images in 10 classes, the binary version's "
    ".bin files in root:, the training images split over the clients by partition:, the test "
    "set kept whole."), facts=_facts(official(50_000, 3072, 10), (
        Remote("cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530", _TORONTO,
               tuple(f"cifar-10-batches-bin/{f}" for f in
                     [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"])),)
    ))(Cifar10Spec)
declare_dataset("cifar100", code=f"{__name__}:load_set", summary=(
    "CIFAR-100 (Krizhevsky): 60,000 32 x 32 colour images in 100 fine or 20 coarse classes, "
    "the binary version's train.bin and test.bin in root:."), facts=_facts(
        official(50_000, 3072, 100), (
            Remote("cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8", _TORONTO,
                   ("cifar-100-binary/train.bin", "cifar-100-binary/test.bin")),)
    ))(Cifar100Spec)


# ------------------------------------------------------------------------------ the files


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


def source(spec: ImagesSpec, root: str) -> Source:
    """The set's files, found and their headers checked (a DataFileError otherwise)."""
    if isinstance(spec, IdxSpec):
        return _idx_source(spec.name, root)
    return _cifar_source(spec.name, root, spec.label if isinstance(spec, Cifar100Spec)
                         else "fine")


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


def client_problem(spec: Images, n_rows: int, n_clients: int
                   ) -> tuple[str, object, str] | None:
    """(key, value, message) when `n_rows` training rows cannot be split over the clients."""
    if n_clients * 2 > n_rows:
        return ("data.name", spec.name, f"{spec.name} has {n_rows} training images: at most "
                f"{n_rows // 2} clients (two rows each), the topology has {n_clients}")
    if spec.partition.kind == "shards" and n_clients * spec.partition.shards_per_client > n_rows:
        return ("data.partition.shards_per_client", spec.partition.shards_per_client,
                f"{n_clients} clients x this many shards is more than the {n_rows} images")
    return None


def load(spec: Images, n_clients: int, seed: int, root: str, file: str) -> FederatedData:
    """The set in `root`, split over `n_clients` (DataFileError for a missing or bad file)."""
    src = source(spec, root)
    bad = client_problem(spec, src.n_train, n_clients)
    if bad:
        raise ScenarioError.one(file, *bad)
    y, y_test = src.labels(True), src.labels(False)
    try:
        parts = partition(y, n_clients, spec.partition, seeding.rng(seed, "data/partition"))
    except PartitionError as exc:
        raise ScenarioError.one(file, *exc.triple()) from None
    tparts = deal_test_rows(parts, y, y_test, src.n_classes,
                            seeding.rng(seed, "data/test-split"))
    x = src.pixels(True, placement(parts, len(y)), sum(len(p) for p in parts))
    x_test = src.pixels(False, placement(tparts, len(y_test)), sum(len(p) for p in tparts))

    def labels_of(labels: np.ndarray, ps: list[np.ndarray]) -> np.ndarray:
        return labels[np.concatenate(ps)]

    return FederatedData(x, labels_of(y, parts), offsets_of(parts),
                         x_test, labels_of(y_test, tparts),
                         offsets_of(tparts), src.n_classes, src.input_shape)
