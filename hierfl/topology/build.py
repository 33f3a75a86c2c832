"""Building a topology spec into arrays: one row per node, every attribute drawn per tier with one
generator call (the same draws, in the same streams, as the networkx graph the simulator used to
build node by node), checked with array operations, and turned into the user-facing
`networkx.DiGraph` only when asked (`to_graph`, `Topology.graph`).

Rows: 0 is the cloud, then every aggregator tier from the top (`<tier name><i>` in order of i),
then the clients (`client<k>` in order of k). A row's link is the one to its parent: latency and
bandwidth upward (child -> parent) and downward (parent -> child)."""
from __future__ import annotations

import gc
import os
from itertools import repeat
from dataclasses import dataclass

import networkx as nx
import numpy as np

from .. import seeding
from ..config.errors import Problems
from ..config.limits import MAX_LATENCY_S, MIN_BANDWIDTH_BPS, MIN_FLOPS
from ..config.topology import LinkSpec, TopologySpec
from ..string_column import StringColumn
from .dist import draw
from .power import bad_powers, client_powers, drawn_power_problems
from .traces import read_devices

CLOUD, AGGREGATOR, CLIENT = 0, 1, 2


@dataclass
class Tree:
    """The nodes of a topology as arrays (row 0: the cloud)."""

    names: list[str]
    role: np.ndarray          # (R,) int8: CLOUD, AGGREGATOR, CLIENT
    parent: np.ndarray        # (R,) int64 row of the parent, -1 for the cloud
    depth: np.ndarray         # (R,) int64: cloud 0, top tier 1, ...
    flops: np.ndarray         # (R,) float64 FLOP/s
    lat_up: np.ndarray        # (R,) float64 latency of the link child -> parent (cloud: nan)
    bw_up: np.ndarray         # (R,) float64 bandwidth child -> parent
    lat_down: np.ndarray      # (R,) float64 latency parent -> child
    bw_down: np.ndarray       # (R,) float64 bandwidth parent -> child
    tier_name: dict[int, str]           # aggregator depth -> its tier's name
    device_class: list[str] | None = None   # (N,) per client (clients.mix), else None
    link_class: list[str] | None = None
    power: np.ndarray | None = None     # (N, 4) per client: power_w, idle_w, tx_w, rx_w

    @property
    def n_rows(self) -> int:
        return len(self.names)


def _links(link: LinkSpec, seed: int, purpose: str, n: int) -> tuple[np.ndarray, ...]:
    g = seeding.rng(seed, purpose)
    lat = draw(link.latency_s, g, n)
    bw = draw(link.bandwidth_Bps, g, n)
    up = draw(link.uplink_Bps, g, n) if link.uplink_Bps is not None else bw
    down = draw(link.downlink_Bps, g, n) if link.downlink_Bps is not None else bw
    return lat, up, down


def assign(assignment, n_children: int, n_parents: int, seed: int, purpose: str, key: str,
           p: Problems) -> np.ndarray:
    """The parent (index in its tier) of every child: explicit lists, random or round robin."""
    if isinstance(assignment, list):
        if len(assignment) != n_parents:
            p.add(key, f"{len(assignment)} lists", f"needs one list per parent node ({n_parents})")
        flat = sorted(c for lst in assignment for c in lst)
        if flat != list(range(n_children)):
            p.add(key, assignment, f"must list every id 0..{n_children - 1} exactly once")
        p.raise_if_any()
        out = np.empty(n_children, int)
        for e, lst in enumerate(assignment):
            out[lst] = e
        return out
    if assignment == "random":
        return seeding.rng(seed, purpose).integers(0, n_parents, n_children)
    return np.arange(n_children) % n_parents


