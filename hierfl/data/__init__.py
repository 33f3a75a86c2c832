"""Federated data sets: synthetic (FedProx recipe), digits (scikit-learn), npz (user files)."""
from __future__ import annotations

from ..config.schema import Scenario
from .federated import FederatedData


def load_data(sc: Scenario, n_clients: int) -> FederatedData:
    spec = sc.data
    if spec.name in ("synthetic", "synthetic_iid"):
        from .synthetic import generate
        return generate(spec, n_clients, sc.seed)
    from .real import digits, npz
    if spec.name == "digits":
        return digits(spec, n_clients, sc.seed, sc.file)
    task = "regression" if sc.model.name == "linear" else "classification"
    return npz(spec, n_clients, sc.seed, spec.path or "", task, sc.file)


__all__ = ["FederatedData", "load_data"]
