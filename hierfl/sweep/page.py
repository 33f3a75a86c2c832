"""The sweep's page: the run report's model (report/model.py: sections with a table, text,
notes and figures) filled from the summary, rendered as sweep.md (figures linked next to it)
and as sweep.html by the run report's HTML renderer (one self-contained file, figures embedded,
the same look, number formatting and in-browser render check)."""
from __future__ import annotations

import os

from ..outputs import Series, atomic_text
from ..report.html import render_html
from ..report.markdown import md_table
from ..report.model import Figure, Report, Section
from ..report.plots.style import palette
from ..report.stats import target_text
from ..report.tables import num
from .figures import facets, metric_figure, remove_stale, target_figure
from .spec import Sweep
from .summary import curves_of, is_done, is_regression, target_stats


def _reuse_notes(sw: Sweep, rows: list[dict]) -> list[str]:
    copied = [r for r in rows if r["ran_at"] != r["point"]]
    if not copied:
        return []
    labels = list(dict.fromkeys(r["algorithm"] for r in copied))
    runs = len(rows) - len(copied)
    return [f"An algorithm unaffected by a grid key ran once per distinct scenario it reads: "
            f"{runs} algorithm runs for {len(rows)} (point, algorithm) results; the other "
            f"{len(copied)} ({', '.join(labels)}) are copies of the identical run at another "
            "point, the same files and numbers a rerun writes (column ran_at of points.csv)."]


def _figures(sw: Sweep, series: dict[tuple[str, str], Series], groups: dict, multi: bool
             ) -> tuple[list[Figure], list[Figure]]:
    curves = curves_of(sw, groups, series)
    colours = palette(list(sw.labels) + sorted({lb for _, lb in curves}))
    colours = {lb: c for lb, c in colours.items() if any(lb == x for _, x in curves)}
    reg = is_regression(series)
    score, name = ("test_mse", "test MSE (lower is better)") if reg else ("test_acc",
                                                                          "test accuracy")
    seeds = " (mean over seeds, ±1 sample std band)" if multi else ""
    combos = list(dict.fromkeys(c for c, _ in curves))
    how = f"; one row per {combos[0][0][0]}" if len(facets(combos)) > 1 else ""
    out = os.path.join(sw.output, "sweep_")
    figs = []
    for metric, label, log_y in ((score, name, False),
                                 ("train_loss", "training loss of the global model", False)):
        p = metric_figure(curves, colours, metric, label, f"{out}{metric}.png", log_y)
        if p:
            figs.append(Figure(p, f"{label} vs cloud round, simulated time and bytes: colour = "
                               f"algorithm, line style = grid point{how}{seeds}"))
    bars = target_figure(target_stats(sw, groups), colours, f"{out}to_target.png", multi)
    tfigs = [Figure(bars, "time and bytes to target per grid point" + (
        " (mean ± sample std over the seeds that reached it; k/n: only k of n did)" if multi
        else "") + "; × not reached")] if bars else []
    remove_stale(sw.output, [f.path for f in figs + tfigs])
    return figs, tfigs


def build_page(sw: Sweep, rows: list[dict], series: dict[tuple[str, str], Series],
               groups: dict, target: float, head: list[str], cells: list[list[str]]) -> Report:
    multi = any(len(rs) > 1 for rs in groups.values())
    missing = [pt.name for pt in sw.points if not is_done(sw.output, pt)]
    intro = [f"{len(sw.points)} points over {', '.join(sw.keys)}; "
             f"{len(sw.points) - len(missing)} finished.",
             target_text(list(series.values()), sw.target is not None).format(num(target))]
    text = ("Cells are mean ± sample standard deviation (ddof=1) over seeds; (k/n): only k of "
            "n seeds have a value (time, bytes and rounds to target average the seeds that "
            "reached the target; column reached). " if multi else "") + (
        "Machine-readable: sweep.csv (the grid), points.csv (one row per point and algorithm), "
        "metrics_all.csv (every metric of every point, tidy; run = the point).")
    figs, tfigs = _figures(sw, series, groups, multi)
    score = "Test MSE" if is_regression(series) else "Test accuracy"
    secs = [Section("grid", "Grid", head=head, rows=cells, text=text),
            Section("curves", f"{score} and training loss", figures=figs),
            Section("target", "Time and bytes to target", figures=tfigs),
            Section("runs", "Points", notes=_reuse_notes(sw, rows) + [
                "One folder per point: " + ", ".join(pt.name for pt in sw.points[:5])
                + (" ..." if len(sw.points) > 5 else "") + "; each has its own scenario "
                "(point.yaml), summary.json and metrics."])]
    if missing:
        secs.append(Section("missing", "Not finished", notes=missing))
    return Report(f"sweep {os.path.basename(sw.file)}", sw.output, intro, secs, target)


def render_sweep_md(rep: Report) -> str:
    parts = [f"# hierfl {rep.title}", "", *rep.intro, "",
             "Self-contained version with every figure: [sweep.html](sweep.html).", ""]
    for sec in rep.shown:
        parts += [f"## {sec.name}", ""]
        if sec.head:
            parts += [md_table(sec.head, sec.rows), ""]
        if sec.text:
            parts += [sec.text, ""]
        if sec.notes is not None:
            parts += [f"- {n}" for n in sec.notes] + [""]
        for f in sec.figures:
            parts += [f"![{f.caption}]({os.path.basename(f.path)})", "", f.caption, ""]
    return "\n".join(parts) + "\n"


def render_sweep_html(rep: Report) -> str:
    """The run report's HTML, headed as a sweep."""
    page = render_html(rep)
    return page.replace("<title>hierfl report: ", "<title>hierfl ", 1).replace(
        "<h1>hierfl report: ", "<h1>hierfl ", 1)


def write_page(sw: Sweep, rows: list[dict], series: dict[tuple[str, str], Series],
               groups: dict, target: float, head: list[str], cells: list[list[str]]) -> str:
    rep = build_page(sw, rows, series, groups, target, head, cells)
    path = os.path.join(sw.output, "sweep.md")
    atomic_text(path, render_sweep_md(rep))
    atomic_text(os.path.join(sw.output, "sweep.html"), render_sweep_html(rep))
    return path
