"""Reading what a run wrote: metrics.csv as a Series per algorithm, a run folder as a Run (its
series in the scenario's order and its summary.json), and the columns of clients.csv the figures
need."""
from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass

import numpy as np

from ..config.errors import ScenarioError
from .cells import decimals, read_columns
from .columns import SCORES
from .manifest import manifest_labels
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
    def task(self) -> str:
        """regression when the run wrote a test MSE (the linear model), else classification."""
        return "regression" if any(math.isfinite(r.get("test_mse", math.nan))
                                   for r in self.rows) else "classification"

    @property
    def score_key(self) -> str:
        """The column that scores the global model: test_acc, or test_mse for regression."""
        return SCORES[self.task][0]

    @property
    def personal_key(self) -> str:
        return SCORES[self.task][1]

    @property
    def lower_is_better(self) -> bool:
        return self.task == "regression"

    @property
    def evaluated(self) -> list[dict[str, float]]:
        k = self.score_key
        return [r for r in self.rows if math.isfinite(r.get(k, math.nan))]

    @property
    def final_acc(self) -> float:
        """The last evaluated score of the global model (accuracy, or MSE for regression)."""
        ev = self.evaluated
        return ev[-1][self.score_key] if ev else math.nan

    @property
    def final_personal(self) -> float:
        k = self.personal_key
        ev = [r for r in self.rows if math.isfinite(r.get(k, math.nan))]
        return ev[-1][k] if ev else math.nan

    @property
    def diverged_at(self) -> int | None:
        for r in self.rows:
            if r.get("diverged", 0) == 1:
                return int(r["round"])
        return None

    def first_reaching(self, target: float, key: str | None = None) -> dict[str, float] | None:
        """The first evaluated row whose score (default: score_key) reaches `target`: >= for
        accuracy, <= for an MSE (lower is better)."""
        key = key or self.score_key
        lower = key.endswith("_mse")
        for r in self.rows:
            v = r.get(key, math.nan)
            if math.isfinite(v) and (v <= target if lower else v >= target):
                return r
        return None

    def evaluated_before(self, row: dict[str, float], key: str | None = None) -> \
            dict[str, float] | None:
        """The evaluated row before `row` (None for the first): a target was reached somewhere
        after it and at or before `row`."""
        key = key or self.score_key
        prev = None
        for r in self.rows:
            if r is row:
                return prev
            if math.isfinite(r.get(key, math.nan)):
                prev = r
        return prev

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
    """A metrics.csv's rows. A last line without its newline is a row torn by a killed run (a
    resume truncates it): not a round. Every column is a number (an empty cell: nan); a cell
    that is not one (a damaged or hand-edited file) is a ScenarioError naming the file, the
    line and the column."""
    rows = []
    with open(path, newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    for cells in reader:
        if not cells:                   # (a blank line, as csv.DictReader skips it)
            continue
        row = {}
        for i, (k, v) in enumerate(zip(header, cells)):
            x = _num(v)
            if x is None:
                raise ScenarioError.one(path, k, v, f"column {i + 1} of metrics.csv is a number "
                                        "(or empty): the file is damaged or was edited",
                                        reader.line_num)
            row[k] = x
        for k in header[len(cells):]:       # a short row's missing cells: nan (as DictReader)
            row[k] = math.nan
        rows.append(row)
    return Series(label, rows, seed, run, os.path.dirname(path))


def _algorithm_order(out: str, summary: dict | None) -> list[str]:
    """The labels of OUT/run.json, in its order (only those: a stale folder of another run is
    not this run's); for folders without a manifest, the algorithm folders in the scenario's
    order when known, else in the order written."""
    listed = manifest_labels(out)
    if listed is not None:
        return [n for n in listed if os.path.isfile(os.path.join(out, n, "metrics.csv"))]
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
                 "gamma", "compute_s", "attacker")


def read_clients(folder: str) -> dict[str, np.ndarray]:
    """The numeric columns of OUT/<label>/clients.csv the figures need, as float arrays (one
    entry per client per aggregation round); {} when the file is absent."""
    p = os.path.join(folder, "clients.csv")
    if not os.path.isfile(p):
        return {}
    return {k: floats(v) for k, v in read_columns(p, CLIENT_FIELDS)[1].items()}


def floats(cells: np.ndarray) -> np.ndarray:
    """CSV cells (a bytes array, `read_columns`) as floats: "" is nan, and so is a cell that
    is not a number (as `_num`). Columns of plain decimal integers (rounds, clients, steps,
    flags: most of clients.csv) are read digit by digit on the whole column at once (numpy's
    bytes-to-float parse is ~0.3 us a cell, 10^5-10^6 rows at city scale); an empty column is
    all nan."""
    if cells.dtype.kind == "S" and cells.size:
        whole = _integers(cells)
        if whole is not None:
            return whole
        if cells.dtype.itemsize == 1 and not cells.view(np.uint8).any():
            return np.full(cells.shape, math.nan)      # every cell empty
    col = np.where(cells == b"", b"nan", cells)    # numpy parses a column at once
    try:
        return col.astype(float)
    except ValueError:
        return np.array([math.nan if (v := _num(c.decode("utf-8"))) is None else v
                         for c in cells.tolist()], float)


def _integers(cells: np.ndarray) -> np.ndarray | None:
    """Cells that are each 1-18 ASCII digits (no sign, point or exponent), as floats: the
    integer they write, exactly (as float() reads it); None for any other column."""
    width = cells.dtype.itemsize
    if width > 18 or cells.ndim != 1:
        return None
    ok, value = decimals(np.ascontiguousarray(cells).view(np.uint8).reshape(len(cells), width))
    return value.astype(np.float64) if ok.all() else None


def concat_clients(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p]
    keys = set.intersection(*(set(p) for p in parts)) if parts else set()
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}
