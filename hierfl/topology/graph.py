"""The simulated system as a networkx DiGraph, and the typed view the simulator reads.

Nodes: "cloud", "edge<i>", "client<k>" with attributes role, flops (FLOP/s) and parent.
Links: one DiGraph edge per direction with latency_s and bandwidth_Bps; the upward edge goes
child -> parent. Users may build such a graph in Python and pass it to `Topology.from_graph`."""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from .. import seeding
from ..scenario.errors import Problems, ScenarioError
from .dist import draw
from .schema import LinkSpec, TopologySpec


def _links(link: LinkSpec, seed: int, purpose: str, n: int) -> tuple[np.ndarray, ...]:
    g = seeding.rng(seed, purpose)
    lat = draw(link.latency_s, g, n)
    bw = draw(link.bandwidth_Bps, g, n)
    up = draw(link.uplink_Bps, g, n) if link.uplink_Bps is not None else bw
    down = draw(link.downlink_Bps, g, n) if link.downlink_Bps is not None else bw
    return lat, up, down


def build_graph(spec: TopologySpec, seed: int, file: str = "") -> nx.DiGraph:
    """Draw every attribute from the seed and lay out the tree."""
    n_e, n_c = spec.edges.count, spec.clients.count
    problems = Problems(file)
    if isinstance(spec.clients.assignment, list):
        lists = spec.clients.assignment
        if len(lists) != n_e:
            problems.add("clients.assignment", f"{len(lists)} lists",
                         f"needs one list per edge ({n_e})")
        flat = sorted(c for lst in lists for c in lst)
        if flat != list(range(n_c)):
            problems.add("clients.assignment", lists,
                         f"must list every client id 0..{n_c - 1} exactly once")
        problems.raise_if_any()
        edge_of = np.empty(n_c, int)
        for e, lst in enumerate(lists):
            edge_of[lst] = e
    elif spec.clients.assignment == "random":
        edge_of = seeding.rng(seed, "topology/assignment").integers(0, n_e, n_c)
    else:
        edge_of = np.arange(n_c) % n_e
    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=float(draw(spec.cloud.compute_flops,
                                                       seeding.rng(seed, "topology/cloud"), 1)[0]))
    e_flops = draw(spec.edges.compute_flops, seeding.rng(seed, "topology/edge-flops"), n_e)
    e_lat, e_up, e_down = _links(spec.edges.link, seed, "topology/edge-links", n_e)
    for i in range(n_e):
        name = f"edge{i}"
        g.add_node(name, role="edge", flops=float(e_flops[i]), parent="cloud")
        g.add_edge(name, "cloud", latency_s=float(e_lat[i]), bandwidth_Bps=float(e_up[i]))
        g.add_edge("cloud", name, latency_s=float(e_lat[i]), bandwidth_Bps=float(e_down[i]))
    c_flops = draw(spec.clients.compute_flops, seeding.rng(seed, "topology/client-flops"), n_c)
    c_lat, c_up, c_down = _links(spec.clients.link, seed, "topology/client-links", n_c)
    for k in range(n_c):
        name, parent = f"client{k}", f"edge{edge_of[k]}"
        g.add_node(name, role="client", flops=float(c_flops[k]), parent=parent, index=k)
        g.add_edge(name, parent, latency_s=float(c_lat[k]), bandwidth_Bps=float(c_up[k]))
        g.add_edge(parent, name, latency_s=float(c_lat[k]), bandwidth_Bps=float(c_down[k]))
    return g


@dataclass(frozen=True)
class Topology:
    """Arrays the simulator reads, derived once from a validated graph."""

    graph: nx.DiGraph
    clients: tuple[str, ...]      # client node names, index = client id
    edges: tuple[str, ...]        # edge node names, index = edge id
    edge_of: np.ndarray           # (N,) edge id of each client
    client_flops: np.ndarray      # (N,) FLOP/s

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    def clients_of(self, edge: int) -> np.ndarray:
        return np.flatnonzero(self.edge_of == edge)

    def link(self, src: str, dst: str) -> tuple[float, float]:
        a = self.graph.edges[src, dst]
        return a["latency_s"], a["bandwidth_Bps"]

    @classmethod
    def from_graph(cls, g: nx.DiGraph, file: str = "") -> "Topology":
        validate_graph(g, file)
        edges = sorted((n for n, a in g.nodes(data=True) if a["role"] == "edge"),
                       key=_natural)
        clients = sorted((n for n, a in g.nodes(data=True) if a["role"] == "client"),
                         key=_natural)
        eid = {e: i for i, e in enumerate(edges)}
        edge_of = np.array([eid[g.nodes[c]["parent"]] for c in clients], int)
        flops = np.array([g.nodes[c]["flops"] for c in clients], float)
        return cls(g, tuple(clients), tuple(edges), edge_of, flops)


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def validate_graph(g: nx.DiGraph, file: str = "") -> None:
    """A tree rooted at one cloud; every client reaches it through one edge; sane attributes."""
    p = Problems(file)
    roles = nx.get_node_attributes(g, "role")
    for n in g.nodes:
        if roles.get(n) not in ("cloud", "edge", "client"):
            p.add(f"nodes.{n}.role", roles.get(n), "expected cloud, edge or client")
    p.raise_if_any()
    clouds = [n for n, r in roles.items() if r == "cloud"]
    if len(clouds) != 1:
        p.add("nodes", clouds, "a topology needs exactly one cloud")
        p.raise_if_any()
    if not any(r == "client" for r in roles.values()):
        p.add("nodes", None, "a topology needs at least one client")
    want = {"edge": "cloud", "client": "edge"}
    for n, role in roles.items():
        if role == "cloud":
            continue
        parent = g.nodes[n].get("parent")
        if parent not in g or roles.get(parent) != want[role]:
            p.add(f"nodes.{n}.parent", parent, f"a {role} must hang under a {want[role]}")
            continue
        for a, b in ((n, parent), (parent, n)):
            if not g.has_edge(a, b):
                p.add(f"links.{a}->{b}", None, "missing link (both directions are needed)")
                continue
            attrs = g.edges[a, b]
            for key in ("latency_s", "bandwidth_Bps"):
                v = attrs.get(key)
                if not isinstance(v, (int, float)) or not np.isfinite(v):
                    p.add(f"links.{a}->{b}.{key}", v, "expected a finite number")
                elif key == "latency_s" and v < 0:
                    p.add(f"links.{a}->{b}.{key}", v, "must be >= 0")
                elif key == "bandwidth_Bps" and v <= 0:
                    p.add(f"links.{a}->{b}.{key}", v, "must be > 0")
        f = g.nodes[n].get("flops")
        if not isinstance(f, (int, float)) or not np.isfinite(f) or f <= 0:
            p.add(f"nodes.{n}.flops", f, "must be a finite number > 0")
    p.raise_if_any()
    tree = nx.DiGraph((n, g.nodes[n]["parent"]) for n in g.nodes if roles[n] != "cloud")
    if tree.number_of_nodes() and not nx.is_tree(tree.to_undirected()):
        raise ScenarioError.one(file, "nodes", None, "parent links do not form a tree")
