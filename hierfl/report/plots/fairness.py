"""Issue 44's figures of the report's fairness section: per algorithm, how test accuracy is spread
over the clients at every evaluation (the 10th-90th percentile band, the median, the worst 10%
mean dashed), and the CDF of the final evaluation's per-client accuracies."""
from __future__ import annotations

import math

import numpy as np

from ..stats import Group
from .style import H1, STYLE, W1, legend, plt, save


def spread_figure(groups: list[Group], colours: dict[str, str], prefix: str,
                  path: str) -> str | None:
    """One panel per group (seeds averaged per round): the p10-p90 band of metrics.csv's
    `prefix`+p10 / p90, the median and the worst-10% mean. None where nothing is finite."""
    drawn = []
    for g in groups:
        m = g.mean()
        rows = [r for r in m.rows if math.isfinite(r.get(prefix + "p50", math.nan))]
        if rows:
            drawn.append((g, rows))
    if not drawn:
        return None
    n = len(drawn)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, cols, figsize=(W1 if cols == 1 else 3.2 * cols,
                                                      H1 * (0.75 if nrows > 1 else 1) * nrows),
                                 sharey=True, squeeze=False)
        for ax, (g, rows) in zip(axes.flat, drawn):
            c = colours[g.label]
            x = np.array([r["round"] for r in rows], dtype=float)
            col = lambda k: np.array([r.get(prefix + k, math.nan) for r in rows])  # noqa: E731
            ax.fill_between(x, col("p10"), col("p90"), color=c, alpha=0.25, linewidth=0)
            ax.plot(x, col("p50"), "-", color=c)
            ax.plot(x, col("worst10"), "--", color="black", linewidth=1.1)
            ax.set_title(g.label)
            ax.set_xlabel("cloud round")
        for ax in axes[:, 0]:
            ax.set_ylabel("client test accuracy")
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        handles = [plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.25),
                   plt.Line2D([], [], color="grey"),
                   plt.Line2D([], [], color="black", linestyle="--", linewidth=1.1)]
        fig.legend(handles, ["10th-90th percentile", "median", "worst 10% (mean)"],
                   loc="upper center", ncol=3)
        top = 1 - 0.35 / fig.get_figheight()
        return save(fig, path, rect=(0, 0, 1, top))


def cdf_figure(curves: list[tuple[str, str, np.ndarray, str]], path: str) -> str | None:
    """Empirical CDFs of per-client accuracies: (label, colour, accuracies, line style) each.
    None where there is no accuracy to draw."""
    curves = [(lab, c, a[np.isfinite(a)], st) for lab, c, a, st in curves]
    curves = [x for x in curves if len(x[2])]
    if not curves:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        for lab, c, a, st in curves:
            x, k = np.unique(a, return_counts=True)      # one step per distinct accuracy
            y = np.cumsum(k) / len(a)
            ax.step(np.concatenate([[x[0]], x]), np.concatenate([[0.0], y]), st, where="post",
                    color=c, label=lab)
        ax.set_xlabel("client test accuracy at the final evaluation")
        ax.set_ylabel("fraction of clients")
        ax.set_ylim(0, 1.02)
        legend(ax, *ax.get_legend_handles_labels(), loc="upper left")
        return save(fig, path)
