"""The Gantt chart of one cloud round (bars from report/timeline.py)."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.collections import LineCollection, PolyCollection

from ..timeline import Timeline
from .style import KIND_COLOURS, STYLE, W1, plt, save


MERGE_FROM = 500       # bars of one kind above which overlapping ones are drawn as one


def _merged(items: list[tuple[float, float, float, float]] | np.ndarray
            ) -> list[tuple[float, float, float, float]]:
    """(x, width, y, height) bars with each row's overlapping ones joined (an aggregator's
    row holds one transfer per client: 10,000 polygons a row at W9, drawn and written to the
    SVG one by one)."""
    a = np.array(items, float).reshape(-1, 4)
    out = []
    for y, h in sorted(set(zip(a[:, 2].tolist(), a[:, 3].tolist()))):
        row = a[(a[:, 2] == y) & (a[:, 3] == h)]
        row = row[np.argsort(row[:, 0], kind="stable")]
        s, e = row[:, 0], row[:, 0] + row[:, 1]
        new = np.r_[True, s[1:] > np.maximum.accumulate(e)[:-1]]
        firsts = np.flatnonzero(new)
        ends = np.maximum.reduceat(e, firsts)
        out += [(float(x), float(z - x), y, h) for x, z in zip(s[firsts], ends)]
    return out


def _by_code(tl: Timeline, names: set) -> np.ndarray:
    """Whether each of the timeline's node codes names one of `names`."""
    return np.array([n in names for n in tl.names], bool)


def _rows(tl: Timeline, max_aggregators: int,
          max_clients: int) -> tuple[list[str], int, int]:
    """The rows drawn: the root, the first `max_aggregators` aggregators (top tiers first),
    then up to `max_clients` clients, those exchanging with a drawn aggregator first; and how
    many aggregators and clients are left out (a figure of the same size at any scale)."""
    root, aggs = tl.nodes[:1], [n for n in tl.nodes[1:] if n not in tl.clients]
    clients = [n for n in tl.nodes if n in tl.clients]
    shown = set(root + aggs[:max_aggregators])
    is_client, is_shown = _by_code(tl, tl.clients), _by_code(tl, shown)
    near_codes = np.unique(tl.node[is_client[tl.node] & is_shown[tl.peer]]) if tl.count else []
    near = {tl.names[c] for c in near_codes}
    ordered = [c for c in clients if c in near] + [c for c in clients if c not in near]
    picked = set(ordered[:max_clients])
    rows = root + aggs[:max_aggregators] + [c for c in clients if c in picked]
    return rows, len(aggs) - min(len(aggs), max_aggregators), len(clients) - len(picked)


def timeline_figure(tl: Timeline, label: str, path: str, max_clients: int = 40,
                    max_aggregators: int = 24) -> str:
    """Gantt chart of one cloud round: per node, receive (download), compute, send (upload);
    white-grey background = idle. Aggregations are black ticks; handovers (mobility) red
    triangles on the client's row. At most `max_aggregators` and `max_clients` rows (`_rows`)."""
    nodes, more_aggs, more_clients = _rows(tl, max_aggregators, max_clients)
    row = {n: i for i, n in enumerate(nodes)}
    span = max(tl.end - tl.start, 1e-12)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1 * 1.25, 0.9 + 0.24 * len(nodes)))
        ax.grid(True, axis="x", alpha=0.3)
        ax.grid(False, axis="y")
        def rects(items) -> np.ndarray:
            a = np.asarray(items, float).reshape(-1, 4)
            x, w, y, h = a.T
            return np.stack([np.stack([x, y], 1), np.stack([x + w, y], 1),
                             np.stack([x + w, y + h], 1), np.stack([x, y + h], 1)], 1)
        # one collection per kind (a few artists, however many nodes): idle background first
        ax.add_collection(PolyCollection(rects([(tl.start, span, i - 0.4, 0.8)
                                                for i in row.values()]),
                                         facecolors=KIND_COLOURS["idle"], edgecolors="none"))
        # aggregators: receive in the upper half of a row, send in the lower half (they overlap)
        geometry = {"download": (-0.4, 0.4), "upload": (0.0, 0.4), "compute": (-0.4, 0.8)}
        at = np.array([row.get(n, -1) for n in tl.names], np.int64)
        client = _by_code(tl, tl.clients)
        drawn = at[tl.node] >= 0 if tl.count else np.zeros(0, bool)
        for k, kind in ((1, "compute"), (0, "download"), (2, "upload")):
            m = drawn & (tl.kind == k)
            nodes_k = tl.node[m]
            start = tl.begin[m]
            off, h = geometry[kind]
            is_c = client[nodes_k]
            items = np.stack([start, np.maximum(tl.finish[m] - start, span * 1e-3),
                              at[nodes_k] + np.where(is_c, -0.4, off),
                              np.where(is_c, 0.8, h)], 1) if len(start) else []
            if len(items) > MERGE_FROM:
                items = _merged(items)
            if len(items):
                ax.add_collection(PolyCollection(rects(items), facecolors=KIND_COLOURS[kind],
                                                 edgecolors="none", alpha=0.9))
        ticks = [[(t, row[n] - 0.45), (t, row[n] + 0.45)] for t, n in tl.marks if n in row]
        if ticks:
            ax.add_collection(LineCollection(ticks, colors="black", linewidths=1.6))
        moves = [(t, row[n]) for t, n, _ in tl.handovers if n in row]
        if moves:
            ax.scatter([t for t, _ in moves], [r for _, r in moves], marker="v", s=28,
                       color="#d62728", zorder=3)
        ax.set_yticks(range(len(nodes)), nodes, fontsize=8 if len(nodes) > 20 else 9)
        ax.set_ylim(len(nodes) - 0.5, -0.5)
        ax.set_xlim(tl.start, tl.start + span * 1.01)
        ax.set_xlabel("simulated time (s)")
        left = [f"{k} more {what}" for k, what in ((more_aggs, "aggregators"),
                                                  (more_clients, "clients")) if k]
        more = f"; {' and '.join(left)} not shown" if left else ""
        ax.set_title(f"{label}: cloud round {tl.round}{more}", fontsize=10)
        handles = [matplotlib.patches.Patch(color=KIND_COLOURS[k], label=lab) for k, lab in
                   (("download", "receive (download)"), ("compute", "compute"),
                    ("upload", "send (upload)"), ("idle", "idle"))]
        handles.append(matplotlib.lines.Line2D([], [], color="black", linewidth=1.6,
                                               label="aggregate"))
        if moves:
            handles.append(matplotlib.lines.Line2D([], [], color="#d62728", marker="v",
                                                   linestyle="none", label="handover"))
        height = fig.get_figheight()
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles),
                   fontsize=8)
        return save(fig, path, rect=(0, 0.3 / height, 1, 1))
