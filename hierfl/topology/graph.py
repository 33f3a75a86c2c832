"""The simulated system: the typed view the simulator reads (`Topology`), built from a spec's
arrays (build.py; the networkx graph only when asked) or from a networkx DiGraph.

Nodes: "cloud"; aggregators of each tier ("edge<i>", "regional<i>", ...; role "edge", with
`tier` = depth below the cloud, 1 = top); "client<k>" (role "client", `index` k). Every node but
the cloud has `parent` and `flops` (FLOP/s). Links: one DiGraph edge per direction with
latency_s and bandwidth_Bps; the upward edge goes child -> parent. A graph built in Python (or
read from node-link JSON / GraphML) is validated by `Topology.from_graph`; a built spec's arrays
by `build.check_tree`, with the same problems."""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..config.errors import NO_VALUE, Problems, ScenarioError
from .build import CLIENT as CLIENT_ROLE
from .build import CLOUD as CLOUD_ROLE
from .build import (Tree, build_tree, check_tree, flops_problem, link_problems, node_table,
                    to_graph)
from .graph_file import read_graph_file
from .leaves import ClientName, Leaves
from .levels import level_name, tier_names
from .power import power_problems
from ..config.topology import TopologySpec


def build_graph(spec: TopologySpec, seed: int, file: str = "") -> nx.DiGraph:
    """Draw every attribute from the seed and lay out the tree, as a networkx graph (the
    simulator builds the arrays only: `build_topology`)."""
    if spec.graph is not None:
        return read_graph_file(_graph_path(spec, file))
    return to_graph(build_tree(spec, seed, file))


def build_topology(spec: TopologySpec, seed: int, file: str = "") -> "Topology":
    """The validated Topology of a spec: from arrays (its graph is built only when asked), or
    from its graph file."""
    if spec.graph is not None:         # its contents' errors name the graph file
        path = _graph_path(spec, file)
        return Topology.from_graph(read_graph_file(path), path)
    tree = build_tree(spec, seed, file)
    check_tree(tree, file)
    return Topology.from_tree(tree)


def _graph_path(spec: TopologySpec, file: str) -> str:
    assert spec.graph is not None
    return os.path.join(os.path.dirname(os.path.abspath(file)), spec.graph) if file else spec.graph


