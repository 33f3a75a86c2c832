"""Byzantine clients: which clients attack (`attackers`, once per scenario, so every algorithm
of a scenario faces the same ones), what an attacker sends instead of its trained update
(`poison`) and the labels a label-flipping attacker trains on (`label_map`). Equations and
papers: docs/robustness.md."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import torch

from ..seeding import rng
from .spec import AttackSpec


def attackers(spec: AttackSpec, n_clients: int, seed: int,
              device_class: tuple[str, ...] = ()) -> np.ndarray:
    """(N,) bool, True for the attacking clients: `clients` as given, or round(fraction * N)
    (halves up) drawn without replacement from the scenario seed's "attack" stream; with
    `device_class` (each client's class, the topology's), the clients of that class, or
    round(fraction * their number) of them drawn the same way."""
    bad = np.zeros(n_clients, dtype=bool)
    if not spec.active:
        return bad
    if spec.device_class is not None:
        pool = np.flatnonzero(np.asarray(device_class[:n_clients], dtype=object) ==
                              spec.device_class) if len(device_class) else np.zeros(0, int)
        if not len(pool):
            known = sorted(set(device_class) - {""})
            raise ValueError(f"attack.device_class {spec.device_class!r}: no client of this "
                             f"system has it (device classes: {', '.join(known) or 'none'})")
        k = len(pool) if spec.fraction is None else math.floor(spec.fraction * len(pool) + 0.5)
        bad[rng(seed, "attack").choice(pool, size=k, replace=False)] = True
        return bad
    if spec.clients is not None:
        outside = sorted(c for c in spec.clients if not 0 <= c < n_clients)
        if outside:
            raise ValueError(f"attack.clients {outside}: not clients of this system (ids "
                             f"0..{n_clients - 1})")
        bad[spec.clients] = True
        return bad
    k = math.floor(spec.fraction * n_clients + 0.5)
    bad[rng(seed, "attack").choice(n_clients, size=k, replace=False)] = True
    return bad


def alie_z(n: int, f: int) -> float:
    """Baruch et al. 2019's z_max for f attackers among n updates: s = floor(n/2 + 1) - f
    honest updates must be outvoted, z = Phi^-1((n - s) / n). With an attacking majority
    (s <= 0) s is taken as 1; with n < 2 there is no one to hide among (z = 0)."""
    if n < 2:
        return 0.0
    s = max(n // 2 + 1 - f, 1)
    return NormalDist().inv_cdf((n - s) / n)


def poison(spec: AttackSpec, updates: torch.Tensor, bad: torch.Tensor,
           gen: torch.Generator) -> torch.Tensor:
    """A new (C, P) tensor: `updates` with the rows where `bad` is True replaced by what the
    attack sends (the other rows equal to the bit). The honest statistics of alie and ipm are
    unweighted, per coordinate, over this call's other rows (the attackers' own when every row
    attacks); alie's standard deviation divides by the count (defined for one row). gaussian
    draws from `gen` (a CPU generator), one (attackers, P) block in row order. label_flip
    sends its trained update: it attacks the data (label_map)."""
    out = updates.clone()
    bad = torch.as_tensor(bad, dtype=torch.bool, device=updates.device)
    k = int(bad.sum())
    if k == 0 or spec.kind in ("none", "label_flip"):
        return out
    mine = updates[bad]
    if spec.kind == "sign_flip":
        out[bad] = -mine
    elif spec.kind == "scaling":
        out[bad] = mine * spec.factor
    elif spec.kind == "gaussian":
        noise = torch.randn((k, updates.shape[1]), generator=gen, dtype=updates.dtype)
        out[bad] = noise.to(updates.device) * spec.std
    else:                                   # alie, ipm: from the honest rows' statistics
        honest = updates[~bad] if k < len(bad) else mine
        mu = honest.double().mean(0)
        if spec.kind == "alie":
            z = spec.z if spec.z is not None else alie_z(len(bad), k)
            sent = mu + z * honest.double().std(0, correction=0)
        else:
            sent = -spec.epsilon * mu
        out[bad] = sent.to(updates.dtype)
    return out


def label_map(spec: AttackSpec, n_classes: int) -> torch.Tensor:
    """(n_classes,) long: the label an attacker trains on for each true label (`mapping`, or
    y -> n_classes - 1 - y)."""
    if spec.mapping is None:
        return torch.arange(n_classes - 1, -1, -1, dtype=torch.long)
    if len(spec.mapping) != n_classes:
        raise ValueError(f"attack.mapping has {len(spec.mapping)} labels; the data has "
                         f"{n_classes} classes (one target label per class)")
    outside = sorted({v for v in spec.mapping if not 0 <= v < n_classes})
    if outside:
        raise ValueError(f"attack.mapping labels {outside} are not classes of the data "
                         f"(0..{n_classes - 1})")
    return torch.tensor(spec.mapping, dtype=torch.long)
