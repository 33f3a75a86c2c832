"""clients.csv by device and link class (the `device_class`, `link_class` columns: a client's
`profiles.devices` / `profiles.links` names, empty without `clients.mix`): per class, the
client-rounds, steps, compute and upload time, bytes uploaded and drops."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from .cells import read_columns
from .metrics import floats

NUMERIC = ("client", "steps", "compute_s", "upload_s", "up_bytes", "dropped", "energy_j", "tx_s")
CLASS_COLUMNS = ("device_class", "link_class")


@dataclass
class ClassTotals:
    """Sums over the client-rounds of one class (finite values only, with their counts)."""

    clients: set = field(default_factory=set)
    rounds: int = 0
    sums: dict[str, float] = field(default_factory=lambda: {k: 0.0 for k in NUMERIC[1:]})
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in NUMERIC[1:]})

    def mean(self, key: str) -> float:
        return self.sums[key] / self.counts[key] if self.counts[key] else math.nan


def class_label(device: str, link: str) -> str:
    """"phone / lte"; "(default)" for a part that has no class."""
    return f"{device or '(default)'} / {link or '(default)'}"


def read_class_totals(folders: list[str]) -> dict[str, ClassTotals]:
    """Per class label (in order of first appearance), the totals over the clients.csv files of
    `folders` (several seeds of an algorithm pool); {} when no file has the class columns or
    every class is empty. Rows are summed in file order, so the sums are those of adding the
    rows one by one."""
    files = []
    for folder in folders:
        p = os.path.join(folder, "clients.csv")
        if not os.path.isfile(p):
            continue
        head, cols = read_columns(p, NUMERIC + CLASS_COLUMNS, CLASS_COLUMNS)
        if all(k in head for k in CLASS_COLUMNS):
            files.append(cols)
    if not any((f[k] != b"").any() for f in files for k in CLASS_COLUMNS):
        return {}               # no class anywhere: nothing to sum (a run without mix)
    which, labels = _classes(np.concatenate([f["device_class"] for f in files]),
                             np.concatenate([f["link_class"] for f in files]))
    out = {label: ClassTotals() for label in labels}
    totals = list(out.values())
    for t, n in zip(totals, np.bincount(which, minlength=len(totals)).tolist()):
        t.rounds = n
    for k in NUMERIC:
        if not any(k in f for f in files):
            continue
        v = np.concatenate([floats(f[k]) if k in f else np.full(len(f["device_class"]), np.nan)
                            for f in files])
        ok = np.isfinite(v)
        if k == "up_bytes" and all("tx_s" in f for f in files):   # the uploads sent: a
            ok &= np.concatenate([floats(f["tx_s"]) for f in files]) > 0   # dropped or
            #            crashed client's coded size is in its row, but nothing went out
        if k == "client":
            _add_clients(totals, which[ok], v[ok])
            continue
        sums = np.bincount(which, weights=np.where(ok, v, 0.0), minlength=len(totals))
        counts = np.bincount(which[ok], minlength=len(totals))
        for t, s, n in zip(totals, sums.tolist(), counts.tolist()):
            t.sums[k], t.counts[k] = s, n
    return out


def _classes(device: np.ndarray, link: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each row's class (its position in the labels) and the class labels in order of first
    appearance; (device, link) pairs with the same label are one class, as in `class_label`."""
    d_names, d_row = np.unique(device, return_inverse=True)
    l_names, l_row = np.unique(link, return_inverse=True)
    pairs, first, pair_row = np.unique(d_row * len(l_names) + l_row, return_index=True,
                                       return_inverse=True)
    position: dict[str, int] = {}
    pair_class = np.empty(len(pairs), np.int64)
    for j in np.argsort(first, kind="stable").tolist():    # pairs as they first appear
        d, k = divmod(int(pairs[j]), len(l_names))
        label = class_label(d_names[d].decode("utf-8"),
                            l_names[k].decode("utf-8"))
        pair_class[j] = position.setdefault(label, len(position))
    return pair_class[pair_row], list(position)


def _add_clients(totals: list[ClassTotals], which: np.ndarray, ids: np.ndarray) -> None:
    """Each finite client cell as int(value) in its class's set; numbers past int64's range
    (no cast to int64 holds them) one by one."""
    small = np.abs(ids) < 2.0 ** 63
    pairs = np.unique(np.stack([which[small], ids[small].astype(np.int64)]), axis=1)
    for j, k in pairs.T.tolist():
        totals[j].clients.add(k)
    for j, v in zip(which[~small].tolist(), ids[~small].tolist()):
        totals[j].clients.add(int(v))
