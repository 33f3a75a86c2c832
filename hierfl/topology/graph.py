"""The simulated system as a networkx DiGraph, and the typed view the simulator reads.

Nodes: "cloud"; aggregators of each tier ("edge<i>", "regional<i>", ...; role "edge", with
`tier` = depth below the cloud, 1 = top); "client<k>" (role "client", `index` k). Every node but
the cloud has `parent` and `flops` (FLOP/s). Links: one DiGraph edge per direction with
latency_s and bandwidth_Bps; the upward edge goes child -> parent. A graph built in Python (or
read from node-link JSON / GraphML) is validated by `Topology.from_graph`."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .. import seeding
from ..config.errors import NO_VALUE, Problems, ScenarioError
from ..config.limits import MAX_LATENCY_S, MAX_POWER_W, MIN_BANDWIDTH_BPS, MIN_FLOPS
from .dist import draw
from .levels import level_name, tier_names
from .traces import read_devices
from .power import LINK_KEYS, NODE_KEYS, client_powers
from ..config.topology import LinkSpec, TopologySpec


def _links(link: LinkSpec, seed: int, purpose: str, n: int) -> tuple[np.ndarray, ...]:
    g = seeding.rng(seed, purpose)
    lat = draw(link.latency_s, g, n)
    bw = draw(link.bandwidth_Bps, g, n)
    up = draw(link.uplink_Bps, g, n) if link.uplink_Bps is not None else bw
    down = draw(link.downlink_Bps, g, n) if link.downlink_Bps is not None else bw
    return lat, up, down


def _assign(assignment, n_children: int, n_parents: int, seed: int, purpose: str, key: str,
            p: Problems) -> np.ndarray:
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


def _add_link(g: nx.DiGraph, child: str, parent: str, lat: float, up: float, down: float) -> None:
    g.add_edge(child, parent, latency_s=float(lat), bandwidth_Bps=float(up))
    g.add_edge(parent, child, latency_s=float(lat), bandwidth_Bps=float(down))


def _client_classes(spec: TopologySpec, n: int, seed: int, p: Problems,
                    file: str = "") -> list[tuple]:
    """Per client: (flops, latency, up, down, device class, link class, powers) drawn from its
    class (or the defaults; a class not given is "") or read from its measured trace; powers:
    power_w, idle_w, tx_w, rx_w."""
    c = spec.clients
    assert c is not None
    if c.trace is not None:         # measured: one row per client (topology/traces.py)
        d = read_devices(os.path.join(os.path.dirname(os.path.abspath(file)), c.trace)
                         if file else c.trace)
        return list(zip(d["compute_flops"], d["latency_s"], d["uplink_Bps"],
                        d["downlink_Bps"], d["device"], d["link"],
                        client_powers(spec, n, seed, None)))
    flops = draw(c.compute_flops, seeding.rng(seed, "topology/client-flops"), n)
    lat, up, down = _links(c.link, seed, "topology/client-links", n)
    if not c.mix:
        return list(zip(flops, lat, up, down, [""] * n, [""] * n,
                        client_powers(spec, n, seed, None)))
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
    device = [c.mix[i].device or "" for i in cls_of]
    link = [c.mix[i].link or "" for i in cls_of]
    return list(zip(flops, lat, up, down, device, link, client_powers(spec, n, seed, cls_of)))


def build_graph(spec: TopologySpec, seed: int, file: str = "") -> nx.DiGraph:
    """Draw every attribute from the seed and lay out the tree."""
    if spec.graph is not None:
        return read_graph_file(os.path.join(os.path.dirname(os.path.abspath(file)), spec.graph)
                               if file else spec.graph)
    p = Problems(file)
    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=float(draw(spec.cloud.compute_flops,
                                                       seeding.rng(seed, "topology/cloud"), 1)[0]))
    parents = ["cloud"]
    tiers = spec.tier_list
    names = [t.name for t in tiers]
    if len(set(names)) != len(names) or "cloud" in names or "client" in names:
        p.add("tiers", names, "tier names must be unique and not 'cloud' or 'client'")
        p.raise_if_any()
    for depth, tier in enumerate(tiers, 1):
        key = f"tiers[{depth - 1}].assignment" if spec.tiers is not None else "edges"
        up_of = _assign(tier.assignment, tier.count, len(parents), seed,
                        f"topology/{tier.name}-assignment", key, p)
        flops = draw(tier.compute_flops, seeding.rng(seed, f"topology/{tier.name}-flops"), tier.count)
        lat, up, down = _links(tier.link, seed, f"topology/{tier.name}-links", tier.count)
        nodes = []
        for i in range(tier.count):
            name, parent = f"{tier.name}{i}", parents[up_of[i]]
            g.add_node(name, role="edge", flops=float(flops[i]), parent=parent, tier=depth,
                       tier_name=tier.name)
            _add_link(g, name, parent, lat[i], up[i], down[i])
            nodes.append(name)
        parents = nodes
    c = spec.clients
    assert c is not None
    edge_of = _assign(c.assignment, c.count, len(parents), seed, "topology/assignment",
                      "clients.assignment", p)
    for k, (fl, la, u, dn, dev, lnk, pw) in enumerate(_client_classes(spec, c.count, seed, p, file)):
        name, parent = f"client{k}", parents[edge_of[k]]
        g.add_node(name, role="client", flops=float(fl), parent=parent, index=k)
        if c.mix or (c.trace and (dev or lnk)):   # the classes (clients.csv, the report)
            g.nodes[name].update(device_class=dev, link_class=lnk)
        _add_link(g, name, parent, la, u, dn)
        if pw.any():           # energy (topology/power.py); absent: 0
            g.nodes[name].update(power_w=float(pw[0]), idle_w=float(pw[1]))
            g.edges[name, parent].update(tx_w=float(pw[2]), rx_w=float(pw[3]))
    return g


def read_graph_file(path: str) -> nx.DiGraph:
    """networkx node-link JSON or GraphML, with the node and link attributes above."""
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "graph", path, "graph file not found")
    from ..config.limits import MAX_BYTES

    if os.path.getsize(path) > MAX_BYTES:
        raise ScenarioError.one(path, "graph", path, f"graph file larger than {MAX_BYTES} bytes")
    try:
        if path.endswith((".graphml", ".xml")):
            with open(path, "rb") as fh:
                head = fh.read()
            if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
                raise ValueError("GraphML with a DOCTYPE or entity declarations is not read "
                                 "(entity expansion, external entities)")
            g = nx.read_graphml(path)
        else:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh, parse_constant=_no_constant)
            if not isinstance(data, dict):
                raise ValueError("node-link JSON is a mapping with nodes: and links:")
            key = "links" if "links" in data else "edges"
            g = nx.node_link_graph(data, directed=True, multigraph=False, edges=key)
    except RecursionError:
        raise ScenarioError.one(path, "graph", path, "cannot read graph: nested too deeply") \
            from None
    except SyntaxError as exc:      # xml ParseError: bad XML, entities (blocked by expat)
        raise ScenarioError.one(path, "graph", path, f"cannot read GraphML: {exc} (entity "
                                "declarations are not allowed)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, nx.NetworkXError) as exc:
        raise ScenarioError.one(path, "graph", path, f"cannot read graph: {exc}") from None
    return nx.DiGraph(g)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number (node-link JSON holds finite numbers only)")


@dataclass(frozen=True)
class Topology:
    """Arrays and maps the simulator reads, derived once from a validated graph."""

    graph: nx.DiGraph
    clients: tuple[str, ...]      # client node names, index = client id
    edges: tuple[str, ...]        # bottom-tier aggregators (the clients' parents), index = edge id
    edge_of: np.ndarray           # (N,) edge id of each client
    client_flops: np.ndarray      # (N,) FLOP/s
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)   # cloud 0, top tier 1, ...
    n_tiers: int = 1              # aggregator tiers between cloud and clients
    tier_names: tuple[str, ...] = ("cloud", "edge", "client")   # by depth (levels.py)
    device_class: tuple[str, ...] = ()    # (N,) each client's profiles.devices name, or ""
    link_class: tuple[str, ...] = ()      # (N,) each client's profiles.links name, or ""

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    def link(self, src: str, dst: str) -> tuple[float, float]:
        a = self.graph.edges[src, dst]
        return a["latency_s"], a["bandwidth_Bps"]

    def path_up(self, node: str) -> list[str]:
        """node, its parent, ..., cloud."""
        out = [node]
        while out[-1] != "cloud":
            out.append(self.parent[out[-1]])
        return out

    def level_of(self, node: str) -> str:
        """The link level between `node` and its parent, e.g. "edge_regional" (levels.py)."""
        return level_name(self.tier_names, self.depth[node])

    @property
    def levels(self) -> dict[str, str]:
        """Every link level, bottom up (client_edge first), -> its legacy tier (client_edge
        for the clients' links, edge_cloud above)."""
        n = len(self.tier_names) - 1
        return {level_name(self.tier_names, d): "client_edge" if d == n else "edge_cloud"
                for d in range(n, 0, -1)}

    def is_client(self, node: str) -> bool:
        return node in self.client_set

    @property
    def client_set(self) -> frozenset[str]:
        cached = self.__dict__.get("_client_set")
        if cached is None:
            cached = frozenset(self.clients)
            object.__setattr__(self, "_client_set", cached)
        return cached

    @classmethod
    def from_graph(cls, g: nx.DiGraph, file: str = "") -> "Topology":
        validate_graph(g, file)
        roles = nx.get_node_attributes(g, "role")
        parent = {n: g.nodes[n]["parent"] for n in g.nodes if roles[n] != "cloud"}
        depth: dict[str, int] = {"cloud": 0}

        def d(n: str) -> int:
            if n not in depth:
                depth[n] = d(parent[n]) + 1
            return depth[n]
        for n in g.nodes:
            d(n)
        kids: dict[str, list[str]] = {n: [] for n in g.nodes}
        for n, par in parent.items():
            kids[par].append(n)
        children = {n: tuple(sorted(v, key=_natural)) for n, v in kids.items()}
        clients = tuple(sorted((n for n in g.nodes if roles[n] == "client"), key=_natural))
        edges = tuple(sorted({parent[c] for c in clients}, key=lambda n: (depth[n], _natural(n))))
        eid = {e: i for i, e in enumerate(edges)}
        edge_of = np.array([eid[parent[c]] for c in clients], int)
        flops = np.array([g.nodes[c]["flops"] for c in clients], float)
        n_tiers = max(depth[c] for c in clients) - 1
        names = tier_names(g, depth, n_tiers + 1)
        dev = tuple(str(g.nodes[c].get("device_class") or "") for c in clients)
        lnk = tuple(str(g.nodes[c].get("link_class") or "") for c in clients)
        return cls(g, clients, edges, edge_of, flops, children, parent, depth, n_tiers, names,
                   dev, lnk)


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def _check_powers(g: nx.DiGraph, n: str, parent: str, p: Problems) -> None:
    """Optional energy attributes (topology/power.py): finite watts >= 0."""
    where = [(f"nodes.{n}.{k}", g.nodes[n].get(k)) for k in NODE_KEYS]
    if g.has_edge(n, parent):
        where += [(f"links.{n}->{parent}.{k}", g.edges[n, parent].get(k)) for k in LINK_KEYS]
    for key, v in where:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            p.add(key, v, "expected a finite number of watts")
        elif not 0 <= v <= MAX_POWER_W:
            p.add(key, v, f"must be in [0, {MAX_POWER_W:g}] W")


def validate_graph(g: nx.DiGraph, file: str = "") -> None:
    """A tree rooted at one cloud; every client reaches it through aggregators; sane attributes."""
    p = Problems(file)
    roles = nx.get_node_attributes(g, "role")
    for n in g.nodes:
        if not isinstance(n, str):
            p.add(f"nodes.{n}", n, "node names must be strings (cloud, edge<i>, client<k>, ...)")
        elif roles.get(n) not in ("cloud", "edge", "client"):
            p.add(f"nodes.{n}.role", roles.get(n), "expected cloud, edge or client")
    p.raise_if_any()
    clouds = [n for n, r in roles.items() if r == "cloud"]
    if len(clouds) != 1 or clouds[0] != "cloud":
        p.add("nodes", clouds, "a topology needs exactly one cloud, named 'cloud'")
        p.raise_if_any()
    if not any(r == "client" for r in roles.values()):
        p.add("nodes", None, "a topology needs at least one client")
    has_agg_child = {g.nodes[n].get("parent") for n, r in roles.items()
                     if r == "edge" and isinstance(g.nodes[n].get("parent"), str)}
    for n, role in roles.items():
        if role == "cloud":
            continue
        parent = g.nodes[n].get("parent")
        if not isinstance(parent, str) or parent not in g:
            p.add(f"nodes.{n}.parent", parent, "no such node: every node needs a path to the cloud")
            continue
        if role == "client" and roles.get(parent) != "edge":
            p.add(f"nodes.{n}.parent", parent, "a client must hang under an edge (aggregator)")
            continue
        if role == "client" and parent in has_agg_child:
            p.add(f"nodes.{n}.parent", parent,
                  "clients must hang under bottom-tier aggregators (this one has aggregator children)")
        if role == "edge" and roles.get(parent) not in ("cloud", "edge"):
            p.add(f"nodes.{n}.parent", parent, "an aggregator must hang under the cloud or another")
            continue
        for a, b in ((n, parent), (parent, n)):
            if not g.has_edge(a, b):
                p.add(f"links.{a}->{b}", None, "missing link (both directions are needed)")
                continue
            attrs = g.edges[a, b]
            for key in ("latency_s", "bandwidth_Bps"):
                v = attrs.get(key)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                    p.add(f"links.{a}->{b}.{key}", v, "expected a finite number")
                elif key == "latency_s" and not 0 <= v <= MAX_LATENCY_S:
                    p.add(f"links.{a}->{b}.{key}", v, f"must be in [0, {MAX_LATENCY_S:g}] s")
                elif key == "bandwidth_Bps" and v < MIN_BANDWIDTH_BPS:
                    p.add(f"links.{a}->{b}.{key}", v, "must be > 0" if v <= 0 else
                          f"must be >= {MIN_BANDWIDTH_BPS:g} B/s")
        _check_powers(g, n, parent, p)
        f = g.nodes[n].get("flops")
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not np.isfinite(f) or f <= 0:
            p.add(f"nodes.{n}.flops", f, "must be a finite number > 0")
        elif f < MIN_FLOPS:
            p.add(f"nodes.{n}.flops", f, f"must be >= {MIN_FLOPS:g} FLOP/s")
    for a, b in g.edges:        # links only join a node and its parent: the graph is a tree
        if g.nodes[a].get("parent") != b and g.nodes[b].get("parent") != a:
            p.add(f"links.{a}->{b}", NO_VALUE, "a link must join a node and its parent "
                  "(the topology must be a tree)")
    p.raise_if_any()
    # every parent chain must reach the cloud without a cycle
    for n in g.nodes:
        seen, cur = set(), n
        while cur != "cloud":
            if cur in seen:
                raise ScenarioError.one(file, f"nodes.{n}.parent", g.nodes[n].get("parent"),
                                        "parent links form a cycle: not a tree")
            seen.add(cur)
            cur = g.nodes[cur]["parent"]
    depths = {}
    for c in (n for n, r in roles.items() if r == "client"):
        k, cur = 0, c
        while cur != "cloud":
            cur, k = g.nodes[cur]["parent"], k + 1
        depths[c] = k
    if depths and max(depths.values()) > 100:
        raise ScenarioError.one(file, "nodes", max(depths.values()),
                                "a tree deeper than 100 tiers (resource guard)")
    if len(set(depths.values())) > 1:
        raise ScenarioError.one(file, "nodes", sorted(set(depths.values())),
                                "every client must be at the same depth below the cloud")
