"""Real and user-supplied data: scikit-learn's bundled digits, and per-client npz files."""
from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from .. import seeding
from ..config.errors import ScenarioError
from ..config.fields import spec
from ..config.limits import memory_limit
from ..config.paths import not_a_file
from ..config.schema import HeldOut, Partitioned
from .federated import FederatedData, split_train_test
from .partitions import PartitionError, partition
from .registry import DatasetFacts, Found, Shape, declare_dataset

if TYPE_CHECKING:
    from ..config.schema import Scenario

DIGITS_SAMPLES = 1797          # rows of scikit-learn's bundled digits
FLOAT32_MAX = float(np.finfo(np.float32).max)
MIN_CLASS_FLOOR = 100         # more classes than training rows (and than this) is refused
MAX_CLASSES = 10_000           # labels of an npz set must be < this (the model has one output each)


def digits_problems(spec: "DigitsSpec", base_dir: str, n_clients: int | None) -> Found:
    """More clients than the 1797 digits can give two rows each, or shards."""
    if n_clients is None:
        return []
    if 2 * n_clients > DIGITS_SAMPLES:
        return [("data.name", "digits", f"digits has {DIGITS_SAMPLES} samples: at most "
                 f"{DIGITS_SAMPLES // 2} clients (two rows each), the topology has {n_clients}")]
    if spec.partition.kind == "shards" and \
            n_clients * spec.partition.shards_per_client > DIGITS_SAMPLES:
        return [("data.partition.shards_per_client", spec.partition.shards_per_client,
                 f"{n_clients} clients x this many shards is more than the {DIGITS_SAMPLES} "
                 "samples")]
    return []


def load_digits(sc: "Scenario", n_clients: int) -> FederatedData:
    return digits(sc.data, n_clients, sc.seed, sc.file)  # type: ignore[arg-type]


@declare_dataset("digits", code=f"{__name__}:load_digits", facts=DatasetFacts(
    check=digits_problems,
    shape=lambda spec, n: Shape(DIGITS_SAMPLES / max(n, 1), 64, 10, DIGITS_SAMPLES / max(n, 1))))
@dataclass(frozen=True)
class DigitsSpec(HeldOut, Partitioned):
    """scikit-learn's 1797 8 x 8 handwritten digits (bundled with scikit-learn, no download),
    split over the clients by `partition:`; each client holds out `test_fraction` of its
    rows."""


def npz_problems(spec: "NpzSpec", base_dir: str, n_clients: int | None) -> Found:
    """No path:, or a file that is not a readable npz of arrays within memory."""

    if not spec.path:
        return [("data.path", None, "npz data needs path: (a file relative to the scenario)")]
    msg = npz_problem(os.path.join(base_dir, spec.path), memory_limit())
    return [("data.path", spec.path, msg)] if msg else []


def load_npz(sc: "Scenario", n_clients: int) -> FederatedData:
    task = "regression" if sc.model.name == "linear" else "classification"
    return npz(sc.data, n_clients, sc.seed, sc.data.path or "", task,  # type: ignore
               sc.file)


@declare_dataset("npz", code=f"{__name__}:load_npz", facts=DatasetFacts(
    labelled=False, files="path", one_file=True, check=npz_problems))
@dataclass(frozen=True)
class NpzSpec(HeldOut):
    """Your own arrays, one npz file: x_0, y_0, x_1, ... one pair per client (integer labels, or
    float targets for the linear model) and optionally x_test_k, y_test_k; a client without
    them holds out `test_fraction` of its rows."""

    path: str | None = spec(None, "the npz file of arrays x_0, y_0, ... (relative to the "
                            "scenario)")


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits (no download): (1797, 64) float64 pixels 0..16 and the
    labels, as `sklearn.datasets.load_digits()` gives them. Read from the package's own file
    (`datasets/data/digits.csv.gz`, parsed as load_digits parses it: np.loadtxt, the label in
    the last column) without importing scikit-learn, whose import (scipy and all) cost ~2.8 s
    of a digits scenario's `hierfl validate`; load_digits itself where the file is elsewhere."""
    import importlib.util

    found = importlib.util.find_spec("sklearn")
    path = None if found is None or not found.origin else os.path.join(
        os.path.dirname(found.origin), "datasets", "data", "digits.csv.gz")
    if path is None or not os.path.isfile(path):
        from sklearn.datasets import load_digits
        ds = load_digits()
        return ds.data, ds.target
    import gzip
    with gzip.open(path, mode="rt", encoding="utf-8") as fh:
        data = np.loadtxt(fh, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int, copy=False)


