"""Reading what a run wrote, the summary numbers of the tables, seed groups (mean +- std) and the
tidy long-format metrics_all.csv."""
from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..io_util import atomic_text, fmt
from .summary import comparable, read_summary


@dataclass
class Series:
    """The metrics.csv rows of one algorithm of one run (round 0 = the initial model)."""

    label: str
    rows: list[dict[str, float]]
    seed: int | None = None
    run: str = ""
    folder: str = ""            # OUT/<label>, where clients.csv and trace.csv are

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

    def last(self, key: str) -> float:
        return self.rows[-1].get(key, math.nan) if self.rows else math.nan


def _num(v: str | None) -> float | None:
    """A CSV cell as a float (nan when empty), None when it is not a number."""
    if v in ("", None):
        return math.nan
    try:
        return float(v)
    except ValueError:
        return None


def read_metrics(path: str, label: str, seed: int | None = None, run: str = "") -> Series:
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            row = {k: _num(v) for k, v in r.items() if k is not None}
            rows.append({k: v for k, v in row.items() if v is not None})
    return Series(label, rows, seed, run, os.path.dirname(path))


def add_totals(series: list[Series]) -> None:
    """bytes_total = bytes_up + bytes_down on every row (a derived column for the figures)."""
    for s in series:
        for r in s.rows:
            if "bytes_up" in r and "bytes_down" in r:
                r.setdefault("bytes_total", r["bytes_up"] + r["bytes_down"])


def _algorithm_order(out: str, summary: dict | None) -> list[str]:
    """Algorithm folders in the scenario's order when known, else in the order written."""
    found = []
    for name in os.listdir(out):
        p = os.path.join(out, name, "metrics.csv")
        if os.path.isfile(p):
            found.append((os.path.getctime(p), name))
    names = [n for _, n in sorted(found)]
    if summary:
        listed = [a.get("label") or a.get("name") for a in
                  (summary.get("scenario", {}).get("algorithms") or []) if isinstance(a, dict)]
        names = [n for n in listed if n in names] + [n for n in names if n not in listed]
    return names


def read_run(out: str) -> list[Series]:
    """Every algorithm folder of a run (scenario order when summary.json is there)."""
    return load_run(out).series


@dataclass
class Run:
    """One output folder: its algorithms' series and what it recorded about its set-up."""

    name: str
    path: str
    series: list[Series]
    summary: dict | None = None

    @property
    def seed(self) -> int | None:
        s = (self.summary or {}).get("scenario", {}).get("seed")
        return int(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else None

    @property
    def scenario_key(self) -> str | None:
        return comparable(self.summary)


def load_run(out: str, name: str | None = None) -> Run:
    summary = read_summary(out)
    run = Run(name or os.path.basename(os.path.normpath(out)), out, [], summary)
    for label in _algorithm_order(out, summary):
        run.series.append(read_metrics(os.path.join(out, label, "metrics.csv"), label,
                                       run.seed, run.name))
    return run


CLIENT_FIELDS = ("round", "edge_round", "client", "steps", "budget", "straggler", "dropped",
                 "gamma", "compute_s")


def read_clients(folder: str) -> dict[str, np.ndarray]:
    """The numeric columns of OUT/<label>/clients.csv the figures need, as float arrays (one
    entry per client per aggregation round), streamed; {} when the file is absent."""
    p = os.path.join(folder, "clients.csv")
    if not os.path.isfile(p):
        return {}
    cols: dict[str, list[float]] = {}
    with open(p, newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, [])
        idx = {k: head.index(k) for k in CLIENT_FIELDS if k in head}
        cols = {k: [] for k in idx}
        for row in reader:
            for k, i in idx.items():
                v = _num(row[i]) if i < len(row) else math.nan
                cols[k].append(math.nan if v is None else v)
    return {k: np.asarray(v, float) for k, v in cols.items()}


def concat_clients(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p]
    keys = set.intersection(*(set(p) for p in parts)) if parts else set()
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


# ------------------------------------------------------------------------------ seed groups
@dataclass
class Group:
    """One curve of a report: a single series, or the same algorithm over several seeds."""

    label: str
    members: list[Series]
    key: str = ""               # algorithm label, for colours
    _mean: Series | None = field(default=None, repr=False)
    _std: dict[int, dict[str, float]] | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.members)

    @property
    def seeds(self) -> list[int | None]:
        return [m.seed for m in self.members]

    def mean(self) -> Series:
        """Per-round mean over members (rounds aligned by number; missing values skipped)."""
        if self._mean is None:
            self._mean, self._std = _round_stats(self.label, self.members)
        return self._mean

    def std(self) -> dict[int, dict[str, float]]:
        self.mean()
        assert self._std is not None
        return self._std

    @property
    def diverged(self) -> list[tuple[Series, int]]:
        return [(m, m.diverged_at) for m in self.members if m.diverged_at is not None]


