"""Federated data sets: synthetic (FedProx recipe), digits (scikit-learn), npz (user files),
the image benchmarks MNIST, Fashion-MNIST, CIFAR-10/100 (their standard files) and LEAF's
JSON sets (FEMNIST, Shakespeare). Nothing here downloads: `hierfl data fetch` does
(data/fetch.py)."""
from __future__ import annotations

from ..config.errors import ScenarioError
from ..config.schema import Scenario
from .federated import FederatedData
from .files import DataFileError

SEQUENCE_FREE_MODELS = ("logreg", "linear", "mlp")     # models that read rows as features


def _load(sc: Scenario, n_clients: int) -> FederatedData:
    spec = sc.data
    from .registry import DATASETS
    if spec.name in DATASETS:                   # registered by a plugin
        from .registry import load_registered
        return load_registered(spec, n_clients, sc.seed, sc.file)
    if spec.name in ("synthetic", "synthetic_iid"):
        from .synthetic import generate
        return generate(spec, n_clients, sc.seed)
    if spec.name == "leaf":
        from .leaf import load as load_leaf
        return load_leaf(spec.path or "", spec.users or n_clients, n_clients, sc.seed)
    from .images import IMAGE_SETS
    if spec.name in IMAGE_SETS:
        from .images import load as load_images
        return load_images(spec, n_clients, sc.seed, spec.root or "", sc.file)
    from .real import digits, npz
    if spec.name == "digits":
        return digits(spec, n_clients, sc.seed, sc.file)
    task = "regression" if sc.model.name == "linear" else "classification"
    return npz(spec, n_clients, sc.seed, spec.path or "", task, sc.file)


def load_data(sc: Scenario, n_clients: int) -> FederatedData:
    """The scenario's data split over `n_clients`, as torch tensors (`load_arrays`)."""
    return load_arrays(sc, n_clients).as_tensors()


def load_arrays(sc: Scenario, n_clients: int) -> FederatedData:
    """The scenario's data split over `n_clients`, as numpy arrays (no torch); a missing or
    malformed file is a ScenarioError naming the file and what is wrong with it."""
    try:
        data = _load(sc, n_clients)
    except DataFileError as exc:
        key = "data.path" if sc.data.name in ("npz", "leaf") else "data.root"
        raise ScenarioError.one(sc.file, key, sc.data.path if key == "data.path"
                                else sc.data.root, f"{exc.path}: {exc.message}") from None
    except MemoryError:
        raise ScenarioError.one(sc.file, "data", sc.data.name, "does not fit in this "
                                "machine's memory (resource guard)") from None
    if data.vocab and sc.model.name in SEQUENCE_FREE_MODELS:
        raise ScenarioError.one(sc.file, "model.name", sc.model.name,
                                f"{sc.data.name} rows are character indices (vocabulary "
                                f"{data.vocab}): use a model that embeds them, not a "
                                f"model of feature vectors")
    return data


__all__ = ["DataFileError", "FederatedData", "load_arrays", "load_data"]
