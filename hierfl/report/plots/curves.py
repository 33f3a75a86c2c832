"""Curves over the run: test accuracy vs simulated time, bytes and bytes per tier (mean over
seeds with a +-1 std band), training loss, per-round panels, bytes per tier and direction."""
from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator, NullFormatter

from ..stats import Group
from .style import H1, STYLE, W1, finite, has, has_positive, hatch, legend, marker, plt, save


def band(std: float) -> float:
    """Half-width of a +-1 std band: none where the std is undefined (one value)."""
    return std if math.isfinite(std) else 0.0


def _draw_group(ax: plt.Axes, g: Group, x: str, y: str, c: str, logx: bool, style: str = "-",
                label: str | None = None, width: float | None = None,
                mark: str | None = None) -> bool:
    m = g.mean()
    sd = g.std()
    xs, ys = m.col(x), m.col(y)
    half = [band(sd.get(int(r["round"]), {}).get(y, 0.0)) for r in m.rows]
    lo = [r.get(y, math.nan) - h for r, h in zip(m.rows, half)]
    hi = [r.get(y, math.nan) + h for r, h in zip(m.rows, half)]
    xs_, ys_, lo_, hi_ = finite(xs, ys, lo, hi)
    if logx:
        keep = xs_ > 0
        xs_, ys_, lo_, hi_ = xs_[keep], ys_[keep], lo_[keep], hi_[keep]
    if len(xs_) == 0:
        return False
    ax.plot(xs_, ys_, style, color=c, label=label if label is not None else g.label,
            linewidth=width or plt.rcParams["lines.linewidth"],
            marker=mark or ("o" if len(xs_) <= 3 else None), markersize=3.5,
            markevery=max(1, len(xs_) // 12) if mark else None)
    if g.n > 1:
        ax.fill_between(xs_, lo_, hi_, color=c, alpha=0.18, linewidth=0)
    for _, t in g.diverged:
        row = next((r for r in g.mean().rows if int(r["round"]) == t), None)
        if row is not None and math.isfinite(row.get(x, math.nan)):
            ax.axvline(row[x], color=c, linestyle=":", linewidth=1)
    return True


def accuracy_axes(ax: plt.Axes, groups: list[Group], colours: dict[str, str], x: str,
                  logx: bool) -> None:
    reg = bool(groups) and all(g.mean().lower_is_better for g in groups)
    score, pers = ("test_mse", "personal_test_mse") if reg else ("test_acc", "personal_test_acc")
    personal = has(groups, pers)
    for g in groups:
        c, m = colours[g.label], marker(colours, g.label)
        _draw_group(ax, g, x, score, c, logx,
                    label=f"{g.label} (global)" if personal else g.label, mark=m)
        if personal and has([g], pers):
            _draw_group(ax, g, x, pers, c, logx, "--",
                        label=f"{g.label} (personalised)", width=1.3, mark=m)
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel("test MSE (lower is better)" if reg else "test accuracy")


def eng_log_axis(ax: plt.Axes, unit: str = "B") -> None:
    """Byte counts (or another unit) in engineering units (kB, MB) on a log x axis; over less
    than ~1.5 decades the 2x and 5x minor ticks are labelled too, so there are always a few
    labels. Plain text: matplotlib's default log labels (2×10⁹) are mathtext, whose parser
    costs a report a few tenths of a CPU second to build."""
    eng = EngFormatter(unit=unit, sep=" ")
    ax.xaxis.set_major_formatter(eng)
    lo, hi = ax.get_xlim()
    if lo > 0 and hi / lo < 30:
        def minor(v: float, pos: int | None = None) -> str:
            if v <= 0:
                return ""
            m = v / 10 ** math.floor(math.log10(v))
            return eng(v) if abs(m - round(m)) < 1e-6 and round(m) in (2, 5) else ""
        ax.xaxis.set_minor_formatter(FuncFormatter(minor))
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())


def accuracy_figure(groups: list[Group], colours: dict[str, str], x: str, xlabel: str,
                    path: str, logx: bool = False) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        accuracy_axes(ax, groups, colours, x, logx)
        ax.set_xlabel(xlabel)
        if x.startswith("bytes"):
            eng_log_axis(ax)
        legend(ax, loc=_corner(groups))
        return save(fig, path)


def _corner(groups: list[Group]) -> str:
    """Where the legend hides the least: curves rise (accuracy) or fall (an MSE)."""
    reg = bool(groups) and all(g.mean().lower_is_better for g in groups)
    return "upper right" if reg else "lower right"


def tier_figure(groups: list[Group], colours: dict[str, str], path: str) -> str:
    """Accuracy vs bytes on each tier (client-edge, edge-cloud), log axes."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(2 * W1 * 0.78, H1), sharey=True)
        for ax, (key, name) in zip(axes, (("bytes_client_edge", "client–edge links"),
                                          ("bytes_edge_cloud", "edge–cloud links"))):
            accuracy_axes(ax, groups, colours, key, logx=True)
            ax.set_xlabel(f"bytes sent on {name}, both directions (B, log)")
            eng_log_axis(ax)
        axes[1].set_ylabel("")
        legend(axes[1], loc=_corner(groups))
        return save(fig, path)


def loss_figure(groups: list[Group], colours: dict[str, str], path: str) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        vals = []
        for g in groups:
            _draw_group(ax, g, "round", "train_loss", colours[g.label], False,
                        mark=marker(colours, g.label))
            vals += [v for v in g.mean().col("train_loss") if math.isfinite(v)]
        if vals and min(vals) > 0 and max(vals) / min(vals) > 30:
            ax.set_yscale("log")
        ax.set_xlabel("cloud round")
        ax.set_ylabel("training loss of the global model")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        legend(ax, loc="upper right")
        return save(fig, path)


def per_round_panels(groups: list[Group], colours: dict[str, str],
                     panels: tuple[tuple[str, str], ...], path: str,
                     counts: bool) -> str | None:
    """Side-by-side per-round panels (key, y label), only those of a key with a positive value;
    counts: integer steps from round 1, else log-scale lines with markers. None when no key has
    a positive value."""
    panels = tuple(pn for pn in panels if has_positive(groups, pn[0]))   # no empty panel
    if not panels:
        return None
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(len(panels) * W1 * 0.75, H1 * 0.9),
                                 sharex=True, squeeze=False)
        axes = axes[0]
        for ax, (key, name) in zip(axes, panels):
            for g in groups:
                rows = [r for r in g.mean().rows if not counts or r.get("round", 0) >= 1]
                xs, ys = finite([r["round"] for r in rows], [r.get(key, math.nan) for r in rows])
                if not len(xs):
                    continue
                m = marker(colours, g.label)
                if counts:
                    ax.step(xs, ys, where="mid", color=colours[g.label], label=g.label,
                            marker=m, markersize=3.5)
                else:
                    ax.plot(xs, ys, "-", marker=m or "o", markersize=3, color=colours[g.label],
                            label=g.label)
            ax.set_xlabel("cloud round")
            ax.set_ylabel(name)
            if counts:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.set_ylim(bottom=0)
            else:
                ax.set_yscale("log")
        legend(axes[-1] if counts else axes[0], loc="best")
        return save(fig, path)


def dissimilarity_figure(groups: list[Group], colours: dict[str, str], path: str) -> str | None:
    """FedProx's B(w) and E_k ||grad F_k - grad f||^2 of the global model, per round."""
    return per_round_panels(groups, colours, (("dissimilarity_B", "B(w) (dimensionless)"),
                                              ("grad_variance", "E_k ||∇F_k − ∇f||²")),
                            path, counts=False)


def tier_bytes_figure(groups: list[Group], colours: dict[str, str], path: str) -> str | None:
    """Bytes of the whole run by tier and direction, per algorithm."""
    keys = [("bytes_up_client_edge", "client→edge"), ("bytes_down_client_edge", "edge→client"),
            ("bytes_up_edge_cloud", "edge→cloud"), ("bytes_down_edge_cloud", "cloud→edge")]
    vals = []
    for g in groups:
        last = g.members[0].rows[-1] if g.members[0].rows else {}
        vals.append([float(np.nanmean([s.rows[-1].get(k, math.nan) for s in g.members
                                       if s.rows])) for k, _ in keys])
        del last
    v = np.asarray(vals)
    if not np.isfinite(v).any():
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(W1, 1.2 * len(groups) + 2), H1))
        width = 0.8 / len(groups)
        x = np.arange(len(keys))
        for i, g in enumerate(groups):
            ax.bar(x + (i - (len(groups) - 1) / 2) * width, np.nan_to_num(v[i]), width,
                   color=colours[g.label], label=g.label, hatch=hatch(colours, g.label),
                   edgecolor="white", linewidth=0)
        ax.set_xticks(x, [name for _, name in keys])
        ax.set_ylabel("bytes over the run (B)")
        ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
        legend(ax, loc="best")
        return save(fig, path)
