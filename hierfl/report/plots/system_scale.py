"""The system figures of a run with many clients, at a cost that does not grow with them: the
tree is drawn down to the aggregators (the clients under each bottom aggregator as one marker:
area by their count, colour by their mean speed), the data split as means over groups of
consecutive clients, steps vs speed as means over speed bins. Per-client work is numpy only."""
from __future__ import annotations

import itertools

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm

from ...outputs.summary_columns import is_client
from .style import STYLE, W1, plt, save

MANY_CLIENTS = 300      # above this many clients the tree stops at the aggregators
GROUPS = 200            # clients per-id figures show at most this many groups


def spans_decades(values: np.ndarray, ratio: float = 10.0) -> bool:
    """Positive finite values whose largest is more than `ratio` times the smallest."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    return bool(len(v)) and float(v.max()) > ratio * float(v.min())


def tier_axis(ax: plt.Axes, max_d: int, width: int, bottom: float) -> None:
    """A topology drawing's axes: one row per depth, labelled cloud / edges or tier d /
    clients, no x axis; the drawing spans `width` nodes on its bottom row."""
    tiers = ["cloud"] + [f"tier {d}" for d in range(1, max_d)] + ["clients"]
    if max_d == 2:
        tiers[1] = "edges"
    ax.set_yticks([-d for d in range(max_d + 1)], tiers)
    ax.set_xticks([])
    ax.spines[["bottom", "left"]].set_visible(False)
    ax.set_ylim(-max_d - bottom, 0.4)
    ax.set_xlim(-1, max(width, 1))


def _layout(aggs: list[str], par: dict[str, str], dep: dict[str, int],
            bottom: list[str]) -> dict[str, float]:
    """x of every aggregator: the bottom ones side by side in tree order, a parent above the
    mean of its children."""
    rank = {a: i for i, a in enumerate(aggs)}

    def chain(n: str) -> list[int]:
        out = []
        while n in par and par[n] in rank:
            n = par[n]
            out.append(rank[n])
        return out[::-1]
    order = sorted(bottom, key=lambda a: (chain(a), rank[a]))
    x = {a: float(i) for i, a in enumerate(order)}
    kids: dict[str, list[str]] = {}
    for a in aggs:
        kids.setdefault(par.get(a, ""), []).append(a)
    for d in range(max(dep[a] for a in aggs), -1, -1):
        for a in [n for n in aggs if dep[n] == d and n not in x] + (["cloud"] if d == 0 else []):
            xs = [x[k] for k in kids.get(a, []) if k in x]
            x[a] = float(np.mean(xs)) if xs else 0.0
    return x


def bottom_groups(nodes: dict) -> tuple[list[str], dict[str, str], dict[str, int], list[str],
                                         np.ndarray, np.ndarray]:
    """From summary.json's node columns: the aggregators, their parents and depths (the cloud
    at 0), the aggregators with clients in order of their first client, and per such
    aggregator its number of clients and their mean speed (GFLOP/s). C loops and numpy over
    the clients (10^6 at city scale), Python over the aggregators."""
    names, parents, roles = nodes["name"], nodes["parent"], nodes["role"]
    n = min(len(names), len(parents), len(roles))
    client = is_client(roles[:n])
    agg_rows = np.flatnonzero(~client).tolist()
    arrays = isinstance(names, np.ndarray) and isinstance(parents, np.ndarray)   # `read`'s
    agg_names = names[agg_rows].tolist() if arrays else [names[i] for i in agg_rows]
    agg_parents = parents[agg_rows].tolist() if arrays else [parents[i] for i in agg_rows]
    aggs = [a for a in agg_names if a != "cloud"]
    par = dict(zip(agg_names, agg_parents))
    dep = {a: int(nodes["depth"][i]) for a, i in zip(agg_names, agg_rows)}
    dep["cloud"] = 0
    client_parent = parents[:n][client].tolist() if arrays else \
        list(itertools.compress(parents[:n], client.tolist()))
    bottom = list(dict.fromkeys(client_parent))
    where = {a: i for i, a in enumerate(bottom)}
    pidx = np.fromiter(map(where.__getitem__, client_parent), np.int64, len(client_parent))
    count = np.bincount(pidx, minlength=len(bottom)).astype(float)
    flops = np.asarray(nodes["flops"][:n], float)[client] / 1e9
    mean_speed = np.bincount(pidx, weights=flops, minlength=len(bottom)) / np.maximum(count, 1)
    return aggs, par, dep, bottom, count, mean_speed


def topology_summary_figure(summary: dict, path: str, svg: bool = True) -> str | None:
    """The tree down to the aggregators; the clients of each bottom aggregator as one marker
    (`svg`: an SVG beside the PNG, as every report figure has)."""
    aggs, par, dep, bottom, count, mean_speed = bottom_groups(summary["topology"]["nodes"])
    n_clients = int(count.sum())
    x = _layout(aggs, par, dep, bottom)
    max_d = max(dep[a] for a in bottom) + 1
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1 * 1.2, 1.2 + 1.1 * max_d))
        ax.grid(False)
        segs = [((x[a], -dep[a]), (x[par[a]], -dep[par[a]])) for a in aggs if par.get(a) in x]
        segs += [((x[a], -dep[a]), (x[a], -max_d)) for a in bottom]
        thin = len(bottom) > 200
        ax.add_collection(LineCollection(segs, colors="#999999", linewidths=0.3 if thin else 0.6,
                                         alpha=0.5 if thin else 1.0, zorder=1))
        log = spans_decades(mean_speed)
        norm = LogNorm(mean_speed.min(), mean_speed.max()) if log else None
        size = 20 + 160 * np.sqrt(count / count.max())
        sc = ax.scatter([x[a] for a in bottom], [-max_d] * len(bottom), c=mean_speed, s=size,
                        marker="o", cmap="viridis", zorder=3, edgecolors="black",
                        linewidths=0.3, norm=norm)
        fig.colorbar(sc, ax=ax, label="mean client speed (GFLOP/s" + (", log)" if log else ")"),
                     pad=0.01, fraction=0.04)
        ax.scatter([x[a] for a in aggs], [-dep[a] for a in aggs], marker="s", s=40 if thin
                   else 70, color="#4C72B0", zorder=3, edgecolors="black", linewidths=0.5)
        ax.scatter([x["cloud"]], [0], marker="h", s=220, color="#C44E52", zorder=3,
                   edgecolors="black", linewidths=0.5)
        if len(bottom) <= 40:
            for a, c in zip(bottom, count):
                ax.annotate(f"{int(c)}", (x[a], -max_d), textcoords="offset points",
                            xytext=(0, -14), ha="center", fontsize=6.5)
        tier_axis(ax, max_d, len(bottom), 0.5)
        ax.set_title(f"{n_clients} clients, {len(aggs)} aggregators (bottom row: the "
                     f"{span(count)} clients of each aggregator, area ∝ count)", fontsize=9)
        return save(fig, path, svg=svg)


def tree_png(topo, path: str, small) -> str:
    """`hierfl topology --png`: a topology of at most MANY_CLIENTS clients drawn by `small`
    (every node), a larger one down to its aggregators as the report draws it (a PNG only)."""
    if topo.n_clients <= MANY_CLIENTS:
        return small(topo, path)
    topology_summary_figure({"topology": {"nodes": topo.node_table()}}, path, svg=False)
    return (f"{path} (more than {MANY_CLIENTS} clients: the tree down to the aggregators, "
            "each one's clients as one marker)")


def span(values: np.ndarray) -> str:
    """"500" or "480–520": the range of integer counts."""
    lo, hi = int(np.min(values)), int(np.max(values))
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def groups_of(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and sizes of at most GROUPS groups of consecutive client ids covering 0..n-1."""
    starts = np.unique(np.linspace(0, n, min(n, GROUPS) + 1).astype(np.int64))
    return starts[:-1], np.diff(starts)


def group_means(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Means of `values` (rows: clients) over the groups starting at `starts`."""
    sums = np.add.reduceat(np.asarray(values, float), starts, axis=0)
    sizes = np.diff(np.append(starts, len(values)))
    return sums / (sizes[:, None] if sums.ndim == 2 else sizes)


def mean_by_bins(speed: np.ndarray, steps: np.ndarray, bins: int = 30
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(bin centre, mean steps) over log-spaced speed bins holding clients."""
    ok = np.isfinite(speed) & np.isfinite(steps) & (speed > 0)
    speed, steps = speed[ok], steps[ok]
    if not len(speed):
        return np.zeros(0), np.zeros(0)
    lo, hi = float(speed.min()), float(speed.max())
    edges = np.geomspace(lo, hi * (1 + 1e-9), bins + 1) if hi > lo else np.array([lo, lo * 1.01])
    b = np.clip(np.searchsorted(edges, speed, side="right") - 1, 0, len(edges) - 2)
    n = np.bincount(b, minlength=len(edges) - 1)
    s = np.bincount(b, weights=steps, minlength=len(edges) - 1)
    keep = n > 0
    centre = np.sqrt(edges[:-1] * edges[1:])
    return centre[keep], s[keep] / n[keep]
