"""Real and user-supplied data: scikit-learn's bundled digits, and per-client npz files."""
from __future__ import annotations

import os
import zipfile

import numpy as np

from .. import seeding
from ..scenario.errors import ScenarioError
from ..scenario.schema import DataSpec, PartitionSpec
from .federated import FederatedData, split_train_test


def partition(labels: np.ndarray, n_clients: int, spec: PartitionSpec,
              g: np.random.Generator) -> list[np.ndarray]:
    """Row indices per client: iid, Dirichlet(alpha) label skew, or label-sorted shards."""
    n = len(labels)
    if spec.kind == "iid":
        return [np.sort(p) for p in np.array_split(g.permutation(n), n_clients)]
    if spec.kind == "shards":
        order = np.argsort(labels, kind="stable")
        shards = np.array_split(order, n_clients * spec.shards_per_client)
        pick = g.permutation(len(shards)).reshape(n_clients, spec.shards_per_client)
        return [np.sort(np.concatenate([shards[s] for s in row])) for row in pick]
    parts: list[list[int]] = [[] for _ in range(n_clients)]
    for cls in np.unique(labels):
        idx = g.permutation(np.flatnonzero(labels == cls))
        share = g.dirichlet(np.full(n_clients, spec.alpha))
        cuts = (np.cumsum(share)[:-1] * len(idx)).astype(int)
        for k, piece in enumerate(np.split(idx, cuts)):
            parts[k].extend(piece.tolist())
    # every client needs at least two rows: move rows from the largest clients
    sizes = [len(p) for p in parts]
    for k in range(n_clients):
        while len(parts[k]) < 2:
            donor = int(np.argmax([len(p) for p in parts]))
            parts[k].append(parts[donor].pop())
    del sizes
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def digits(spec: DataSpec, n_clients: int, seed: int) -> FederatedData:
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    ds = load_digits()
    x = ds.data.astype(np.float32) / 16.0
    y = ds.target.astype(np.int64)
    if n_clients * 2 > len(y):
        raise ScenarioError.one("", "clients.count", n_clients,
                                f"digits has {len(y)} samples: at most {len(y) // 2} clients")
    parts = partition(y, n_clients, spec.partition, seeding.rng(seed, "data/partition"))
    train, test = [], []
    for k, rows in enumerate(parts):
        tr, te = split_train_test(x[rows], y[rows], spec.test_fraction,
                                  seeding.rng(seed, "data/split", k))
        train.append(tr)
        test.append(te)
    return FederatedData.from_arrays(train, test, 10)


def npz(spec: DataSpec, n_clients: int, seed: int, path: str, task: str,
        file: str) -> FederatedData:
    """Arrays x_0, y_0, x_1, ... (train) and optional x_test_k, y_test_k."""
    def bad(value: object, msg: str) -> ScenarioError:
        return ScenarioError.one(file, "data.path", value, msg)

    if not os.path.isfile(path):
        raise bad(path, "file not found")
    try:
        arrays = dict(np.load(path, allow_pickle=False))
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise bad(path, f"not a readable npz file ({exc})") from None
    n_found = sum(1 for k in arrays if k.startswith("x_") and k[2:].isdigit())
    if n_found != n_clients:
        raise bad(path, f"has {n_found} clients (x_0, x_1, ...) but the topology has {n_clients}")
    train, test = [], []
    for k in range(n_clients):
        x, y = arrays.get(f"x_{k}"), arrays.get(f"y_{k}")
        if x is None or y is None:
            raise bad(path, f"missing x_{k} or y_{k}")
        x = np.asarray(x, np.float64).reshape(len(x), -1) if x.ndim else x
        if x.ndim != 2 or len(y) != len(x) or len(x) < 1:
            raise bad(path, f"x_{k} {x.shape} and y_{k} {y.shape} do not match")
        if not np.all(np.isfinite(x)) or (y.dtype.kind == "f" and not np.all(np.isfinite(y))):
            raise bad(path, f"client {k} has non-finite values")
        if task == "classification" and (y.dtype.kind not in "iu" or y.ndim != 1):
            raise bad(path, f"y_{k} must be 1-D integer labels for logreg/mlp")
        xt, yt = arrays.get(f"x_test_{k}"), arrays.get(f"y_test_{k}")
        if xt is None:
            tr, te = split_train_test(x, y, spec.test_fraction, seeding.rng(seed, "data/split", k))
        else:
            xt = np.asarray(xt, np.float64).reshape(len(xt), -1)
            if yt is None or len(yt) != len(xt) or xt.shape[1] != x.shape[1]:
                raise bad(path, f"x_test_{k} / y_test_{k} do not match x_{k}")
            tr, te = (x, y), (xt, yt)
        train.append(tr)
        test.append(te)
    dims = {t[0].shape[1] for t in train}
    if len(dims) != 1:
        raise bad(path, f"clients have different feature sizes {sorted(dims)}")
    if task == "classification":
        n_classes = int(max(int(t[1].max()) for t in train if len(t[1])) + 1)
        if min(int(t[1].min()) for t in train if len(t[1])) < 0:
            raise bad(path, "labels must be >= 0")
    else:
        n_classes = 0
        ys = {t[1].shape[1:] for t in train}
        if len(ys) != 1:
            raise bad(path, f"clients have different target shapes {sorted(ys)}")
    return FederatedData.from_arrays(train, test, n_classes)