def digits(spec: DigitsSpec, n_clients: int, seed: int, file: str = "") -> FederatedData:
    pixels, labels = digits_arrays()
    x = pixels.astype(np.float32) / 16.0
    y = labels.astype(np.int64)
    if n_clients * 2 > len(y):
        raise ScenarioError.one(file, "data.name", "digits",
                                f"digits has {len(y)} samples: at most {len(y) // 2} clients "
                                f"(two rows each), the topology has {n_clients}")
    if spec.partition.kind == "shards" and n_clients * spec.partition.shards_per_client > len(y):
        raise ScenarioError.one(file, "data.partition.shards_per_client",
                                spec.partition.shards_per_client,
                                f"{n_clients} clients x this many shards is more than the "
                                f"{len(y)} samples")
    try:
        parts = partition(y, n_clients, spec.partition, seeding.rng(seed, "data/partition"))
    except PartitionError as exc:
        raise ScenarioError.one(file, *exc.triple()) from None
    train, test = [], []
    for k, rows in enumerate(parts):
        tr, te = split_train_test(x[rows], y[rows], spec.test_fraction,
                                  seeding.rng(seed, "data/split", k))
        train.append(tr)
        test.append(te)
    return FederatedData.from_arrays(train, test, 10, (1, 8, 8))


def npz_problem(path: str, limit: float) -> str | None:
    """Why the npz file at `path` cannot be used, judged without loading it (exists, is a zip of
    .npy members, unpacks to at most `limit` bytes), or None."""
    try:
        kind = not_a_file(path)
        if kind:
            return f"{path} is {kind}, not a regular file"
        if not os.path.exists(path):
            return f"file not found: {path}"
        if not os.path.isfile(path):
            return f"not a regular file: {path}"
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (OSError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        return f"not a readable npz file ({exc})"
    bad = [i.filename for i in infos if not i.filename.endswith(".npy")]
    if bad:
        return f"not an npz file of arrays (member {bad[0]!r})"
    total = sum(i.file_size for i in infos)
    if total > limit:
        return (f"unpacks to {total / 2**30:.3g} GiB, more than this machine's "
                f"{limit / 2**30:.3g} GiB (resource guard)")
    return None


def _numeric(a: np.ndarray) -> bool:
    return a.dtype.kind in "biuf"


_Bad = Callable[[object, str], ScenarioError]
_Pair = tuple[np.ndarray, np.ndarray]


def _read_npz(path: str, bad: _Bad) -> dict[str, np.ndarray]:
    """Every array of the npz file at `path`, after the checks that need no loading."""

    why = npz_problem(path, memory_limit())
    if why:
        raise bad(path, why)
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise bad(path, f"not a readable npz file ({exc})") from None


def _targets(y: np.ndarray, yk: str, task: str, path: str, bad: _Bad) -> np.ndarray:
    """Labels (classification: 1-D integers in range) or regression targets as float64."""
    if task != "classification":
        return np.asarray(y, np.float64)
    if y.dtype.kind == "b":
        raise bad(path, f"{yk} ({y.dtype}, shape {y.shape}) holds booleans: labels are integers "
                  "0..K-1 (write them as 0 and 1)")
    if y.dtype.kind not in "biu" or y.ndim != 1:
        raise bad(path, f"{yk} ({y.dtype}, shape {y.shape}) must be 1-D integer labels "
                  "for logreg/mlp")
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= MAX_CLASSES):
        raise bad(path, f"{yk} labels must be in 0..{MAX_CLASSES - 1} "
                  f"(found {int(y.min())}..{int(y.max())})")
    return y.astype(np.int64)