def client_classes(spec: TopologySpec, n: int, seed: int, p: Problems, file: str = "") -> tuple:
    """(flops, latency, up, down, device classes, link classes, powers) of the clients, each
    drawn from its class (or the defaults) or read from the measured trace (`clients.trace`);
    the classes are None without `clients.mix` (or a trace's class columns); powers (N, 4):
    power_w, idle_w, tx_w, rx_w (topology/power.py)."""
    c = spec.clients
    assert c is not None
    if c.trace is not None:         # measured: one row per client (topology/traces.py)
        d = read_devices(os.path.join(os.path.dirname(os.path.abspath(file)), c.trace)
                         if file else c.trace)
        named = any(d["device"]) or any(d["link"])
        return (d["compute_flops"], d["latency_s"], d["uplink_Bps"], d["downlink_Bps"],
                d["device"] if named else None, d["link"] if named else None,
                client_powers(spec, n, seed, None))
    flops = draw(c.compute_flops, seeding.rng(seed, "topology/client-flops"), n)
    lat, up, down = _links(c.link, seed, "topology/client-links", n)
    if not c.mix:
        return flops, lat, up, down, None, None, client_powers(spec, n, seed, None)
    total = sum(s.fraction for s in c.mix)
    if abs(total - 1.0) > 1e-6:
        p.add("clients.mix", [s.fraction for s in c.mix], "fractions must sum to 1")
    for i, s in enumerate(c.mix):
        if s.device is not None and s.device not in spec.profiles.devices:
            p.add(f"clients.mix[{i}].device", s.device,
                  f"not in profiles.devices ({', '.join(spec.profiles.devices) or 'none'})")
        if s.link is not None and s.link not in spec.profiles.links:
            p.add(f"clients.mix[{i}].link", s.link,
                  f"not in profiles.links ({', '.join(spec.profiles.links) or 'none'})")
    p.raise_if_any()
    # largest-remainder counts, classes laid out over a seeded permutation of the clients
    raw = np.array([s.fraction for s in c.mix]) * n
    counts = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - counts), kind="stable")[: n - counts.sum()]:
        counts[i] += 1
    order = seeding.rng(seed, "topology/mix").permutation(n)
    cls_of = np.empty(n, int)
    cls_of[order] = np.repeat(np.arange(len(c.mix)), counts)
    flops, lat, up, down = flops.copy(), lat.copy(), up.copy(), down.copy()
    for i, s in enumerate(c.mix):
        ks = np.flatnonzero(cls_of == i)
        if s.device is not None:
            d = spec.profiles.devices[s.device]
            flops[ks] = draw(d.compute_flops, seeding.rng(seed, "topology/device", i), len(ks))
        if s.link is not None:
            ln = spec.profiles.links[s.link]
            la, u, dn = _links(ln, seed, f"topology/link-class/{s.link}", len(ks))
            lat[ks], up[ks], down[ks] = la, u, dn
    device_of = [s.device or "" for s in c.mix]
    link_of = [s.link or "" for s in c.mix]
    cl = cls_of.tolist()
    return (flops, lat, up, down, [device_of[i] for i in cl], [link_of[i] for i in cl],
            client_powers(spec, n, seed, cls_of))


def build_tree(spec: TopologySpec, seed: int, file: str = "") -> Tree:
    """Draw every attribute from the seed and lay out the tree (a spec without `graph:`)."""
    enabled = gc.isenabled()
    gc.disable()                # a million names: nothing cyclic to collect while they are made
    try:
        return _build_tree(spec, seed, file)
    finally:
        if enabled:
            gc.enable()


