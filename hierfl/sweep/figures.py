"""Figures of a sweep, in the run report's style (report/plots/style: PNG + SVG, 150 dpi):

- per metric (the score, test accuracy or for regression the test MSE, and the training loss)
  one figure of three panels against cloud round, simulated time and total bytes: colour =
  algorithm (the report's colours, in scenario order), line style = grid point (the grid values
  without the seed); with more grid points than line styles and two or more grid keys, one row
  of panels per value of the first key (facets). Several seeds: the mean with a +-1 sample std
  band. The legends sit to the right of the panels, never over the data.
- time and bytes to target per grid point: one bar per algorithm (mean over the seeds that
  reached the target; error bar +-1 sample std when two or more did), x where none did.
Axis numbers as in the run report: bytes in decimal units (kB, MB), never 6.442e+05."""
from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..report.plots.style import STYLE, plt, save
from ..report.tables import size

DASHES: list[Any] = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2))]
MARKERS = [None, "o", "s", "^", "v", "D"]
FACET_AT = 4                # more grid points than this (and 2+ keys): one row per first value
X_AXES = (("round", "cloud round"), ("sim_time_s", "simulated time (s)"),
          ("bytes_total", "bytes sent, all links (B)"))


def _style(i: int) -> tuple[Any, str | None]:
    return DASHES[i % len(DASHES)], MARKERS[(i // len(DASHES)) % len(MARKERS)]


def _bytes_ticks(axis: Any) -> None:
    axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: size(v) if v >= 0 else ""))


def facets(combos: list[tuple]) -> list[tuple[str, list[tuple]]]:
    """(row title, its grid combos): one row, unless there are more than FACET_AT combos and
    two or more grid keys: then one row per value of the first key."""
    if len(combos) <= FACET_AT or not combos or len(combos[0]) < 2:
        return [("", combos)]
    rows: dict[str, list[tuple]] = {}
    for c in combos:
        rows.setdefault(f"{c[0][0]}={c[0][1]}", []).append(c)
    return list(rows.items())


def combo_text(combo: tuple, skip_first: bool = False) -> str:
    items = combo[1:] if skip_first else combo
    return ", ".join(f"{k}={v}" for k, v in items) or "(all)"


def _draw(ax: Any, g: Any, x: str, y: str, colour: str, style: tuple[Any, str | None],
          alpha: float = 0.15) -> bool:
    m, sd = g.mean(), g.std()
    pts = [(r.get(x, math.nan), r.get(y, math.nan), sd.get(int(r["round"]), {}).get(y, math.nan))
           for r in m.rows]
    pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
    if not pts:
        return False
    xs, ys, ss = (np.array(v, float) for v in zip(*pts))
    dash, marker = style
    ax.plot(xs, ys, linestyle=dash, marker=marker, markersize=3, color=colour, linewidth=1.5)
    if g.n > 1:
        half = np.where(np.isfinite(ss), ss, 0.0)
        ax.fill_between(xs, ys - half, ys + half, color=colour, alpha=alpha, linewidth=0)
    return True


def _legends(fig: Any, colours: dict[str, str], styles: list[tuple[str, Any]],
             style_title: str) -> None:
    """One legend right of the panels: the algorithms' colours, then the grid points' line
    styles under their own heading (when there are several)."""
    handles = [Line2D([], [], color=c, linewidth=2) for c in colours.values()]
    labels = list(colours)
    if len(styles) > 1:
        handles += [Line2D([], [], alpha=0), Line2D([], [], alpha=0)]
        labels += ["", style_title]
        handles += [Line2D([], [], color="#333", linestyle=s[0], marker=s[1], markersize=3)
                    for _, s in styles]
        labels += [t for t, _ in styles]
    fig.legend(handles, labels, title="algorithm", loc="upper left", bbox_to_anchor=(0.805, 0.98),
               fontsize=8, title_fontsize=8.5, alignment="left")


