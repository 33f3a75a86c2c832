"""The summary of a sweep, from the finished points' files: points.csv (one row per point and
algorithm), sweep.csv and sweep.md (per grid point without the seed and algorithm: mean and
sample std over seeds) and sweep_accuracy.png. The numbers, the mean/std and the "mean ± std
(k/n)" cells are the report's (report/tables.py, report/stats.py)."""
from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

import numpy as np

from ..outputs import Series, atomic_text, fmt, read_run
from ..report.markdown import md_table
from ..report.stats import Group, mean_std, target_of
from ..report.tables import num, numbers, pm, size
from .spec import DONE, Point, Sweep

POINT_METRICS = ("final_acc", "rounds", "sim_time_s", "bytes_total", "time_to_target_s",
                 "bytes_to_target", "rounds_to_target")
GRID_METRICS = (("final_acc", num), ("time_to_target_s", lambda x: num(x, ".1f")),
                ("bytes_to_target", size), ("rounds_to_target", lambda x: num(x, ".1f")))


def is_done(out: str, pt: Point) -> bool:
    return os.path.isfile(os.path.join(out, pt.name, DONE))


def point_rows(sw: Sweep) -> tuple[list[dict], dict[tuple[str, str], Series], float]:
    """Per (finished point, algorithm): final accuracy and time/bytes/rounds to target."""
    series = {}
    for pt in sw.points:
        if is_done(sw.output, pt):
            for s in read_run(os.path.join(sw.output, pt.name)):
                series[pt.name, s.label] = s
    target = target_of(list(series.values()), sw.target)
    rows = []
    for pt in sw.points:
        labels = [lb for (n, lb) in series if n == pt.name]
        labels = [lb for lb in sw.labels if lb in labels] + sorted(
            lb for lb in labels if lb not in sw.labels)
        for lb in labels:
            s = series[pt.name, lb]
            v = numbers(s, target)
            rows.append({"point": pt.name, **{k: x for k, x in pt.values}, "algorithm": lb,
                         **{k: v[k] for k in POINT_METRICS},
                         "diverged_at": s.diverged_at if s.diverged_at is not None else ""})
    return rows, series, target


def _cell(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (list, dict)) else fmt(v)


def _write_points(sw: Sweep, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = ["point", *sw.keys, "algorithm", *POINT_METRICS, "diverged_at"]
    w.writerow(cols)
    w.writerows([_cell(r[c]) for c in cols] for r in rows)
    atomic_text(os.path.join(sw.output, "points.csv"), buf.getvalue())


def _group_key(values: tuple[tuple[str, Any], ...]) -> tuple:
    return tuple((k, json.dumps(v, sort_keys=True)) for k, v in values if k != "seed")


def grid_groups(sw: Sweep, rows: list[dict]) -> dict[tuple, list[dict]]:
    """The rows by (grid values without the seed, algorithm), in order of first appearance."""
    groups: dict[tuple, list[dict]] = {}
    by_point = {pt.name: pt for pt in sw.points}
    for r in rows:
        groups.setdefault((_group_key(by_point[r["point"]].values), r["algorithm"]), []).append(r)
    return groups


def _grid_table(sw: Sweep, groups: dict[tuple, list[dict]], target: float
                ) -> tuple[str, list[str], list[list[str]]]:
    """sweep.csv's text, and the head and rows of sweep.md's table."""
    other = [k for k in sw.keys if k != "seed"]
    values = {pt.name: dict(pt.values) for pt in sw.points}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*other, "algorithm", "seeds", "reached"] +
               [f"{m}_{s}" for m, _ in GRID_METRICS for s in ("mean", "std")] +
               ["target_accuracy"])
    head = other + ["algorithm", "seeds" if "seed" in sw.keys else "runs", "final acc",
                    "time to target (s)", "bytes to target", "rounds to target", "reached"]
    cells = []
    for (_, label), rs in groups.items():
        first = values[rs[0]["point"]]
        reached = sum(math.isfinite(r["time_to_target_s"]) for r in rs)
        stats = [mean_std([r[m] for r in rs])[:2] for m, _ in GRID_METRICS]
        w.writerow([_cell(first[k]) for k in other] + [label, len(rs), reached] +
                   [fmt(x) for st in stats for x in st] + [fmt(target)])
        cells.append([str(first[k]) for k in other] + [label, str(len(rs))] +
                     [pm([r[m] for r in rs], show) for m, show in GRID_METRICS] +
                     [f"{reached}/{len(rs)}"])
    return buf.getvalue(), head, cells


