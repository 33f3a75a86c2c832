"""Federated data sets: synthetic (FedProx recipe), digits (scikit-learn), npz (user files),
the image benchmarks MNIST, Fashion-MNIST, CIFAR-10/100 (their standard files) and LEAF's
JSON sets (FEMNIST, Shakespeare), each declared once in its own module with its spec and
facts (data/registry.py), and the sets of plugins. Nothing here downloads: `hierfl data fetch`
does (data/fetch.py)."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..config.errors import ScenarioError
from ..config.schema import Scenario
from .check import file_value
from .federated import FederatedData
from .files import DataFileError
from .registry import DATASETS, is_registered, load

SEQUENCE_FREE_MODELS = ("logreg", "linear", "mlp")     # models that read rows as features
INDEX_FREE_MODELS = ("cnn",)           # built-in models of pixels, not of index rows
EMBEDDING_MODELS = ("char_lstm",)      # built-in models that embed index rows


def load_data(sc: Scenario, n_clients: int, edge_of: Any = None) -> FederatedData:
    """The scenario's data split over `n_clients`, as torch tensors (`load_arrays`), with its
    feature skew (`data.shift`, data/shift.py; `edge_of`: each client's edge, for `by: edge`)."""
    data = load_arrays(sc, n_clients)
    shift = getattr(sc.data, "shift", None)
    if shift is not None and (shift.rotate or shift.noise):
        from .shift import apply_shift

        if edge_of is None:
            edge_of = np.zeros(n_clients, np.int64)
        data = apply_shift(data, shift, np.asarray(edge_of), sc.seed)
    return data.as_tensors()


def load_arrays(sc: Scenario, n_clients: int) -> FederatedData:
    """The scenario's data split over `n_clients`, as numpy arrays (no torch); a missing or
    malformed file is a ScenarioError naming the file and what is wrong with it."""
    try:
        data = load(sc, n_clients)
    except DataFileError as exc:
        key, value = file_value(sc.data)
        raise ScenarioError.one(sc.file, key, value, f"{exc.path}: {exc.message}") from None
    except MemoryError:
        raise ScenarioError.one(sc.file, "data", sc.data.name, "does not fit in this "
                                "machine's memory (resource guard)") from None
    if data.vocab and sc.model.name in SEQUENCE_FREE_MODELS:
        raise ScenarioError.one(sc.file, "model.name", sc.model.name,
                                f"{sc.data.name} rows are character indices (vocabulary "
                                f"{data.vocab}): use a model that embeds them, not a "
                                f"model of feature vectors")
    return model_data_problem(sc, data)


def model_data_problem(sc: Scenario, data: FederatedData) -> FederatedData:
    """A built-in model given rows it cannot read: a model that embeds indices (char_lstm)
    given features or pixels (cast to indices they were all 0: it trained on nothing), or
    indices beyond its `vocab`; a CNN given index rows (a dtype error in its first step).
    Rows of whole numbers >= 0 stored as floats (an npz file's) are indices to an embedding
    model: the data is returned with their vocabulary."""
    name, given = sc.model.name, sc.model.options or {}
    if name in EMBEDDING_MODELS and not data.vocab:
        drawn = not is_registered(sc.data) and \
            DATASETS.facts(sc.data.name).layout is not None   # real-valued (validate sees
        #                                                       its layout, no rows)
        vocab = None if drawn or len(data.input_shape) != 1 else \
            _whole_vocab(data.x, data.x_test)      # (it embeds sequences: 1-D rows only)
        if vocab is None:
            raise ScenarioError.one(sc.file, "model.name", name, f"{name} embeds integer "
                                    f"indices; the rows of {sc.data.name} are features or "
                                    "pixels: use a model that reads them (logreg, mlp, cnn)")
        data = dataclasses.replace(data, vocab=vocab)
    if name in EMBEDDING_MODELS and isinstance(given.get("vocab"), int) and \
            not isinstance(given["vocab"], bool) and given["vocab"] < data.vocab:
        raise ScenarioError.one(sc.file, "model.vocab", given["vocab"], f"the rows of "
                                f"{sc.data.name} hold indices up to {data.vocab - 1}: "
                                f"give at least {data.vocab}, or leave vocab out")
    if data.vocab and name in INDEX_FREE_MODELS:
        raise ScenarioError.one(sc.file, "model.name", name,
                                f"{sc.data.name} rows are integer indices (vocabulary "
                                f"{data.vocab}): {name} reads features or pixels; use a model "
                                "that embeds them (char_lstm)")
    return data


def _whole_vocab(x: Any, x_test: Any) -> int | None:
    """The vocabulary of rows that are all whole numbers >= 0 (largest + 1), else None
    (none where there are no rows: the synthetic sets' shapes alone)."""
    xs = [np.asarray(a).reshape(-1) for a in (x, x_test) if a is not None and np.size(a)]
    if not xs or any(a.dtype.kind not in "iuf" for a in xs):
        return None
    top = 0.0
    for a in xs:
        for i in range(0, len(a), 1 << 20):        # in chunks: no copy of a large set, and
            c = a[i:i + (1 << 20)]                  # the first fraction found ends it
            if (c.dtype.kind == "f" and not bool(np.all(c == np.floor(c)))) or c.min() < 0:
                return None
            top = max(top, float(c.max()))
    return int(top) + 1


__all__ = ["DataFileError", "FederatedData", "load_arrays", "load_data", "model_data_problem"]
