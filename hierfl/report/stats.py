"""The statistics of a report (and of a sweep's summary): mean and sample std, one curve per
algorithm pooled over seeds, the default accuracy target.

The standard deviation is the sample std (ddof=1). For a single value it is undefined: NaN,
written as an empty cell and drawn as no band (never as a spread of 0)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..config.errors import Problem, ScenarioError
from ..outputs import Run, Series


def mean_std(values: list[float]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (ddof=1; NaN for fewer than two values) of the finite
    values, and how many there were."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if len(v) == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan, len(v)


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
        """Per round and metric, the sample std over members (NaN where fewer than two)."""
        self.mean()
        assert self._std is not None
        return self._std

    @property
    def diverged(self) -> list[tuple[Series, int]]:
        return [(m, m.diverged_at) for m in self.members if m.diverged_at is not None]


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
        if len(members) > 1:                # one seed counts once: a second run of it is
            firsts: dict = {}               # the same sample, not another one
            for r in members:
                firsts.setdefault(r.seed, []).append(r)
            for seed, same in firsts.items():     # the longest copy (one may be cut short)
                same.sort(key=lambda r: -max((len(s.rows) for s in r.series), default=0))
                if len(same) > 1:
                    notes.append(f"Runs {', '.join(r.name for r in same)} are the same "
                                 f"scenario with the same seed ({seed}): only {same[0].name} "
                                 f"is counted.")
            members = [same[0] for same in firsts.values()]
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


def add_totals(series: list[Series]) -> None:
    """bytes_total = bytes_up + bytes_down on every row (a derived column for the figures)."""
    for s in series:
        for r in s.rows:
            if "bytes_up" in r and "bytes_down" in r:
                r.setdefault("bytes_total", r["bytes_up"] + r["bytes_down"])


def target_of(series: list[Series], target: float | None) -> float:
    """The target of the tables: the one given, else 0.9 x the best final accuracy, or for
    regression (a test MSE, lower is better) 1.1 x the best (lowest) final MSE (of the series
    that did not diverge)."""
    if target is not None:
        return target
    finals = [s.final_acc for s in series
              if math.isfinite(s.final_acc) and s.diverged_at is None]
    if not finals:
        return math.nan
    if series and all(s.lower_is_better for s in series):
        return 1.1 * min(finals)
    return 0.9 * max(finals)


def target_text(series: list[Series], given: bool) -> str:
    """How the target was chosen, in words, for the report's introduction."""
    reg = bool(series) and all(s.lower_is_better for s in series)
    what = "Target test MSE (lower is better)" if reg else "Target accuracy"
    how = "given" if given else ("1.1 × best final test MSE" if reg
                                 else "0.9 × best final accuracy")
    return f"{what} for the table: {{}} ({how})."


def check_options(series: list[Series], target: float | None, timeline_round: int) -> None:
    """A report's --target and --timeline-round, checked against the runs: a finite target, an
    accuracy in [0, 1] (85 is not 0.85), an MSE >= 0; a timeline round the runs have."""
    problems = []
    if target is not None:
        reg = bool(series) and all(s.lower_is_better for s in series)
        if not math.isfinite(target):
            problems.append(("--target", target, "must be a finite number"))
        elif reg and target < 0:
            problems.append(("--target", target, "a test MSE target must be >= 0"))
        elif not reg and not 0.0 <= target <= 1.0:
            problems.append(("--target", target, "an accuracy target is a fraction in [0, 1]"
                             + (f" (did you mean {target / 100:g}?)" if 1 < target <= 100
                                else "")))
    last = max((int(r["round"]) for s in series for r in s.rows), default=0)
    if not 1 <= timeline_round <= max(last, 1):
        problems.append(("--timeline-round", timeline_round,
                         f"must be a cloud round of the run, 1..{max(last, 1)}"))
    if problems:
        raise ScenarioError([Problem("", k, v, m) for k, v, m in problems])
