"""Figures of a report (matplotlib, Agg), saved as PNG and SVG at publication quality: labelled
axes with units, readable fonts, one colour per curve (algorithm) across every figure.

Every function takes the data it draws and a path, and returns the PNG path (the SVG sits next to
it). Curves of several seeds are drawn as the mean with a +-1 std band."""
from __future__ import annotations

import math
import os
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator, NullFormatter  # noqa: E402

from .records import Group, Series, add_totals  # noqa: E402
from .timeline import Timeline  # noqa: E402

STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8.5,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "lines.linewidth": 1.7, "savefig.dpi": 150, "figure.dpi": 100, "svg.fonttype": "none",
    "savefig.pad_inches": 0.05, "legend.frameon": False,
}
COLOURS = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("Dark2").colors)
KIND_COLOURS = {"download": "#4C72B0", "compute": "#55A868", "upload": "#DD8452",
                "idle": "#E8E8E8"}
W1, H1 = 6.4, 4.0            # one-panel figure, inches
MAX_BARS = 400               # per-client bar charts above this many clients become areas


def colour(i: int) -> str:
    return matplotlib.colors.to_hex(COLOURS[i % len(COLOURS)])


def palette(labels: Iterable[str]) -> dict[str, str]:
    """A fixed colour per label, in order of first appearance."""
    out: dict[str, str] = {}
    for lab in labels:
        if lab not in out:
            out[lab] = colour(len(out))
    return out


def save(fig: plt.Figure, path: str, rect: tuple[float, float, float, float] | None = None) -> str:
    """PNG and SVG of `fig` (laid out tightly within `rect`, figure coordinates)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout(rect=rect)
    fig.savefig(path, metadata={"Software": None})
    fig.savefig(os.path.splitext(path)[0] + ".svg", metadata={"Date": None})
    plt.close(fig)
    return path


def _finite(xs: list[float], ys: list[float], *more: list[float]) -> list[np.ndarray]:
    cols = [np.asarray(c, float) for c in (xs, ys, *more)]
    ok = np.isfinite(cols[0]) & np.isfinite(cols[1])
    return [c[ok] for c in cols]


def _legend(ax: plt.Axes, **kw) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


# ------------------------------------------------------------------------------ curves
def _draw_group(ax: plt.Axes, g: Group, x: str, y: str, c: str, logx: bool, style: str = "-",
                label: str | None = None, width: float | None = None) -> bool:
    m = g.mean()
    sd = g.std()
    xs, ys = m.col(x), m.col(y)
    lo = [m.rows[i].get(y, math.nan) - sd.get(int(m.rows[i]["round"]), {}).get(y, 0.0)
          for i in range(len(m.rows))]
    hi = [m.rows[i].get(y, math.nan) + sd.get(int(m.rows[i]["round"]), {}).get(y, 0.0)
          for i in range(len(m.rows))]
    xs_, ys_, lo_, hi_ = _finite(xs, ys, lo, hi)
    if logx:
        keep = xs_ > 0
        xs_, ys_, lo_, hi_ = xs_[keep], ys_[keep], lo_[keep], hi_[keep]
    if len(xs_) == 0:
        return False
    ax.plot(xs_, ys_, style, color=c, label=label if label is not None else g.label,
            linewidth=width or plt.rcParams["lines.linewidth"],
            marker="o" if len(xs_) <= 3 else None, markersize=3.5)
    if g.n > 1:
        ax.fill_between(xs_, lo_, hi_, color=c, alpha=0.18, linewidth=0)
    for _, t in g.diverged:
        row = next((r for r in g.mean().rows if int(r["round"]) == t), None)
        if row is not None and math.isfinite(row.get(x, math.nan)):
            ax.axvline(row[x], color=c, linestyle=":", linewidth=1)
    return True


def _has(groups: list[Group], key: str) -> bool:
    return any(math.isfinite(v) for g in groups for s in g.members for v in s.col(key))


def accuracy_axes(ax: plt.Axes, groups: list[Group], colours: dict[str, str], x: str,
                  logx: bool) -> None:
    personal = _has(groups, "personal_test_acc")
    for g in groups:
        c = colours[g.label]
        _draw_group(ax, g, x, "test_acc", c, logx,
                    label=f"{g.label} (global)" if personal else g.label)
        if personal and _has([g], "personal_test_acc"):
            _draw_group(ax, g, x, "personal_test_acc", c, logx, "--",
                        label=f"{g.label} (personalised)", width=1.3)
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel("test accuracy")


def _bytes_axis(ax: plt.Axes) -> None:
    """Byte counts in engineering units (kB, MB) on a log axis; over less than ~1.5 decades the
    2x and 5x minor ticks are labelled too, so there are always a few labels."""
    eng = EngFormatter(unit="B", sep=" ")
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
            _bytes_axis(ax)
        _legend(ax, loc="lower right")
        return save(fig, path)


def tier_figure(groups: list[Group], colours: dict[str, str], path: str) -> str:
    """Accuracy vs bytes on each tier (client-edge, edge-cloud), log axes."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(2 * W1 * 0.78, H1), sharey=True)
        for ax, (key, name) in zip(axes, (("bytes_client_edge", "client–edge links"),
                                          ("bytes_edge_cloud", "edge–cloud links"))):
            accuracy_axes(ax, groups, colours, key, logx=True)
            ax.set_xlabel(f"bytes sent on {name}, both directions (B, log)")
            _bytes_axis(ax)
        axes[1].set_ylabel("")
        _legend(axes[1], loc="lower right")
        return save(fig, path)