def _build_tree(spec: TopologySpec, seed: int, file: str) -> Tree:
    p = Problems(file)
    tiers = spec.tier_list
    names_t = [t.name for t in tiers]
    if len(set(names_t)) != len(names_t) or "cloud" in names_t or "client" in names_t:
        p.add("tiers", names_t, "tier names must be unique and not 'cloud' or 'client'")
        p.raise_if_any()
    names = ["cloud"]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("parent", "depth", "flops", "lat",
                                                          "up", "down", "role")}

    def add(parent_rows, depth, flops, lat, up, down, role):
        n = len(parent_rows)
        for k, v in (("parent", parent_rows), ("depth", np.full(n, depth)), ("flops", flops),
                     ("lat", lat), ("up", up), ("down", down), ("role", np.full(n, role))):
            cols[k].append(np.asarray(v))

    cloud = draw(spec.cloud.compute_flops, seeding.rng(seed, "topology/cloud"), 1)
    nan = np.full(1, np.nan)
    add(np.full(1, -1), 0, cloud, nan, nan, nan, CLOUD)
    first, count = 0, 1                       # rows of the tier above
    for depth, tier in enumerate(tiers, 1):
        key = f"tiers[{depth - 1}].assignment" if spec.tiers is not None else "edges"
        up_of = assign(tier.assignment, tier.count, count, seed,
                       f"topology/{tier.name}-assignment", key, p)
        flops = draw(tier.compute_flops, seeding.rng(seed, f"topology/{tier.name}-flops"),
                     tier.count)
        lat, up, down = _links(tier.link, seed, f"topology/{tier.name}-links", tier.count)
        add(first + up_of, depth, flops, lat, up, down, AGGREGATOR)
        first = len(names)
        names.extend(map("{}{}".format, repeat(tier.name, tier.count), range(tier.count)))
        count = tier.count
    c = spec.clients
    assert c is not None
    edge_of = assign(c.assignment, c.count, count, seed, "topology/assignment",
                     "clients.assignment", p)
    flops, lat, up, down, dev, lnk, pw = client_classes(spec, c.count, seed, p, file)
    add(first + edge_of, len(tiers) + 1, flops, lat, up, down, CLIENT)
    names.extend(map("client{}".format, range(c.count)))
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return Tree(names, cat["role"].astype(np.int8), cat["parent"].astype(np.int64),
                cat["depth"].astype(np.int64), cat["flops"].astype(np.float64),
                cat["lat"].astype(np.float64), cat["up"].astype(np.float64),
                cat["lat"].astype(np.float64), cat["down"].astype(np.float64),
                {d: t.name for d, t in enumerate(tiers, 1)}, dev, lnk,
                pw if pw.any() else None)


def to_graph(tree: Tree) -> nx.DiGraph:
    """The networkx view: the nodes, attributes and links (in the same order) that building the
    graph node by node gives."""
    g = nx.DiGraph()
    names, parent, depth = tree.names, tree.parent.tolist(), tree.depth.tolist()
    flops, role = tree.flops.tolist(), tree.role.tolist()
    lat, up = tree.lat_up.tolist(), tree.bw_up.tolist()
    lat_d, down = tree.lat_down.tolist(), tree.bw_down.tolist()
    mix = tree.device_class is not None
    nodes, links = [("cloud", {"role": "cloud", "flops": flops[0]})], []
    radio: dict[str, dict] = {}          # a client's upward link's tx_w / rx_w
    k = 0
    for r in range(1, len(names)):
        name, par = names[r], names[parent[r]]
        if role[r] == CLIENT:
            attrs = {"role": "client", "flops": flops[r], "parent": par, "index": k}
            if mix:
                attrs.update(device_class=tree.device_class[k], link_class=tree.link_class[k])
            if tree.power is not None and tree.power[k].any():     # energy attributes
                attrs.update(power_w=float(tree.power[k, 0]), idle_w=float(tree.power[k, 1]))
                radio[name] = {"tx_w": float(tree.power[k, 2]), "rx_w": float(tree.power[k, 3])}
            k += 1
        else:
            attrs = {"role": "edge", "flops": flops[r], "parent": par, "tier": depth[r],
                     "tier_name": tree.tier_name[depth[r]]}
        nodes.append((name, attrs))
        links.append((name, par, {"latency_s": lat[r], "bandwidth_Bps": up[r],
                                   **radio.get(name, {})}))
        links.append((par, name, {"latency_s": lat_d[r], "bandwidth_Bps": down[r]}))
    g.add_nodes_from(nodes)
    g.add_edges_from(links)
    return g


# ---------------------------------------------------------------------- attribute checks
def link_problems(p: Problems, a: str, b: str, attrs: dict) -> None:
    """The problems of one link's latency and bandwidth (validate_graph's wording)."""
    for key in ("latency_s", "bandwidth_Bps"):
        v = attrs.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            p.add(f"links.{a}->{b}.{key}", v, "expected a finite number")
        elif key == "latency_s" and not 0 <= v <= MAX_LATENCY_S:
            p.add(f"links.{a}->{b}.{key}", v, f"must be in [0, {MAX_LATENCY_S:g}] s")
        elif key == "bandwidth_Bps" and v < MIN_BANDWIDTH_BPS:
            p.add(f"links.{a}->{b}.{key}", v, "must be > 0" if v <= 0 else
                  f"must be >= {MIN_BANDWIDTH_BPS:g} B/s")


