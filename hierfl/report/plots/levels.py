"""Bytes on every link level of the tree (client-edge, edge-regional, regional-cloud, ...): the
bytes of the whole run per level and direction, and accuracy vs the bytes of each level."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.ticker import EngFormatter

from ..stats import Group
from .curves import _corner, accuracy_axes, eng_log_axis
from .style import H1, STYLE, W1, hatch, legend, plt, save


def pretty(level: str, arrow: str = "–") -> str:
    """edge_regional -> 'edge–regional' (lower tier first)."""
    return level.replace("_", arrow, 1)


def _arrows(level: str) -> tuple[str, str]:
    lower, _, upper = level.partition("_")
    return f"{lower}→{upper}", f"{upper}→{lower}"


def _mean(values: list[float]) -> float:
    """The mean of the finite values, nan without any (a run of another depth has no such
    level: numpy's nanmean warned "Mean of empty slice" on the console)."""
    return float(np.nanmean(values)) if any(math.isfinite(x) for x in values) else math.nan


def level_bytes_figure(groups: list[Group], colours: dict[str, str], levels: list[str],
                       path: str) -> str | None:
    """Bytes of the whole run per level (bottom up) and direction, one bar per algorithm (mean
    over seeds); a log axis where the bars span more than two decades."""
    keys = [(f"bytes_{d}_{lv}", name) for lv in levels
            for d, name in zip(("up", "down"), _arrows(lv))]
    v = np.array([[_mean([s.rows[-1].get(k, math.nan) for s in g.members if s.rows])
                   for k, _ in keys] for g in groups])
    if not np.isfinite(v).any():
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(W1, 0.5 * len(keys) * max(len(groups), 2) + 1.5),
                                        H1))
        width = 0.8 / len(groups)
        x = np.arange(len(keys))
        for i, g in enumerate(groups):
            ax.bar(x + (i - (len(groups) - 1) / 2) * width, np.nan_to_num(v[i]), width,
                   color=colours[g.label], label=g.label, hatch=hatch(colours, g.label),
                   edgecolor="white", linewidth=0)
        pos = v[np.isfinite(v) & (v > 0)]
        if len(pos) and pos.max() / pos.min() > 100:
            ax.set_yscale("log")
        ax.set_xticks(x, [name for _, name in keys], rotation=20 if len(keys) > 4 else 0)
        ax.set_ylabel("bytes over the run (B" + (", log)" if ax.get_yscale() == "log" else ")"))
        ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
        legend(ax, loc="best")
        return save(fig, path)


def level_accuracy_figure(groups: list[Group], colours: dict[str, str], levels: list[str],
                          path: str) -> str | None:
    """Test accuracy vs the bytes sent on each level (both directions), one panel per level."""
    added = []
    _forget_means(groups)
    try:
        for g in groups:
            for s in g.members:
                for r in s.rows:
                    for lv in levels:
                        key = f"bytes_level_{lv}"
                        r[key] = r.get(f"bytes_up_{lv}", math.nan) + r.get(f"bytes_down_{lv}",
                                                                              math.nan)
                        added.append((r, key))
        with plt.rc_context(STYLE):
            n = len(levels)
            fig, axes = plt.subplots(1, n, figsize=(n * W1 * 0.62, H1), sharey=True,
                                     squeeze=False)
            for ax, lv in zip(axes[0], levels):
                accuracy_axes(ax, groups, colours, f"bytes_level_{lv}", logx=True)
                ax.set_xlabel(f"bytes on {pretty(lv)} links (B, log)")
                eng_log_axis(ax)
            for ax in axes[0, 1:]:
                ax.set_ylabel("")
            _legend_of_all(axes[0], groups)
            return save(fig, path)
    finally:            # the series keep only what their files hold (metrics_all.csv)
        for r, key in added:
            r.pop(key, None)
        _forget_means(groups)


def _legend_of_all(axes, groups: list[Group]) -> None:
    """One legend, on the last panel, of the curves of every panel: runs of other depths have
    curves only on some levels (the last panel's legend left the others' unnamed)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        legend(axes[-1], list(handles.values()), list(handles), loc=_corner(groups))


def _forget_means(groups: list[Group]) -> None:
    """Drop the groups' cached per-round means (recomputed from the rows when next asked)."""
    for g in groups:
        g._mean = g._std = None
