"""Reading what a run wrote, and the summary numbers of the tables."""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass


@dataclass
class Series:
    label: str
    rows: list[dict[str, float]]

    def col(self, key: str) -> list[float]:
        return [r.get(key, math.nan) for r in self.rows]

    @property
    def evaluated(self) -> list[dict[str, float]]:
        return [r for r in self.rows if math.isfinite(r.get("test_acc", math.nan))]

    @property
    def final_acc(self) -> float:
        ev = self.evaluated
        return ev[-1]["test_acc"] if ev else math.nan

    @property
    def final_personal(self) -> float:
        ev = [r for r in self.rows if math.isfinite(r.get("personal_test_acc", math.nan))]
        return ev[-1]["personal_test_acc"] if ev else math.nan

    @property
    def diverged_at(self) -> int | None:
        for r in self.rows:
            if r.get("diverged", 0) == 1:
                return int(r["round"])
        return None

    def first_reaching(self, target: float, key: str = "test_acc") -> dict[str, float] | None:
        for r in self.rows:
            if math.isfinite(r.get(key, math.nan)) and r[key] >= target:
                return r
        return None


def read_metrics(path: str, label: str) -> Series:
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            rows.append({k: (float(v) if v not in ("", None) else math.nan) for k, v in r.items()})
    return Series(label, rows)


def read_run(out: str) -> list[Series]:
    """Every algorithm folder of a run, in the order the run wrote them."""
    found = []
    for name in os.listdir(out):
        p = os.path.join(out, name, "metrics.csv")
        if os.path.isfile(p):
            found.append((os.path.getctime(p), name, p))
    return [read_metrics(p, name) for _, name, p in sorted(found)]