def loss_figure(groups: list[Group], colours: dict[str, str], path: str) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        vals = []
        for g in groups:
            _draw_group(ax, g, "round", "train_loss", colours[g.label], False)
            vals += [v for v in g.mean().col("train_loss") if math.isfinite(v)]
        if vals and min(vals) > 0 and max(vals) / min(vals) > 30:
            ax.set_yscale("log")
        ax.set_xlabel("cloud round")
        ax.set_ylabel("training loss of the global model")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _legend(ax, loc="upper right")
        return save(fig, path)


# ------------------------------------------------------------------------------ stragglers
def gamma_figure(groups: list[Group], colours: dict[str, str],
                 clients: dict[str, dict[str, np.ndarray]], targets: dict[str, float],
                 path: str) -> str | None:
    """Distribution of the achieved gamma = ||grad h(w_end)|| / ||grad h(w_start)|| per client
    per round (box: quartiles, whiskers: 5-95 %, diamond: mean)."""
    data = []
    for g in groups:
        gam = clients.get(g.label, {}).get("gamma", np.zeros(0))
        gam = gam[np.isfinite(gam)]
        if len(gam):
            data.append((g, gam))
    if not data:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(W1 * 0.7, 1.1 * len(data) + 2), H1))
        bp = ax.boxplot([v for _, v in data], whis=(5, 95), showfliers=False, patch_artist=True,
                        showmeans=True, widths=0.55,
                        meanprops={"marker": "D", "markerfacecolor": "white",
                                   "markeredgecolor": "black", "markersize": 4})
        for patch, (g, _) in zip(bp["boxes"], data):
            patch.set_facecolor(colours[g.label])
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        ax.set_xticks(range(1, len(data) + 1), [g.label for g, _ in data],
                      rotation=20 if len(data) > 4 else 0,
                      ha="right" if len(data) > 4 else "center")
        for i, (g, _) in enumerate(data, 1):
            t = targets.get(g.key)
            if t is not None:
                ax.hlines(t, i - 0.35, i + 0.35, colors="crimson", linestyles="--", linewidth=1.2,
                          label="target γ" if i == 1 or "target γ" not in
                          ax.get_legend_handles_labels()[1] else None)
        ax.set_ylabel("achieved γ  (‖∇h(w_end)‖ / ‖∇h(w_start)‖)")
        ax.set_xlabel("algorithm (one value per client per round)")
        _legend(ax, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
        return save(fig, path)


def steps_figure(groups: list[Group], colours: dict[str, str],
                 clients: dict[str, dict[str, np.ndarray]], path: str) -> str | None:
    """Local steps done against the step budget, one panel per algorithm; marker area grows with
    the number of client-rounds at that point; stragglers drawn as crosses."""
    data = [(g, clients[g.label]) for g in groups if len(clients.get(g.label, {}).get(
        "budget", ())) and "steps" in clients[g.label]]
    if not data:
        return None
    n = len(data)
    cols = min(n, 4)
    rows_ = math.ceil(n / cols)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows_, cols, figsize=(2.9 * cols + 0.4, 2.7 * rows_ + 0.3),
                                 squeeze=False)
        top = max(float(np.nanmax(c["budget"])) for _, c in data)
        for ax, (g, c) in zip(axes.flat, data):
            strag_col = c.get("straggler", np.zeros(len(c["budget"])))
            for strag, marker in ((False, "o"), (True, "x")):
                keep = (strag_col > 0.5) == strag
                keep &= np.isfinite(c["budget"]) & np.isfinite(c["steps"])
                if not keep.any():
                    continue
                pts, counts = np.unique(np.stack([c["budget"][keep], c["steps"][keep]], 1),
                                        axis=0, return_counts=True)
                sizes = 12 + 60 * np.sqrt(counts / counts.max())
                ax.scatter(pts[:, 0], pts[:, 1], s=sizes, marker=marker, color=colours[g.label],
                           alpha=0.7, linewidths=1.2,
                           label="straggler" if strag else "on time")
            ax.plot([0, top * 1.05], [0, top * 1.05], color="grey", linewidth=0.8,
                    linestyle="--")
            ax.set_xlim(0, top * 1.08 + 1)
            ax.set_ylim(0, top * 1.08 + 1)
            ax.set_title(g.label, fontsize=10)
            ax.set_xlabel("step budget")
            ax.set_ylabel("local steps done")
            _legend(ax, loc="upper left", fontsize=7.5)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        return save(fig, path)