def metric_figure(curves: dict[tuple[tuple, str], Any], colours: dict[str, str], metric: str,
                  ylabel: str, path: str, log_y: bool = False) -> str | None:
    """One metric against round, simulated time and bytes (module docstring). `curves`: the
    report Group of every (grid combo, algorithm)."""
    combos = list(dict.fromkeys(c for c, _ in curves))
    rows = facets(combos)
    faceted = len(rows) > 1
    with plt.rc_context(STYLE):
        n = len(rows)
        fig, axes = plt.subplots(n, 3, figsize=(14.0, 3.3 * n + 0.5), squeeze=False,
                                 sharey="row")
        drawn, styles = False, {}
        for r, (title, row_combos) in enumerate(rows):
            for j, combo in enumerate(row_combos):
                st = _style(j)
                styles.setdefault(combo_text(combo, faceted), st)
                for label, c in colours.items():
                    g = curves.get((combo, label))
                    if g is None:
                        continue
                    alpha = 0.15 if len(row_combos) * len(colours) <= 4 else 0.07
                    for ax, (x, _) in zip(axes[r], X_AXES):
                        drawn = _draw(ax, g, x, metric, c, st, alpha) or drawn
            for ax, (x, xl) in zip(axes[r], X_AXES):
                ax.set_xlabel(xl)
                if x == "bytes_total":
                    _bytes_ticks(ax.xaxis)
                if log_y:
                    ax.set_yscale("log")
            axes[r][0].set_ylabel(ylabel + (f"\n{title}" if title else ""))
        if not drawn:
            plt.close(fig)
            return None
        names = [k for k, _ in combos[0]][1 if faceted else 0:] if combos else []
        _legends(fig, colours, list(styles.items()), ", ".join(names) or "grid point")
        return save(fig, path, rect=(0, 0, 0.8, 1))


def _bar_panel(ax: Any, stats: dict[tuple[tuple, str], tuple[float, float, int, int]],
               combos: list[tuple], colours: dict[str, str], bytes_axis: bool) -> None:
    width = 0.8 / max(1, len(colours))
    for a, (label, c) in enumerate(colours.items()):
        for i, combo in enumerate(combos):
            st = stats.get((combo, label))
            if st is None:
                continue
            mu, sd, k, n = st
            x = i - 0.4 + width * (a + 0.5)
            if k == 0:
                ax.plot([x], [0], marker="x", color=c, markersize=6, linestyle="none")
                continue
            ax.bar([x], [mu], width * 0.92, color=c,
                   yerr=[[sd], [sd]] if k > 1 and math.isfinite(sd) else None,
                   error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333"})
            if k < n:
                ax.annotate(f"{k}/{n}", (x, mu), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=6.5)
    ax.set_xticks(range(len(combos)))
    ax.set_xticklabels([combo_text(c).replace(", ", "\n") for c in combos], fontsize=7.5,
                       rotation=0 if len(combos) <= 6 else 45,
                       ha="center" if len(combos) <= 6 else "right")
    ax.set_xlim(-0.6, len(combos) - 0.4)
    if bytes_axis:
        _bytes_ticks(ax.yaxis)


def target_figure(stats: dict[str, dict[tuple[tuple, str], tuple[float, float, int, int]]],
                  colours: dict[str, str], path: str, multi_seed: bool) -> str | None:
    """Time and bytes to target per grid point and algorithm; `stats[metric][(combo, label)]`
    = (mean, sample std, seeds that reached, seeds)."""
    if not any(st[2] for m in stats.values() for st in m.values()):
        return None
    combos = list(dict.fromkeys(c for m in stats.values() for c, _ in m))
    with plt.rc_context(STYLE):
        w = min(16.0, 3.0 + 0.45 * len(combos) * max(1, len(colours)) * 2)
        fig, axes = plt.subplots(1, 2, figsize=(max(10.0, w), 4.2))
        for ax, (m, yl) in zip(axes, (("time_to_target_s", "simulated time to target (s)"),
                                      ("bytes_to_target", "bytes to target (B)"))):
            _bar_panel(ax, stats[m], combos, colours, m == "bytes_to_target")
            ax.set_ylabel(yl + (" (mean ± std over seeds)" if multi_seed else ""))
            ax.grid(axis="x", visible=False)
        fig.legend([Line2D([], [], color=c, linewidth=6) for c in colours.values()],
                   list(colours), title="algorithm (× not reached)", loc="upper left",
                   bbox_to_anchor=(0.86, 0.98), fontsize=8, title_fontsize=8.5)
        return save(fig, path, rect=(0, 0, 0.855, 1))


def remove_stale(out: str, keep: list[str]) -> None:
    """Earlier sweep figures (sweep_*.png / .svg) that this summary did not write."""
    names = {os.path.splitext(os.path.basename(p))[0] for p in keep}
    for f in os.listdir(out):
        stem, ext = os.path.splitext(f)
        if f.startswith("sweep_") and ext in (".png", ".svg") and stem not in names:
            os.unlink(os.path.join(out, f))
