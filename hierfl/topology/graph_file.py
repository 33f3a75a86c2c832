"""Graph files: networkx node-link JSON or GraphML, read into a DiGraph for
`Topology.from_graph` (graph.py), refusing what networkx would read silently wrong: a node or
link listed twice (its last attributes kept), a JSON NaN / Infinity, GraphML with a DOCTYPE or
entities (expansion, external entities). Every error names the file."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import networkx as nx

from ..config.errors import ScenarioError
from ..config.limits import MAX_BYTES


def read_graph_file(path: str) -> nx.DiGraph:
    """networkx node-link JSON or GraphML, with the node and link attributes above."""
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "graph", path, "graph file not found")
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
            _first_twice(path, *_graphml_keys(head))
        else:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh, parse_constant=_no_constant)
            if not isinstance(data, dict):
                raise ValueError("node-link JSON is a mapping with nodes: and links:")
            key = "links" if "links" in data else "edges"
            g = nx.node_link_graph(data, directed=True, multigraph=False, edges=key)
            _no_duplicates(path, data.get("nodes") or [], data.get(key) or [], g)
    except RecursionError:
        raise ScenarioError.one(path, "graph", path, "cannot read graph: nested too deeply") \
            from None
    except SyntaxError as exc:      # xml ParseError: bad XML, entities (blocked by expat)
        raise ScenarioError.one(path, "graph", path, f"cannot read GraphML: {exc} (entity "
                                "declarations are not allowed)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, nx.NetworkXError) as exc:
        raise ScenarioError.one(path, "graph", path, f"cannot read graph: {exc}") from None
    return nx.DiGraph(g)


def _no_duplicates(path: str, nodes: list, links: list, g: nx.DiGraph) -> None:
    """A node or link listed twice was collapsed into its last attributes, silently: refused."""
    ids = [f"nodes.{x.get('id')}" for x in nodes if isinstance(x, dict)]
    ids += [f"links.{x.get('source')}->{x.get('target')}" for x in links if isinstance(x, dict)
            and len(links) != g.number_of_edges()]
    _first_twice(path, ids)


def _graphml_keys(head: bytes) -> tuple[list[str]]:
    """GraphML's nodes and edges as _no_duplicates keys (networkx merges a node given twice
    and makes a multigraph of an edge given twice, which DiGraph() then collapses)."""
    keys = []
    undirected = False
    for el in ET.fromstring(head).iter():      # (no DOCTYPE or entity: checked before)
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "graph":
            undirected = el.get("edgedefault") == "undirected"
        elif tag == "node":
            keys.append(f"nodes.{el.get('id')}")
        elif tag == "edge":         # undirected: a->b and b->a are one link, merged
            ends = (el.get("source"), el.get("target"))
            if None in ends:        # (networkx made a node named 'None' of the missing end)
                raise ValueError(f"a GraphML <edge> needs a source and a target: {ends}")
            a, b = sorted(ends, key=str) if undirected else ends
            keys.append(f"links.{a}->{b}")
    return (keys,)


def _first_twice(path: str, ids: list[str]) -> None:
    seen: set = set()                       # the first key seen twice (its [:4]: node, link)
    dup = next((k for k in ids if k in seen or seen.add(k)), None)
    if dup is not None:
        raise ScenarioError.one(path, dup, "twice", f"a {dup[:4]} is listed twice: keep one")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number (node-link JSON holds finite numbers only)")
