"""Issue 43's figure of the robustness section: the final score of each entry of the accuracy-
under-attack table as a horizontal bar (mean over seeds, ±1 std), its best evaluation as a
diamond, the clean references hatched. (Accuracy against epsilon is curves.accuracy_figure.)"""
from __future__ import annotations

import math

import numpy as np

from ..stats import Group, mean_std
from .style import H1, STYLE, W1, legend, plt, save


def attack_figure(groups: list[Group], colours: dict[str, str], finals: list[list[float]],
                  bests: list[list[float]], attacked: list[bool], xlabel: str,
                  path: str) -> str | None:
    """One bar per group (table order, top down); None where no group has a final score."""
    f = [mean_std(v) for v in finals]
    b = [mean_std(v)[0] for v in bests]
    if not any(math.isfinite(m) for m, _, _ in f):
        return None
    n = len(groups)
    y = np.arange(n)[::-1]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, max(H1 * 0.6, 0.9 + 0.32 * n)))
        for yi, g, (m, sd, k), best, hit in zip(y, groups, f, b, attacked):
            if not math.isfinite(m):
                continue
            ax.barh(yi, m, height=0.7, color=colours[g.label], alpha=0.9 if hit else 0.45,
                    hatch=None if hit else "//", edgecolor="white", linewidth=0,
                    xerr=sd if k > 1 and math.isfinite(sd) else None,
                    error_kw={"elinewidth": 1, "capsize": 2})
            if math.isfinite(best):
                ax.plot(best, yi, marker="D", markersize=4.5, markerfacecolor="white",
                        markeredgecolor="black", linestyle="none")
        ax.set_yticks(y)
        ax.set_yticklabels([g.label for g in groups])
        ax.set_xlabel(xlabel)
        ax.grid(axis="y", visible=False)
        ax.set_xlim(left=0)
        handles = [plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.9),
                   plt.Rectangle((0, 0), 1, 1, facecolor="grey", alpha=0.45, hatch="//",
                                 edgecolor="white"),
                   plt.Line2D([], [], marker="D", markersize=4.5, markerfacecolor="white",
                              markeredgecolor="black", linestyle="none")]
        legend(ax, handles, ["under attack", "no attacker", "best evaluation"],
               loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, borderaxespad=0.2)
        return save(fig, path)
