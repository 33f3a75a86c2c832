"""The summary of a sweep, from the finished points' files: points.csv (one row per point and
algorithm), sweep.csv (per grid point without the seed, and algorithm: mean and sample std over
seeds), metrics_all.csv (every metric of every point, tidy, `run` = the point), the figures
(figures.py) and the page (page.py: sweep.md and the self-contained sweep.html). The numbers,
the mean/std and the "mean ± std (k/n)" cells are the run report's (report/tables.py,
report/stats.py); regression sweeps score the test MSE (lower is better) as the report does."""
from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

from ..outputs import Series, atomic_text, fmt, read_run
from ..report.stats import Group, add_totals, mean_std, target_of
from ..report.tables import num, numbers, pm, size, write_metrics_all
from .spec import DONE, Point, Sweep

POINT_METRICS = ("final_acc", "rounds", "sim_time_s", "bytes_total", "time_to_target_s",
                 "bytes_to_target", "rounds_to_target")
ENERGY_METRICS = ("energy_total_j", "energy_to_target_j")     # last columns; empty: no powers
GRID_METRICS = (("final_acc", num), ("time_to_target_s", lambda x: num(x, ".1f")),
                ("bytes_to_target", size), ("rounds_to_target", lambda x: num(x, ".1f")))


def is_done(out: str, pt: Point) -> bool:
    return os.path.isfile(os.path.join(out, pt.name, DONE))


def reused(out: str, pt: Point) -> dict[str, str]:
    """{label: owner point} of the algorithms a finished point copied (its DONE marker)."""
    try:
        with open(os.path.join(out, pt.name, DONE), encoding="utf-8") as fh:
            r = json.load(fh).get("reused")
    except (OSError, ValueError, AttributeError):
        return {}
    return r if isinstance(r, dict) else {}


def read_points(sw: Sweep) -> dict[tuple[str, str], Series]:
    """Every finished point's series by (point, label); `run` is the point's name."""
    series = {}
    for pt in sw.points:
        if is_done(sw.output, pt):
            for s in read_run(os.path.join(sw.output, pt.name)):
                s.run = pt.name
                series[pt.name, s.label] = s
    add_totals(list(series.values()))
    return series


def point_rows(sw: Sweep, series: dict[tuple[str, str], Series] | None = None
               ) -> tuple[list[dict], dict[tuple[str, str], Series], float]:
    """Per (finished point, algorithm): the final score (accuracy, or the test MSE of a
    regression) and time/bytes/rounds to target, and ran_at: the point whose run it is
    (itself, or the owner it was copied from)."""
    series = read_points(sw) if series is None else series
    target = target_of(list(series.values()), sw.target)
    rows = []
    for pt in sw.points:
        labels = [lb for (n, lb) in series if n == pt.name]
        labels = [lb for lb in sw.labels if lb in labels] + sorted(
            lb for lb in labels if lb not in sw.labels)
        copied = reused(sw.output, pt)
        for lb in labels:
            s = series[pt.name, lb]
            v = numbers(s, target)
            rows.append({"point": pt.name, **{k: x for k, x in pt.values}, "algorithm": lb,
                         **{k: v[k] for k in POINT_METRICS},
                         "diverged_at": s.diverged_at if s.diverged_at is not None else "",
                         "ran_at": copied.get(lb, pt.name),
                         **{k: v[k] for k in ENERGY_METRICS}})
    return rows, series, target


def _cell(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (list, dict)) else fmt(v)