def per_round_panels(groups: list[Group], colours: dict[str, str],
                     panels: tuple[tuple[str, str], tuple[str, str]], path: str,
                     counts: bool) -> str | None:
    """Two side-by-side per-round panels (key, y label); counts: integer steps from round 1,
    else log-scale lines with markers. None when neither key has a positive value."""
    if not any(_has_positive(groups, key) for key, _ in panels):
        return None
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(2 * W1 * 0.75, H1 * 0.9), sharex=True)
        for ax, (key, name) in zip(axes, panels):
            for g in groups:
                rows = [r for r in g.mean().rows if not counts or r.get("round", 0) >= 1]
                xs, ys = _finite([r["round"] for r in rows], [r.get(key, math.nan) for r in rows])
                if not len(xs):
                    continue
                if counts:
                    ax.step(xs, ys, where="mid", color=colours[g.label], label=g.label)
                else:
                    ax.plot(xs, ys, "o-", markersize=3, color=colours[g.label], label=g.label)
            ax.set_xlabel("cloud round")
            ax.set_ylabel(name)
            if counts:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.set_ylim(bottom=0)
            else:
                ax.set_yscale("log")
        _legend(axes[1] if counts else axes[0], loc="best")
        return save(fig, path)


def stragglers_figure(groups: list[Group], colours: dict[str, str], path: str) -> str | None:
    """Stragglers and failed (selected but not aggregated) clients per cloud round."""
    return per_round_panels(groups, colours, (("stragglers", "stragglers per round"),
                                              ("failed", "clients not aggregated per round")),
                            path, counts=True)


def _has_positive(groups: list[Group], key: str) -> bool:
    return any(v > 0 for g in groups for s in g.members for v in s.col(key) if math.isfinite(v))


