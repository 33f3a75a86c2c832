"""The simulated system and its data, from summary.json: the topology tree, the drawn device
speeds and links, the data split over the clients."""
from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ...outputs.summary_columns import as_list, is_client
from .style import H1, MAX_BARS, STYLE, W1, bars, legend, plt, save
from .system_scale import MANY_CLIENTS, group_means, groups_of, span, spans_decades, tier_axis, \
    topology_summary_figure


def topology_figure(summary: dict, path: str) -> str | None:
    """The tree: cloud on top, aggregator tiers, clients coloured by speed, sized by samples."""
    topo = summary.get("topology") or {}
    nodes = topo.get("nodes")
    if not nodes:
        return None
    if int(is_client(nodes["role"]).sum()) > MANY_CLIENTS:   # the tree down to the aggregators
        return topology_summary_figure(summary, path)
    names, parents, depth = as_list(nodes["name"]), as_list(nodes["parent"]), \
        as_list(nodes["depth"])
    roles, flops = as_list(nodes["role"]), as_list(nodes["flops"])
    par = dict(zip(names, parents))
    dep = dict(zip(names, depth))
    dep["cloud"] = 0
    clients = [n for n, r in zip(names, roles) if r == "client"]
    aggs = [n for n, r in zip(names, roles) if r != "client"]
    counts = as_list((summary.get("data") or {}).get("train_counts"))

    def chain(n: str) -> list[str]:
        out = []
        while n in par:
            n = par[n]
            out.append(n)
        return out[::-1]
    agg_rank = {a: i for i, a in enumerate(aggs)}
    order = sorted(range(len(clients)), key=lambda k: ([agg_rank.get(a, -1) for a in
                                                         chain(clients[k])], k))
    x = {clients[k]: float(i) for i, k in enumerate(order)}
    max_d = max(depth) if depth else 1
    kids_of: dict[str, list[str]] = {}
    for n in names:
        kids_of.setdefault(par[n], []).append(n)
    for d in range(max_d - 1, -1, -1):
        for a in [n for n in aggs if dep[n] == d] + (["cloud"] if d == 0 else []):
            kids = [k for k in kids_of.get(a, []) if k in x]
            x[a] = float(np.mean([x[k] for k in kids])) if kids else 0.0
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1 * 1.2, 1.2 + 1.1 * max_d))
        ax.grid(False)
        segs = [((x[n], -dep[n]), (x[par[n]], -dep[par[n]])) for n in names if par.get(n) in x]
        thin = len(clients) > 200
        ax.add_collection(LineCollection(segs, colors="#999999", linewidths=0.3 if thin else 0.6,
                                         alpha=0.5 if thin else 1.0, zorder=1))
        fl = dict(zip(names, flops))
        cf = np.array([fl[c] for c in clients]) / 1e9
        size = np.full(len(clients), 30.0)
        if counts and len(counts) == len(clients):
            cnt = np.asarray(counts, float)
            size = 12 + 120 * np.sqrt(cnt / cnt.max())
        many = len(clients) > 300
        _clients_by_speed(fig, ax, [x[c] for c in clients], -max_d, cf, size, many)
        ax.scatter([x[a] for a in aggs], [-dep[a] for a in aggs], marker="s", s=70,
                   color="#4C72B0", zorder=3, edgecolors="black", linewidths=0.5)
        ax.scatter([x["cloud"]], [0], marker="h", s=220, color="#C44E52", zorder=3,
                   edgecolors="black", linewidths=0.5)
        if len(aggs) <= 12:
            for a in aggs:
                ax.annotate(a, (x[a], -dep[a]), textcoords="offset points", xytext=(0, 8),
                            ha="center", fontsize=7.5)
        if len(clients) <= 40:
            for c in clients:
                ax.annotate(c.replace("client", ""), (x[c], -max_d), textcoords="offset points",
                            xytext=(0, -13), ha="center", fontsize=6.5)
        tier_axis(ax, max_d, len(clients), 0.45)
        sized = "" if many else " (marker area ∝ training samples)"
        ax.set_title(f"{len(clients)} clients{sized}, {len(aggs)} aggregators", fontsize=10)
        return save(fig, path)