def _write_points(sw: Sweep, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = ["point", *sw.keys, "algorithm", *POINT_METRICS, "diverged_at", "ran_at",
            *ENERGY_METRICS]
    w.writerow(cols)
    w.writerows([_cell(r[c]) for c in cols] for r in rows)
    atomic_text(os.path.join(sw.output, "points.csv"), buf.getvalue())


def _group_key(values: tuple[tuple[str, Any], ...]) -> tuple:
    return tuple((k, json.dumps(v, sort_keys=True)) for k, v in values if k != "seed")


def short_keys(keys: tuple[str, ...]) -> dict[str, str]:
    """Grid keys as shown: the last name of the path (the whole key where two share it)."""
    last = {k: k.replace("]", "").split(".")[-1].split("[")[0] for k in keys}
    return {k: s if list(last.values()).count(s) == 1 else k for k, s in last.items()}


def grid_groups(sw: Sweep, rows: list[dict]) -> dict[tuple, list[dict]]:
    """The rows by (grid values without the seed, algorithm), in order of first appearance."""
    groups: dict[tuple, list[dict]] = {}
    by_point = {pt.name: pt for pt in sw.points}
    for r in rows:
        groups.setdefault((_group_key(by_point[r["point"]].values), r["algorithm"]), []).append(r)
    return groups


def combo_of(sw: Sweep, key: tuple) -> tuple[tuple[str, str], ...]:
    """A group key as shown: ((short key, value as written), ...) without the seed."""
    short = short_keys(sw.keys)
    return tuple((short[k], str(json.loads(v))) for k, v in key)


def curves_of(sw: Sweep, groups: dict[tuple, list[dict]],
              series: dict[tuple[str, str], Series]) -> dict[tuple[tuple, str], Group]:
    """The report Group (mean and std over seeds) of every (grid combo, algorithm)."""
    return {(combo_of(sw, key), label): Group(label, [series[r["point"], label] for r in rs],
                                              label)
            for (key, label), rs in groups.items()}


def is_regression(series: dict[tuple[str, str], Series]) -> bool:
    return bool(series) and all(s.lower_is_better for s in series.values())


def grid_table(sw: Sweep, groups: dict[tuple, list[dict]], target: float, regression: bool
               ) -> tuple[str, list[str], list[list[str]]]:
    """sweep.csv's text, and the head and rows of the page's grid table."""
    other = [k for k in sw.keys if k != "seed"]
    values = {pt.name: dict(pt.values) for pt in sw.points}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*other, "algorithm", "seeds", "reached"] +
               [f"{m}_{s}" for m, _ in GRID_METRICS for s in ("mean", "std")] +
               ["target_accuracy"] + [f"{m}_{s}" for m in ENERGY_METRICS for s in ("mean", "std")])
    head = other + ["algorithm", "seeds" if "seed" in sw.keys else "runs",
                    "final test MSE" if regression else "final acc",
                    "time to target (s)", "bytes to target", "rounds to target", "reached"]
    cells = []
    for (_, label), rs in groups.items():
        first = values[rs[0]["point"]]
        reached = sum(math.isfinite(r["time_to_target_s"]) for r in rs)
        stats = [mean_std([r[m] for r in rs])[:2] for m, _ in GRID_METRICS]
        energy = [mean_std([r[m] for r in rs])[:2] for m in ENERGY_METRICS]
        w.writerow([_cell(first[k]) for k in other] + [label, len(rs), reached] +
                   [fmt(x) for st in stats for x in st] + [fmt(target)] +
                   [fmt(x) for st in energy for x in st])
        cells.append([str(first[k]) for k in other] + [label, str(len(rs))] +
                     [pm([r[m] for r in rs], show) for m, show in GRID_METRICS] +
                     [f"{reached}/{len(rs)}"])
    return buf.getvalue(), head, cells


def target_stats(sw: Sweep, groups: dict[tuple, list[dict]]
                 ) -> dict[str, dict[tuple[tuple, str], tuple[float, float, int, int]]]:
    """Per metric (time, bytes to target) and (grid combo, algorithm): mean, sample std, how
    many seeds reached the target, how many seeds."""
    out: dict[str, dict] = {"time_to_target_s": {}, "bytes_to_target": {}}
    for (key, label), rs in groups.items():
        for m, d in out.items():
            mu, sd, k = mean_std([r[m] for r in rs])
            d[combo_of(sw, key), label] = (mu, sd, k, len(rs))
    return out


def summarize(sw: Sweep) -> str:
    """points.csv, sweep.csv, metrics_all.csv, the figures, sweep.md and sweep.html. Returns
    the path of sweep.md."""
    from .page import write_page        # cycle: page.py reads this module's tables

    rows, series, target = point_rows(sw)
    _write_points(sw, rows)
    groups = grid_groups(sw, rows)
    text, head, cells = grid_table(sw, groups, target, is_regression(series))
    atomic_text(os.path.join(sw.output, "sweep.csv"), text)
    write_metrics_all(os.path.join(sw.output, "metrics_all.csv"), list(series.values()),
                      with_run=True)
    return write_page(sw, rows, series, groups, target, head, cells)