# ------------------------------------------------------------------------------ timeline
def timeline_figure(tl: Timeline, label: str, path: str, max_clients: int = 40) -> str:
    """Gantt chart of one cloud round: per node, receive (download), compute, send (upload);
    white-grey background = idle. Aggregations are black ticks."""
    clients = [n for n in tl.nodes if n in tl.clients]
    shown_clients = clients[:max_clients]
    nodes = [n for n in tl.nodes if n not in tl.clients] + shown_clients
    row = {n: i for i, n in enumerate(nodes)}
    span = max(tl.end - tl.start, 1e-12)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1 * 1.25, 0.9 + 0.24 * len(nodes)))
        ax.grid(True, axis="x", alpha=0.3)
        ax.grid(False, axis="y")
        def rects(items: list[tuple[float, float, float, float]]) -> list[np.ndarray]:
            return [np.array([(x, y), (x + w, y), (x + w, y + h), (x, y + h)])
                    for x, w, y, h in items]
        # one collection per kind (a few artists, however many nodes): idle background first
        ax.add_collection(PolyCollection(rects([(tl.start, span, i - 0.4, 0.8)
                                                for i in row.values()]),
                                         facecolors=KIND_COLOURS["idle"], edgecolors="none"))
        # aggregators: receive in the upper half of a row, send in the lower half (they overlap)
        geometry = {"download": (-0.4, 0.4), "upload": (0.0, 0.4), "compute": (-0.4, 0.8)}
        for kind in ("compute", "download", "upload"):
            items = []
            for b in tl.bars:
                if b.kind == kind and b.node in row:
                    off, h = geometry[kind] if b.node not in tl.clients else (-0.4, 0.8)
                    items.append((b.start, max(b.end - b.start, span * 1e-3), row[b.node] + off,
                                  h))
            if items:
                ax.add_collection(PolyCollection(rects(items), facecolors=KIND_COLOURS[kind],
                                                 edgecolors="none", alpha=0.9))
        ticks = [[(t, row[n] - 0.45), (t, row[n] + 0.45)] for t, n in tl.marks if n in row]
        if ticks:
            ax.add_collection(LineCollection(ticks, colors="black", linewidths=1.6))
        ax.set_yticks(range(len(nodes)), nodes, fontsize=8 if len(nodes) > 20 else 9)
        ax.set_ylim(len(nodes) - 0.5, -0.5)
        ax.set_xlim(tl.start, tl.start + span * 1.01)
        ax.set_xlabel("simulated time (s)")
        more = f"; {len(clients) - len(shown_clients)} more clients not shown" if len(
            clients) > len(shown_clients) else ""
        ax.set_title(f"{label}: cloud round {tl.round}{more}", fontsize=10)
        handles = [matplotlib.patches.Patch(color=KIND_COLOURS[k], label=lab) for k, lab in
                   (("download", "receive (download)"), ("compute", "compute"),
                    ("upload", "send (upload)"), ("idle", "idle"))]
        handles.append(matplotlib.lines.Line2D([], [], color="black", linewidth=1.6,
                                               label="aggregate"))
        height = fig.get_figheight()
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=5,
                   fontsize=8)
        return save(fig, path, rect=(0, 0.3 / height, 1, 1))


# ------------------------------------------------------------------------------ scenario
def topology_figure(summary: dict, path: str) -> str | None:
    """The tree: cloud on top, aggregator tiers, clients coloured by speed, sized by samples."""
    topo = summary.get("topology") or {}
    nodes = topo.get("nodes")
    if not nodes:
        return None
    names, parents, depth = nodes["name"], nodes["parent"], nodes["depth"]
    roles, flops = nodes["role"], nodes["flops"]
    par = dict(zip(names, parents))
    dep = dict(zip(names, depth))
    dep["cloud"] = 0
    clients = [n for n, r in zip(names, roles) if r == "client"]
    aggs = [n for n, r in zip(names, roles) if r != "client"]
    counts = (summary.get("data") or {}).get("train_counts")

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
        if many:       # a strip of ticks, one per client, coloured by speed
            sc = ax.scatter([x[c] for c in clients], [-max_d] * len(clients), c=cf, s=160,
                            marker="|", cmap="viridis", zorder=3, linewidths=1.2)
        else:
            sc = ax.scatter([x[c] for c in clients], [-max_d] * len(clients), c=cf, s=size,
                            cmap="viridis", zorder=3, edgecolors="black", linewidths=0.4)
        fig.colorbar(sc, ax=ax, label="client speed (GFLOP/s)", pad=0.01, fraction=0.04)
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
        tiers = ["cloud"] + [f"tier {d}" for d in range(1, max_d)] + ["clients"]
        if max_d == 2:
            tiers[1] = "edges"
        ax.set_yticks([-d for d in range(max_d + 1)], tiers)
        ax.set_xticks([])
        ax.spines[["bottom", "left"]].set_visible(False)
        ax.set_ylim(-max_d - 0.45, 0.4)
        ax.set_xlim(-1, max(len(clients), 1))
        sized = "" if many else " (marker area ∝ training samples)"
        ax.set_title(f"{len(clients)} clients{sized}, {len(aggs)} aggregators", fontsize=10)
        return save(fig, path)


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
            ax.hist(v, bins=bins, color=c, alpha=0.65, label=f"{lab} (n={len(v)})")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _legend(ax, fontsize=7.5)