@dataclass(frozen=True)
class Topology:
    """Arrays and maps the simulator reads, derived once from a validated tree (its arrays,
    `tree`) or graph; `graph`, the networkx view, is built from the arrays when first asked."""

    tree: Tree
    clients: tuple[str, ...]      # client node names, index = client id
    edges: tuple[str, ...]        # bottom-tier aggregators (the clients' parents), index = edge id
    edge_of: np.ndarray           # (N,) edge id of each client
    client_flops: np.ndarray      # (N,) FLOP/s
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)   # cloud 0, top tier 1, ... (built
    #                       trees store the cloud's and aggregators', a client's is looked up)
    n_tiers: int = 1              # aggregator tiers between cloud and clients
    tier_names: tuple[str, ...] = ("cloud", "edge", "client")   # by depth (levels.py)
    device_class: tuple[str, ...] = ()    # (N,) each client's profiles.devices name, or ""
    link_class: tuple[str, ...] = ()      # (N,) each client's profiles.links name, or ""
    client_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (N,)

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def n_nodes(self) -> int:
        return self.tree.n_rows

    def _cached(self, name: str, make):
        value = self.__dict__.get(name)
        if value is None:
            value = make()
            object.__setattr__(self, name, value)
        return value

    @property
    def graph(self) -> nx.DiGraph:
        """The networkx view (built from the arrays on first use)."""
        return self._cached("_graph", lambda: to_graph(self.tree))

    @property
    def parent(self) -> dict[str, str]:
        """Every node but the cloud -> its parent (from the arrays when first asked: a million
        clients' entries take ~1 s, and neither `validate` nor the world's build asks)."""
        def make():
            names = self.tree.names
            return dict(zip(names[1:], map(names.__getitem__, self.tree.parent[1:].tolist())))
        return self._cached("_parent", make)

    @property
    def row_of(self) -> dict[str, int]:
        return self._cached("_row_of", lambda: {n: r for r, n in enumerate(self.tree.names)})

    def link(self, src: str, dst: str) -> tuple[float, float]:
        """(latency, bandwidth) of the link src -> dst; KeyError where there is none."""
        t, rows = self.tree, self.row_of
        r = rows[src]
        if t.parent[r] >= 0 and t.names[t.parent[r]] == dst:
            return float(t.lat_up[r]), float(t.bw_up[r])
        r = rows[dst]
        if t.parent[r] >= 0 and t.names[t.parent[r]] == src:
            return float(t.lat_down[r]), float(t.bw_down[r])
        raise KeyError((src, dst))

    def leaves_under(self) -> dict[str, np.ndarray]:
        """Every node but the clients -> the sorted ids of the clients below it."""
        def make():
            t = self.tree
            n = len(self.client_rows)
            ids = np.arange(n, dtype=np.int64)
            anc = t.parent[self.client_rows]
            owners, members = [], []
            while len(anc) and anc[0] >= 0:         # every client is at the same depth
                owners.append(anc)
                members.append(ids)
                anc = t.parent[anc]
            own = np.concatenate(owners) if owners else np.zeros(0, np.int64)
            mem = np.concatenate(members) if members else np.zeros(0, np.int64)
            order = np.lexsort((mem, own))
            own, mem = own[order], mem[order]
            rows = np.flatnonzero(t.role != CLIENT_ROLE)
            lo = np.searchsorted(own, rows, "left")
            hi = np.searchsorted(own, rows, "right")
            return {t.names[r]: mem[a:b] for r, a, b in zip(rows.tolist(), lo.tolist(),
                                                            hi.tolist())}
        return self._cached("_leaves", make)

    def node_table(self) -> dict[str, list]:
        """Every node below the cloud as columns (summary.json's `nodes`; build.node_table)."""
        return node_table(self.tree, self.client_rows)

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
        return self._cached("_client_set", lambda: frozenset(self.clients))

    @classmethod
    def from_tree(cls, tree: Tree) -> "Topology":
        """From a built spec's arrays (rows laid out by build_tree: clients last, in order)."""
        enabled = gc.isenabled()
        gc.disable()            # millions of names and tuples: no cycles, nothing to collect
        try:
            return cls._from_tree(tree)
        finally:
            if enabled:
                gc.enable()

    @classmethod
    def _from_tree(cls, tree: Tree) -> "Topology":
        t = tree
        names = t.names
        crows = np.flatnonzero(t.role == CLIENT_ROLE)
        c0 = int(crows[0])
        clients = tuple(names[c0:])
        cpar = t.parent[crows]
        used = np.unique(cpar)                       # bottom aggregators that have clients
        edges = tuple(names[r] for r in used.tolist())
        edge_of = np.searchsorted(used, cpar).astype(int)
        is_client = ClientName(names, c0)
        depth = Leaves(is_client, int(t.depth[c0]))    # the clients' depth is not stored
        depth.update(zip(names[:c0], t.depth[:c0].tolist()))
        order = np.argsort(t.parent[1:], kind="stable") + 1
        bounds = np.searchsorted(t.parent[order], np.arange(c0 + 1))
        kids = list(map(names.__getitem__, order.tolist()))     # every node, by its parent
        children = Leaves(is_client)   # a client's children, (), are not stored
        children.update(zip(names[:c0], map(tuple, map(kids.__getitem__, map(
            slice, bounds[:c0].tolist(), bounds[1:c0 + 1].tolist())))))
        n_tiers = int(t.depth[c0]) - 1
        aggs = {names[r]: {"tier_name": t.tier_name[int(t.depth[r])]} for r in range(1, c0)}
        tn = tier_names(_Nodes(aggs), {n: depth[n] for n in aggs}, n_tiers + 1)
        n = len(clients)
        dev = tuple(t.device_class) if t.device_class is not None else ("",) * n
        lnk = tuple(t.link_class) if t.link_class is not None else ("",) * n
        return cls(t, clients, edges, edge_of, t.flops[c0:].copy(), children, depth, n_tiers,
                   tn, dev, lnk, crows.astype(np.int64))

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
        tree = _tree_of_graph(g, roles, parent, depth)
        row = {n: r for r, n in enumerate(tree.names)}
        topo = cls(tree, clients, edges, edge_of, flops, children, depth, n_tiers, names, dev,
                   lnk, np.array([row[c] for c in clients], np.int64))
        object.__setattr__(topo, "_parent", parent)
        object.__setattr__(topo, "_graph", g)
        object.__setattr__(topo, "_row_of", row)
        return topo


class _Nodes:
    """What levels.tier_names reads of a graph (`nodes[n].get("tier_name")`)."""

    def __init__(self, nodes: dict[str, dict]):
        self.nodes = nodes


def _tree_of_graph(g: nx.DiGraph, roles: dict, parent: dict, depth: dict) -> Tree:
    """The arrays of a validated graph (rows in the graph's node order, the cloud first)."""
    names = ["cloud"] + [n for n in g.nodes if n != "cloud"]
    row = {n: r for r, n in enumerate(names)}
    code = {"cloud": CLOUD_ROLE, "edge": 1, "client": CLIENT_ROLE}
    par = [-1] + [row[parent[n]] for n in names[1:]]
    nan = float("nan")
    up = [(nan, nan)] + [(g.edges[n, parent[n]]["latency_s"], g.edges[n, parent[n]][
        "bandwidth_Bps"]) for n in names[1:]]
    down = [(nan, nan)] + [(g.edges[parent[n], n]["latency_s"], g.edges[parent[n], n][
        "bandwidth_Bps"]) for n in names[1:]]
    f64 = np.float64
    return Tree(names, np.array([code[roles[n]] for n in names], np.int8),
                np.array(par, np.int64), np.array([depth[n] for n in names], np.int64),
                np.array([float(g.nodes[n].get("flops", nan)) for n in names], f64),
                np.array([u[0] for u in up], f64), np.array([u[1] for u in up], f64),
                np.array([d[0] for d in down], f64), np.array([d[1] for d in down], f64), {})


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


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
            link_problems(p, a, b, g.edges[a, b])
        flops_problem(p, n, g.nodes[n].get("flops"))
        power_problems(g, n, parent, p)
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
