"""`hierfl topology FILE`: the tiers, counts and attribute distributions of a topology, and a
drawing of the tree (matplotlib + networkx)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from .graph import Topology


def _stats(values, unit: str) -> str:
    v = np.asarray(values, float)
    if len(v) == 0:
        return "—"
    if np.allclose(v, v[0]):
        return f"{v[0]:.4g} {unit}"
    q = np.percentile(v, [0, 50, 100])
    return f"min {q[0]:.4g}, median {q[1]:.4g}, max {q[2]:.4g} {unit}"


def summary(topo: Topology) -> str:
    """Per tier: counts, names, compute and link statistics (from the arrays: no graph)."""
    t = topo.tree
    lines = []
    for d in range(int(t.depth.max()) + 1):
        rows = np.flatnonzero(t.depth == d)
        if d == 0:
            lines.append("tier 0: cloud")
            continue
        role = "clients" if topo.is_client(t.names[rows[0]]) else "aggregators"
        names = sorted({t.names[r].rstrip("0123456789") for r in rows.tolist()})
        lines.append(f"tier {d}: {len(rows)} {role} ({', '.join(names)})")
        lines.append(f"  compute: {_stats(t.flops[rows], 'FLOP/s')}")
        lines.append(f"  latency to parent: {_stats(t.lat_up[rows], 's')}")
        lines.append(f"  uplink: {_stats(t.bw_up[rows], 'B/s')}")
        lines.append(f"  downlink: {_stats(t.bw_down[rows], 'B/s')}")
    fan = [len(topo.children[e]) for e in topo.edges]
    lines.append(f"clients per bottom aggregator: {_stats(fan, '')}")
    lines += class_lines(topo)
    return "\n".join(lines)


def class_lines(topo: Topology) -> list[str]:
    """Clients per device / link class (profiles), with each class's speed; [] without."""
    if not any(topo.device_class) and not any(topo.link_class):
        return []
    out = ["client classes (device / link):"]
    keys = list(zip(topo.device_class, topo.link_class))
    for key in dict.fromkeys(keys):
        ks = [k for k, c in enumerate(keys) if c == key]
        dev, link = (v or "(default)" for v in key)
        out.append(f"  {dev} / {link}: {len(ks)} clients, compute "
                   f"{_stats([float(topo.client_flops[k]) for k in ks], 'FLOP/s')}")
    return out


def tree_positions(topo: Topology) -> dict[str, tuple[float, float]]:
    """Leaves spread evenly on x, parents centred over their children, depth on y."""
    pos: dict[str, tuple[float, float]] = {}
    counter = [0]

    def place(n: str) -> float:
        kids = topo.children[n]
        if not kids:
            x = float(counter[0])
            counter[0] += 1
        else:
            x = float(np.mean([place(k) for k in kids]))
        pos[n] = (x, -float(topo.depth[n]))
        return x
    place("cloud")
    return pos


def draw(topo: Topology, path: str) -> str:
    import matplotlib                       # matplotlib: only --png draws
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt         # matplotlib: only --png draws
    from matplotlib.colors import LogNorm   # matplotlib: only --png draws

    pos = tree_positions(topo)
    und = nx.Graph((n, p) for n, p in topo.parent.items())
    flops = np.array([topo.graph.nodes[n]["flops"] for n in und.nodes])
    fig, ax = plt.subplots(figsize=(max(6.0, min(0.25 * topo.n_clients, 24.0)), 4.5), dpi=120)
    clients = [n for n in und.nodes if topo.is_client(n)]
    aggs = [n for n in und.nodes if not topo.is_client(n)]
    nx.draw_networkx_edges(und, pos, ax=ax, alpha=0.4)
    nx.draw_networkx_nodes(und, pos, nodelist=aggs, node_color="tab:blue", node_size=180, ax=ax)
    cf = np.array([topo.graph.nodes[n]["flops"] for n in clients])
    log = cf.max() > 10 * cf.min()      # speeds over decades: a log colour scale
    sc = nx.draw_networkx_nodes(und, pos, nodelist=clients, node_color=cf, cmap="viridis",
                                node_size=40, ax=ax)
    if log:
        sc.set_norm(LogNorm(cf.min(), cf.max()))
    if len(aggs) <= 40:
        nx.draw_networkx_labels(und, pos, labels={n: n for n in aggs}, font_size=7, ax=ax)
    fig.colorbar(sc, ax=ax, label="client compute (FLOP/s" + (", log)" if log else ")"))
    # a built tree's depth map holds the clients' depth as `leaf`, not per client
    deepest = max([*topo.depth.values(), getattr(topo.depth, "leaf", 0)])
    ax.set_title(f"{topo.n_clients} clients, {len(aggs) - 1} aggregators, "
                 f"{deepest} levels below the cloud")
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    del flops
    return path