def _pair(arrays: dict[str, np.ndarray], k: str, required: bool, task: str, path: str,
          bad: _Bad) -> _Pair | None:
    """The checked (x, y) arrays x_{k}, y_{k} (k = "0", "test_0", ...); None when both are
    absent and not required."""
    xk, yk = f"x_{k}", f"y_{k}"
    x, y = arrays.get(xk), arrays.get(yk)
    if x is None and y is None and not required:
        return None
    if x is None or y is None:
        raise bad(path, f"{xk} and {yk} go together: {xk if x is None else yk} is missing")
    if not _numeric(x) or not _numeric(y):
        raise bad(path, f"{xk} ({x.dtype}) and {yk} ({y.dtype}) must be numeric arrays")
    if x.ndim < 1 or y.ndim < 1 or len(x) != len(y):
        raise bad(path, f"{xk} {x.shape} and {yk} {y.shape} do not match: one row of "
                  f"{xk} per entry of {yk}")
    if x.ndim == 1 or 0 in x.shape[1:]:
        raise bad(path, f"{xk} {x.shape} needs shape (rows, features...)")
    if required and len(x) < 1:
        raise bad(path, f"{xk} has no rows")
    x = np.asarray(x, np.float64).reshape(len(x), math.prod(x.shape[1:]))   # (0 rows too)
    if not np.all(np.isfinite(x)) or (y.dtype.kind == "f" and not np.all(np.isfinite(y))):
        raise bad(path, f"{xk} / {yk} hold non-finite values (nan or inf)")
    big = float(np.abs(x).max()) if x.size else 0.0
    if big > FLOAT32_MAX:
        raise bad(path, f"{xk} holds values up to {big:.3g}, beyond float32's range "
                  f"({FLOAT32_MAX:.3g}): features are computed in float32")
    return x, _targets(y, yk, task, path, bad)


def _n_classes(train: list[_Pair], test: list[_Pair], task: str, path: str, bad: _Bad) -> int:
    """Checks that the clients agree with each other; the number of classes (0: regression)."""
    dims = {t[0].shape[1] for t in train}
    if len(dims) != 1:
        raise bad(path, f"clients have different feature sizes {sorted(dims)}")
    if task != "classification":
        ys = {t[1].shape[1:] for t in train}
        if len(ys) != 1:
            raise bad(path, f"clients have different target shapes {sorted(ys)}")
        return 0
    n_classes = int(max(int(t[1].max()) for t in train) + 1)
    rows = sum(len(t[1]) for t in train)
    if n_classes > max(rows, MIN_CLASS_FLOOR):
        raise bad(path, f"labels go up to {n_classes - 1} ({n_classes} classes) for only {rows} "
                  f"training rows: most classes would have no rows (number the labels "
                  f"0..K-1; at most max(rows, {MIN_CLASS_FLOOR}) classes)")
    for k, t in enumerate(test):
        if len(t[1]) and int(t[1].max()) >= n_classes:
            raise bad(path, f"test labels of client {k} go up to {int(t[1].max())}, but the "
                      f"training labels only to {n_classes - 1}")
    return n_classes


def npz(spec: NpzSpec, n_clients: int, seed: int, path: str, task: str,
        file: str) -> FederatedData:
    """Arrays x_0, y_0, x_1, ... (train) and optional x_test_k, y_test_k. Every way a file can be
    wrong (missing arrays, shapes that do not match, non-numeric or non-finite values, labels
    out of range) is a ScenarioError naming data.path."""
    def bad(value: object, msg: str) -> ScenarioError:
        return ScenarioError.one(file, "data.path", value, msg)

    arrays = _read_npz(path, bad)
    n_found = sum(1 for k in arrays if k.startswith("x_") and k[2:].isdigit())
    if n_found != n_clients:
        raise bad(path, f"has {n_found} clients (x_0, x_1, ...) but the topology has {n_clients}")
    train, test = [], []
    for k in range(n_clients):
        x, y = _pair(arrays, str(k), True, task, path, bad)  # type: ignore[misc]
        t = _pair(arrays, f"test_{k}", False, task, path, bad)
        if t is None:
            tr, te = split_train_test(x, y, spec.test_fraction, seeding.rng(seed, "data/split", k))
        else:
            if t[0].shape[1] != x.shape[1] or t[1].shape[1:] != y.shape[1:]:
                raise bad(path, f"x_test_{k} / y_test_{k} have {t[0].shape[1]} features and "
                          f"targets {t[1].shape[1:]}, x_{k} / y_{k} {x.shape[1]} and "
                          f"{y.shape[1:]}")
            tr, te = (x, y), t
        train.append(tr)
        test.append(te)
    return FederatedData.from_arrays(train, test, _n_classes(train, test, task, path, bad))