def devices_figure(summary: dict, path: str) -> str | None:
    """Distributions of device speed, link latency and bandwidth as drawn for this run."""
    nodes = (summary.get("topology") or {}).get("nodes")
    if not nodes:
        return None
    role = np.array(nodes["role"])
    cl, ag = role == "client", role != "client"

    def a(key: str) -> np.ndarray:
        return np.asarray(nodes[key], float)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 3, figsize=(W1 * 1.75, H1 * 0.8))
        _hist(axes[0], [(a("flops")[cl] / 1e9, "clients", "#55A868")], False,
              "compute speed (GFLOP/s)")
        _hist(axes[1], [(a("latency_up_s")[cl] * 1e3, "client–edge", "#4C72B0"),
                        (a("latency_up_s")[ag] * 1e3, "aggregator–parent", "#C44E52")], False,
              "link latency, one way (ms)")
        _hist(axes[2], [(a("up_Bps")[cl] / 1e6, "client uplink", "#DD8452"),
                        (a("down_Bps")[cl] / 1e6, "client downlink", "#4C72B0"),
                        (a("up_Bps")[ag] / 1e6, "aggregator uplink", "#C44E52")], True,
              "bandwidth (MB/s, log)")
        return save(fig, path)


def data_figure(summary: dict, path: str) -> str | None:
    """Samples per client (train and test) and, for classification, each client's label mix."""
    data = summary.get("data") or {}
    train = data.get("train_counts")
    if not train:
        return None
    test = data.get("test_counts") or [0] * len(train)
    labels = data.get("label_counts")
    n = len(train)
    k = np.arange(n)
    with plt.rc_context(STYLE):
        panels = 2 if labels else 1
        fig, axes = plt.subplots(panels, 1, figsize=(W1 * 1.25, 2.6 * panels + 0.4),
                                 squeeze=False, sharex=True)
        ax = axes[0, 0]
        width = 0.85 if n <= 200 else 1.0
        if n <= MAX_BARS:
            ax.bar(k, train, width=width, color="#4C72B0", label="train", linewidth=0)
            ax.bar(k, test, width=width, bottom=train, color="#A1C9F4", label="test",
                   linewidth=0)
        else:          # one bar per client would be too many rectangles: filled steps
            tr, te = np.asarray(train, float), np.asarray(test, float)
            ax.fill_between(k, 0, tr, step="mid", color="#4C72B0", label="train", linewidth=0)
            ax.fill_between(k, tr, tr + te, step="mid", color="#A1C9F4", label="test",
                            linewidth=0)
        ax.set_ylabel("samples")
        ax.grid(True, axis="y", alpha=0.3)
        ax.grid(False, axis="x")
        ax.set_title(f"{n} clients, {sum(train)} training and {sum(test)} test samples",
                     fontsize=10)
        _legend(ax, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7.5)
        if labels:
            lab = np.asarray(labels, float)
            frac = lab / np.maximum(lab.sum(1, keepdims=True), 1)
            ax2 = axes[1, 0]
            cmap = plt.get_cmap("tab20" if lab.shape[1] > 10 else "tab10")
            bottom = np.zeros(n)
            for j in range(lab.shape[1]):
                if n <= MAX_BARS:
                    ax2.bar(k, frac[:, j], width=width, bottom=bottom, color=cmap(j % cmap.N),
                            linewidth=0, label=str(j) if lab.shape[1] <= 20 else None)
                else:
                    ax2.fill_between(k, bottom, bottom + frac[:, j], step="mid",
                                     color=cmap(j % cmap.N), linewidth=0,
                                     label=str(j) if lab.shape[1] <= 20 else None)
                bottom += frac[:, j]
            ax2.set_ylabel("label share (train)")
            ax2.set_ylim(0, 1)
            ax2.grid(False)
            if lab.shape[1] <= 20:
                ax2.legend(title="class", ncol=1, fontsize=7, title_fontsize=7.5,
                           loc="center left", bbox_to_anchor=(1.0, 0.5))
        axes[-1, 0].set_xlabel("client id")
        axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
        return save(fig, path)


