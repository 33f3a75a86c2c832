"""clients.csv by device and link class (the `device_class`, `link_class` columns: a client's
`profiles.devices` / `profiles.links` names, empty without `clients.mix`): per class, the
client-rounds, steps, compute and upload time, bytes uploaded and drops."""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

NUMERIC = ("client", "steps", "compute_s", "upload_s", "up_bytes", "dropped", "energy_j")


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
    """Per class label, the totals over the clients.csv files of `folders` (several seeds of an
    algorithm pool); {} when no file has the class columns or every class is empty."""
    out: dict[str, ClassTotals] = {}
    any_class = False
    files: list[tuple[dict[str, int], int, int, list[list[str]]]] = []
    for folder in folders:
        p = os.path.join(folder, "clients.csv")
        if not os.path.isfile(p):
            continue
        with open(p, newline="") as fh:
            reader = csv.reader(fh)
            head = next(reader, [])
            if "device_class" not in head or "link_class" not in head:
                continue
            idx = {k: head.index(k) for k in NUMERIC if k in head}
            di, li = head.index("device_class"), head.index("link_class")
            rows = [r for r in reader if len(r) > max(di, li)]
        any_class = any_class or any(r[di] or r[li] for r in rows)
        files.append((idx, di, li, rows))
    if not any_class:            # no class anywhere: nothing to sum (a run without mix)
        return {}
    for idx, di, li, rows in files:
        _add_rows(out, idx, di, li, rows)
    return out


def _add_rows(out: dict[str, ClassTotals], idx: dict[str, int], di: int, li: int,
              rows: list[list[str]]) -> None:
    for row in rows:
        t = out.setdefault(class_label(row[di], row[li]), ClassTotals())
        t.rounds += 1
        for k, i in idx.items():
            try:
                v = float(row[i])
            except (ValueError, IndexError):
                continue
            if k == "client":
                t.clients.add(int(v))
            elif math.isfinite(v):
                t.sums[k] += v
                t.counts[k] += 1