def _clients_by_speed(fig: plt.Figure, ax: plt.Axes, xs: list[float], y: float,
                      cf: np.ndarray, size: np.ndarray, many: bool) -> None:
    """The clients coloured by speed (GFLOP/s; a log colour scale over decades)."""
    log = spans_decades(cf)
    norm = LogNorm(cf.min(), cf.max()) if log else None
    if many:       # a strip of ticks, one per client
        sc = ax.scatter(xs, [y] * len(xs), c=cf, s=160, marker="|", cmap="viridis", zorder=3,
                        linewidths=1.2, norm=norm)
    else:
        sc = ax.scatter(xs, [y] * len(xs), c=cf, s=size, cmap="viridis", zorder=3,
                        edgecolors="black", linewidths=0.4, norm=norm)
    fig.colorbar(sc, ax=ax, label="client speed (GFLOP/s" + (", log)" if log else ")"),
                 pad=0.01, fraction=0.04)


def _by_class(values: np.ndarray, classes: list[str] | None, colours: list[str],
              what: str) -> list[tuple[np.ndarray, str, str]]:
    """One histogram set per class (in order of first appearance), or one for all."""
    if isinstance(classes, np.ndarray):          # a str array (summary_columns.read's)
        cls = classes
        if len(cls) != len(values) or not (cls != "").any():
            return [(values, what, colours[0])]
        names = _in_order(cls)
    elif not classes or len(classes) != len(values) or not any(classes):
        return [(values, what, colours[0])]
    else:
        names = list(dict.fromkeys(classes))
        cls = np.asarray(classes)
    return [(values[cls == n], n or "(default)", colours[i % len(colours)])
            for i, n in enumerate(names)]


def _in_order(cls: np.ndarray, few: int = 32) -> list[str]:
    """The distinct strings of `cls` in order of first appearance: one comparison pass per
    class while there are few (10^6 clients: ~10 ms a pass), a sort beyond."""
    names: list[str] = []
    left = np.ones(len(cls), bool)
    while len(names) < few:
        i = int(np.argmax(left))
        if not left[i]:
            return names
        names.append(str(cls[i]))
        left &= cls != cls[i]
    distinct, first = np.unique(cls, return_index=True)
    return distinct[np.argsort(first)].tolist()


def _hist(ax: plt.Axes, sets: list[tuple[np.ndarray, str, str]], log: bool, xlabel: str) -> None:
    allv = np.concatenate([v for v, _, _ in sets if len(v)]) if sets else np.zeros(0)
    allv = allv[np.isfinite(allv)]
    if not len(allv):
        ax.set_visible(False)
        return
    lo, hi = float(allv.min()), float(allv.max())
    if log:
        lo, hi = max(lo, 1e-300), max(hi, 1e-300)
        bins = np.geomspace(lo / 1.15, hi * 1.15, 21) if hi > lo else np.geomspace(
            lo / 1.3, lo * 1.3, 4)
    else:
        pad = (hi - lo) * 0.05 if hi > lo else max(abs(lo) * 0.1, 1e-9)
        bins = np.linspace(lo - pad, hi + pad, 21 if hi > lo else 4)
    for v, lab, c in sets:
        if len(v):
            bars(ax, bins[:-1], np.histogram(v, bins)[0], np.diff(bins), align="edge", color=c,
                 alpha=0.65, label=f"{lab} (n={len(v)})")
    if log:
        ax.set_xscale("log")     # ticks at 1, 2, 5 x 10^k as plain numbers
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    legend(ax, fontsize=7.5)


def devices_figure(summary: dict, path: str) -> str | None:
    """Distributions of device speed, link latency and bandwidth as drawn for this run."""
    nodes = (summary.get("topology") or {}).get("nodes")
    if not nodes:
        return None
    roles = nodes["role"]
    cl = is_client(roles)                                  # a C loop: 10^6 nodes
    ag = ~cl
    arrays: dict[str, np.ndarray] = {}

    def a(key: str) -> np.ndarray:          # each column converted once
        if key not in arrays:
            arrays[key] = np.asarray(nodes[key], float)
        return arrays[key]
    topo = summary.get("topology") or {}
    speed = a("flops")[cl] / 1e9
    lat = [(a("latency_up_s")[cl] * 1e3, "client–edge", "#4C72B0"),
           (a("latency_up_s")[ag] * 1e3, "aggregator–parent", "#C44E52")]
    all_lat = np.concatenate([v for v, _, _ in lat])
    lat_log = spans_decades(all_lat) and bool((all_lat[np.isfinite(all_lat)] > 0).all())
    speed_log = spans_decades(speed)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 3, figsize=(W1 * 1.75, H1 * 0.8))
        _hist(axes[0], _by_class(speed, topo.get("device_class"),
                                 ["#55A868", "#8172B3", "#937860", "#DA8BC3"], "clients"),
              speed_log, "compute speed (GFLOP/s" + (", log)" if speed_log else ")"))
        _hist(axes[1], lat, lat_log, "link latency, one way (ms" + (", log)" if lat_log else ")"))
        _hist(axes[2], [(a("up_Bps")[cl] / 1e6, "client uplink", "#DD8452"),
                        (a("down_Bps")[cl] / 1e6, "client downlink", "#4C72B0"),
                        (a("up_Bps")[ag] / 1e6, "aggregator uplink", "#C44E52")], True,
              "bandwidth (MB/s, log)")
        return save(fig, path)