# ------------------------------------------------------------------------------ compatibility
def standard_figures(series: list[Series], out: str) -> dict[str, str]:
    """The three figures of the first report: accuracy vs simulated time, accuracy vs bytes
    (log), loss vs round."""
    add_totals(series)
    groups = [Group(s.label, [s], s.label) for s in series]
    colours = palette(g.label for g in groups)
    return {
        "acc_time": accuracy_figure(groups, colours, "sim_time_s", "simulated time (s)",
                                    os.path.join(out, "accuracy_vs_time.png")),
        "acc_bytes": accuracy_figure(groups, colours, "bytes_total",
                                     "bytes sent, all links (B, log)",
                                     os.path.join(out, "accuracy_vs_bytes.png"), logx=True),
        "loss_round": loss_figure(groups, colours, os.path.join(out, "loss_vs_round.png")),
    }


def dissimilarity_figure(groups: list[Group], colours: dict[str, str], path: str) -> str | None:
    """FedProx's B(w) and E_k ||grad F_k - grad f||^2 of the global model, per round."""
    return per_round_panels(groups, colours, (("dissimilarity_B", "B(w) (dimensionless)"),
                                              ("grad_variance", "E_k ||∇F_k − ∇f||²")),
                            path, counts=False)


def steps_speed_figure(groups: list[Group], colours: dict[str, str],
                       clients: dict[str, dict[str, np.ndarray]], summary: dict | None,
                       path: str) -> str | None:
    """Mean local steps done per client-round against the client's device speed."""
    nodes = ((summary or {}).get("topology") or {}).get("nodes") or {}
    names, flops = nodes.get("name"), nodes.get("flops")
    if not names or not flops:
        return None
    speed = {int(n[len("client"):]): f for n, f, r in zip(names, flops, nodes.get("role", []))
             if r == "client" and n.startswith("client") and n[len("client"):].isdigit()}
    data = [(g, clients[g.label]) for g in groups
            if "client" in clients.get(g.label, {}) and "steps" in clients[g.label]]
    if not data or not speed:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        for g, c in data:
            ks = c["client"].astype(int)
            uniq = np.unique(ks)
            mean_steps = np.array([np.nanmean(c["steps"][ks == k]) for k in uniq])
            sp = np.array([speed.get(int(k), math.nan) for k in uniq])
            ok = np.isfinite(sp) & np.isfinite(mean_steps)
            ax.scatter(sp[ok], mean_steps[ok], s=14, color=colours[g.label], alpha=0.75,
                       label=g.label)
        ax.set_xscale("log")
        ax.set_xlabel("client device speed (FLOP/s, log)")
        ax.set_ylabel("local steps done per round (mean)")
        _legend(ax, loc="best")
        return save(fig, path)


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
                   color=colours[g.label], label=g.label)
        ax.set_xticks(x, [name for _, name in keys])
        ax.set_ylabel("bytes over the run (B)")
        ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
        _legend(ax, loc="best")
        return save(fig, path)
