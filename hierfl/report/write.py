"""Writing a report: report.md, report.html, the figures, table.csv and metrics_all.csv, from the
files of one run (`write_report`) or of several runs on the same axes (`compare_runs`)."""
from __future__ import annotations

import os

from ..outputs import Series, atomic_text, load_run
from .build import build
from .html import render_html
from .markdown import render_md
from .model import Report
from .tables import table_csv, write_metrics_all


def _write(rep: Report, runs_series: list[Series], with_run: bool) -> str:
    os.makedirs(rep.out, exist_ok=True)
    atomic_text(os.path.join(rep.out, "table.csv"), table_csv(rep.groups, rep.target))
    write_metrics_all(os.path.join(rep.out, "metrics_all.csv"), runs_series, with_run)
    md = os.path.join(rep.out, "report.md")
    atomic_text(md, render_md(rep))
    atomic_text(os.path.join(rep.out, "report.html"), render_html(rep))
    return md


def write_report(out: str, title: str = "", target: float | None = None,
                 series: list[Series] | None = None, timeline_round: int = 1,
                 folder_name: str | None = None) -> str:
    """OUT/report.md, OUT/report.html, figures, table.csv and metrics_all.csv from OUT's files.
    Returns the path of report.md. The title is the scenario's name, with OUT's folder name
    (`folder_name`: the name it will have, for a sweep point written in a staging folder)
    where the two differ (`title`: where the run recorded no name), whoever writes it: the
    run's report and `hierfl report OUT` are the same bytes (`target`: default, the
    scenario's report.target_accuracy, as the run's report)."""
    run = load_run(out)
    scenario = (run.summary or {}).get("scenario") or {}
    name = scenario.get("name")
    if target is None:           # the scenario's own (report.target_accuracy), as its run used
        given = (scenario.get("report") or {}).get("target_accuracy")
        target = float(given) if isinstance(given, (int, float)) and \
            not isinstance(given, bool) else None
    folder = folder_name or os.path.basename(os.path.normpath(out))
    if name:
        title = name if folder == name else f"{name} ({folder})"
    if series is not None:
        run.series = series
    if not run.series:
        raise FileNotFoundError(f"no <algorithm>/metrics.csv under {out}")
    rep = build(out, [run], title, target, prefix=False, timeline_round=timeline_round)
    return _write(rep, run.series, with_run=False)


def run_names(paths: list[str]) -> list[str]:
    """Folder names, made unique with parent folders where two runs share a name."""
    names = [os.path.basename(os.path.normpath(p)) for p in paths]
    if len(set(names)) == len(names):
        return names
    return [os.path.normpath(p).replace(os.sep, "/").strip("/") for p in paths]


def compare_runs(paths: list[str], out: str, target: float | None = None,
                 title: str = "", timeline_round: int = 1) -> str:
    """Several runs on the same axes in OUT (labels prefixed by run name); runs differing only by
    seed pooled into mean +- std. Returns the path of report.md."""
    runs = [load_run(p, n) for p, n in zip(paths, run_names(paths))]
    empty = [r.path for r in runs if not r.series]
    if empty:
        raise FileNotFoundError(f"no <algorithm>/metrics.csv under {', '.join(empty)}")
    rep = build(out, runs, title or "compare " + ", ".join(r.name for r in runs), target,
                prefix=True, timeline_round=timeline_round)
    return _write(rep, [s for r in runs for s in r.series], with_run=True)