def summarize(sw: Sweep) -> str:
    """sweep.csv (the grid, mean and std over seeds), points.csv (one row per point and
    algorithm), sweep.md (the table and the figure) and sweep_accuracy.png."""
    rows, series, target = point_rows(sw)
    _write_points(sw, rows)
    groups = grid_groups(sw, rows)
    text, head, cells = _grid_table(sw, groups, target)
    atomic_text(os.path.join(sw.output, "sweep.csv"), text)
    fig = plot_accuracy(sw, series, groups)
    missing = [pt.name for pt in sw.points if not is_done(sw.output, pt)]
    parts = [f"# hierfl sweep: {os.path.basename(sw.file)}", "",
             f"{len(sw.points)} points over {', '.join(sw.keys)}; "
             f"{len(sw.points) - len(missing)} finished. Target accuracy: {num(target)}"
             f" ({'given' if sw.target is not None else '0.9 x best final accuracy'}).", ""]
    if "seed" in sw.keys:
        parts += ["Cells are mean ± sample standard deviation (ddof=1) over seeds; (k/n): only "
                  "k of n seeds have a value (time, bytes and rounds to target average the seeds "
                  "that reached the target; column reached).", ""]
    parts += ["## Grid", "", md_table(head, cells), "", "## Test accuracy vs round", "",
              f"![test accuracy vs round]({os.path.basename(fig)})", "",
              "One point per folder: `" + "`, `".join(pt.name for pt in sw.points[:5]) + "`"
              + (" ..." if len(sw.points) > 5 else "") + "; per-point numbers in points.csv."]
    if missing:
        parts += ["", "## Not finished", "", *[f"- {n}" for n in missing]]
    path = os.path.join(sw.output, "sweep.md")
    atomic_text(path, "\n".join(parts) + "\n")
    return path


def plot_accuracy(sw: Sweep, series: dict[tuple[str, str], Series],
                  groups: dict[tuple, list[dict]]) -> str:
    """Test accuracy vs round: mean over seeds with a +- std band, one line per grid point and
    algorithm."""
    from ..report.plots import band, colour, plt

    fig, ax = plt.subplots(figsize=(7.2, 4.6), dpi=120)
    styles = ["-", "--", ":", "-."]
    for i, ((key, label), rs) in enumerate(groups.items()):
        curve = Group(label, [series[r["point"], r["algorithm"]] for r in rs])
        sd = curve.std()
        rows = [r for r in curve.mean().rows if math.isfinite(r.get("test_acc", math.nan))]
        if not rows:
            continue
        xs = [r["round"] for r in rows]
        mean = np.array([r["test_acc"] for r in rows])
        std = np.array([band(sd[int(r["round"])].get("test_acc", 0.0)) for r in rows])
        shown = ", ".join(f"{k.split('.')[-1]}={json.loads(v)}" for k, v in key)
        c = colour(i)
        ax.plot(xs, mean, styles[(i // 10) % 4], color=c, linewidth=1.5,
                label=label + (f" ({shown})" if shown else ""))
        if curve.n > 1:
            ax.fill_between(xs, mean - std, mean + std, color=c, alpha=0.18, linewidth=0)
    ax.set_xlabel("cloud round")
    ax.set_ylabel("test accuracy (mean ± std over seeds)")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7, ncol=1 if len(ax.lines) <= 12 else 2)
    fig.tight_layout()
    path = os.path.join(sw.output, "sweep_accuracy.png")
    fig.savefig(path)
    plt.close(fig)
    return path