def data_figure(summary: dict, path: str) -> str | None:
    """Samples per client (train and test) and, for classification, each client's label mix."""
    data = summary.get("data") or {}
    train = as_list(data.get("train_counts"))    # (arrays where summary_columns.npz is)
    if not train:
        return None
    test = as_list(data.get("test_counts")) or [0] * len(train)
    labels = data.get("label_counts")
    n = len(train)
    k, width, what = np.arange(n), 0.85 if n <= 200 else 1.0, "client"
    tr, te = np.asarray(train, float), np.asarray(test, float)
    lab = np.asarray(labels, float) if labels else None
    if n > MAX_BARS:        # bars of the means over groups of consecutive clients
        k, width = groups_of(n)
        tr, te = group_means(tr, k), group_means(te, k)
        lab = group_means(lab, k) if lab is not None else None
        what = f"groups of {span(width)} clients"
    with plt.rc_context(STYLE):
        panels = 2 if labels else 1
        fig, axes = plt.subplots(panels, 1, figsize=(W1 * 1.25, 2.6 * panels + 0.4),
                                 squeeze=False, sharex=True)
        ax = axes[0, 0]
        align = "center" if n <= MAX_BARS else "edge"
        bars(ax, k, tr, width, align=align, color="#4C72B0", label="train")
        bars(ax, k, te, width, bottom=tr, align=align, color="#A1C9F4", label="test")
        ax.set_ylabel("samples" if n <= MAX_BARS else "samples per client (group mean)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.grid(False, axis="x")
        ax.set_title(f"{n} clients, {sum(train)} training and {sum(test)} test samples",
                     fontsize=10)
        legend(ax, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7.5)
        if lab is not None:
            frac = lab / np.maximum(lab.sum(1, keepdims=True), 1)
            ax2 = axes[1, 0]
            if n > MAX_BARS:        # a heatmap: groups of clients x classes, one artist
                _label_heatmap(fig, ax2, frac, k, n)
                axes[-1, 0].set_xlabel(f"client id ({what})")
                return save(fig, path)
            cmap = plt.get_cmap("tab20" if lab.shape[1] > 10 else "tab10")
            bottom = np.zeros(len(k))
            for j in range(lab.shape[1]):
                bars(ax2, k, frac[:, j], width, bottom=bottom, align=align, color=cmap(j % cmap.N),
                     label=str(j) if lab.shape[1] <= 20 else None)
                bottom += frac[:, j]
            ax2.set_ylabel("label share (train)")
            ax2.set_ylim(0, 1)
            ax2.grid(False)
            if lab.shape[1] <= 20:
                ax2.legend(title="class", ncol=1, fontsize=7, title_fontsize=7.5,
                           loc="center left", bbox_to_anchor=(1.0, 0.5))
        axes[-1, 0].set_xlabel("client id" if n <= MAX_BARS else f"client id ({what})")
        axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
        return save(fig, path)


def _label_heatmap(fig: plt.Figure, ax: plt.Axes, frac: np.ndarray, starts: np.ndarray,
                   n: int) -> None:
    """Label shares of groups of consecutive clients (columns) per class (rows)."""
    edges = np.append(starts, n)
    im = ax.pcolormesh(edges, np.arange(frac.shape[1] + 1) - 0.5, frac.T, cmap="viridis",
                       vmin=0.0, vmax=float(max(frac.max(), 1e-9)), rasterized=True)
    fig.colorbar(im, ax=ax, label="label share (train)", pad=0.01, fraction=0.04)
    ax.set_ylabel("class")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(False)