def mean_std(values: list[float]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (ddof=1; 0 for one value) of the finite values."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if len(v) == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v)


def _round_stats(label: str, members: list[Series]) -> tuple[Series, dict[int, dict[str, float]]]:
    if len(members) == 1:
        m = members[0]
        return m, {int(r["round"]): {} for r in m.rows}
    by_round: dict[int, list[dict[str, float]]] = {}
    for m in members:
        for r in m.rows:
            by_round.setdefault(int(r["round"]), []).append(r)
    rows, std = [], {}
    for t in sorted(by_round):
        rs = by_round[t]
        keys = sorted({k for r in rs for k in r})
        row, sd = {}, {}
        for k in keys:
            mu, s, n = mean_std([r.get(k, math.nan) for r in rs])
            row[k], sd[k] = mu, s
        row["round"] = float(t)
        row["diverged"] = float(any(r.get("diverged", 0) == 1 for r in rs))
        rows.append(row)
        std[t] = sd
    return Series(label, rows), std


def groups_of(runs: list[Run], prefix: bool) -> tuple[list[Group], list[str]]:
    """Curves of a report over several runs. Runs whose scenarios differ only by the seed are
    pooled: one group per algorithm label, mean +- std over seeds. Otherwise every (run,
    algorithm) is its own curve, labelled run/algorithm when `prefix`. Returns (groups, notes)."""
    notes: list[str] = []
    pools: dict[str, list[Run]] = {}
    order: list[str] = []
    for i, run in enumerate(runs):
        key = run.scenario_key or f"#unknown-{i}"
        if key not in pools:
            order.append(key)
        pools.setdefault(key, []).append(run)
    groups: list[Group] = []
    for key in order:
        members = pools[key]
        if len(members) > 1:
            seeds = [r.seed for r in members]
            notes.append(f"Runs {', '.join(r.name for r in members)} differ only by the seed "
                         f"({', '.join(str(s) for s in seeds)}): each algorithm is shown as the "
                         f"mean over {len(members)} seeds, shaded +- 1 sample std (ddof=1).")
            labels: list[str] = []
            for r in members:
                labels += [s.label for s in r.series if s.label not in labels]
            for lab in labels:
                ms = [s for r in members for s in r.series if s.label == lab]
                name = f"{members[0].name}/{lab}" if prefix and len(order) > 1 else lab
                groups.append(Group(name, ms, lab))
        else:
            r = members[0]
            if key.startswith("#unknown") and len(runs) > 1:
                notes.append(f"Run {r.name} has no summary.json: not pooled with other seeds.")
            for s in r.series:
                groups.append(Group(f"{r.name}/{s.label}" if prefix else s.label, [s], s.label))
    return groups, notes


# ------------------------------------------------------------------------------ tidy export
TIDY_HEADER = ["algorithm", "seed", "round", "metric", "value"]


def tidy_rows(series: list[Series], with_run: bool = False) -> list[list[str]]:
    """(run,) algorithm, seed, round, metric, value: one row per finite metric value."""
    out = []
    for s in series:
        seed = "" if s.seed is None else str(s.seed)
        for r in s.rows:
            t = str(int(r["round"]))
            for k, v in r.items():
                if k in ("round", "bytes_total") or not math.isfinite(v):
                    continue
                row = [s.label, seed, t, k, fmt(v)]
                out.append([s.run, *row] if with_run else row)
    return out


def write_metrics_all(path: str, series: list[Series], with_run: bool = False) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((["run"] if with_run else []) + TIDY_HEADER)
    w.writerows(tidy_rows(series, with_run))
    atomic_text(path, buf.getvalue())
    return path