def flops_problem(p: Problems, n: str, f) -> None:
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not np.isfinite(f) or f <= 0:
        p.add(f"nodes.{n}.flops", f, "must be a finite number > 0")
    elif f < MIN_FLOPS:
        p.add(f"nodes.{n}.flops", f, f"must be >= {MIN_FLOPS:g} FLOP/s")


def check_tree(tree: Tree, file: str = "") -> None:
    """validate_graph's attribute checks on the arrays (a built spec is a tree by construction):
    only the rows with a bad value are visited, in row order, so the problems are the same."""
    def bad_lat(v):
        return ~np.isfinite(v) | (v < 0) | (v > MAX_LATENCY_S)

    def bad_bw(v):
        return ~np.isfinite(v) | (v < MIN_BANDWIDTH_BPS)

    t = tree
    with np.errstate(invalid="ignore"):
        bad = bad_lat(t.lat_up) | bad_bw(t.bw_up) | bad_lat(t.lat_down) | bad_bw(t.bw_down) | \
            ~np.isfinite(t.flops) | (t.flops <= 0) | (t.flops < MIN_FLOPS)
    bad[0] = False                           # the cloud has no link and its speed is not checked
    client_rows = np.flatnonzero(t.role == CLIENT)
    watts = np.zeros(t.n_rows, bool)
    if t.power is not None:
        watts[client_rows[bad_powers(t.power)]] = True
    if not (bad | watts).any():
        return
    p = Problems(file)
    for r in np.flatnonzero(bad | watts).tolist():
        n, par = t.names[r], t.names[int(t.parent[r])]
        link_problems(p, n, par, {"latency_s": float(t.lat_up[r]),
                                  "bandwidth_Bps": float(t.bw_up[r])})
        link_problems(p, par, n, {"latency_s": float(t.lat_down[r]),
                                  "bandwidth_Bps": float(t.bw_down[r])})
        flops_problem(p, n, float(t.flops[r]))
        if watts[r]:
            drawn_power_problems(p, n, par, t.power[int(np.searchsorted(client_rows, r))])
    p.raise_if_any()


def node_table(tree: Tree, client_rows: np.ndarray) -> dict[str, list]:
    """summary.json's `nodes`: the aggregators (by depth, then natural name order) then the
    clients (by id), each with role, parent, depth, FLOP/s and the link to its parent (roles
    and parents as `StringColumn`s)."""
    t = tree
    aggs = np.flatnonzero(t.role == AGGREGATOR)
    names = t.names
    stem = [names[r].rstrip("0123456789") for r in aggs.tolist()]
    num = [int(names[r][len(s):] or -1) for r, s in zip(aggs.tolist(), stem)]
    aggs = aggs[sorted(range(len(aggs)), key=lambda i: (int(t.depth[aggs[i]]), stem[i], num[i]))] \
        if len(aggs) else aggs
    rows = np.concatenate([aggs, client_rows]).astype(np.int64)
    roles = ["cloud", "edge", "client"]          # by CLOUD, AGGREGATOR, CLIENT
    parents, up = np.unique(t.parent[rows], return_inverse=True)
    parent_names = [names[p] for p in parents.tolist()]
    return {"name": StringColumn([names[r] for r in rows.tolist()]),     # distinct
            "role": StringColumn(np.array(roles)[t.role[rows]].tolist(), roles,
                                 t.role[rows]),
            "parent": StringColumn([parent_names[i] for i in up.tolist()], parent_names, up),
            "depth": t.depth[rows].tolist(), "flops": t.flops[rows].tolist(),
            "latency_up_s": t.lat_up[rows].tolist(), "up_Bps": t.bw_up[rows].tolist(),
            "latency_down_s": t.lat_down[rows].tolist(), "down_Bps": t.bw_down[rows].tolist()}
