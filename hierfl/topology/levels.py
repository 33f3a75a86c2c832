"""Names of the tiers and of the link levels between them, for the byte ledger's per-level
columns (metrics.csv `bytes_up_<level>`, `bytes_down_<level>`).

Tiers by depth: "cloud" (0), the aggregator tiers' names (a topology's `tiers:` names; for a
graph file, the common stem of the node names of a depth, e.g. edge0, edge1 -> "edge"), and
"client" at the bottom. Where a graph's depth has no single stem, or stems repeat, every
aggregator tier is called tier<d>. A level is the pair of adjacent tiers, lower first:
client_edge, edge_regional, regional_cloud. `edge_cloud` names the legacy sum of every link above
the clients, so on a deeper tree a level that would be called edge_cloud (a top tier named
"edge") is called edge_cloud_level<d> (d: the depth of its lower tier)."""
from __future__ import annotations

from typing import Any


def _stem(name: str) -> str:
    return name.rstrip("0123456789")


def tier_names(g: Any, depth: dict[str, int], client_depth: int) -> tuple[str, ...]:
    """The name of each depth, 0 (cloud) .. client_depth (clients)."""
    names = []
    for d in range(1, client_depth):
        nodes = [n for n, dd in depth.items() if dd == d]
        given = {g.nodes[n].get("tier_name") for n in nodes}
        stems = {_stem(n) for n in nodes}
        name = given.pop() if len(given) == 1 and None not in given else (
            stems.pop() if len(stems) == 1 else "")
        names.append(str(name) if name else "")
    if (len(set(names)) != len(names) or any(not n or n in ("cloud", "client") for n in names)):
        names = [f"tier{d}" for d in range(1, client_depth)]
    return ("cloud", *names, "client")


def level_name(names: tuple[str, ...], lower_depth: int) -> str:
    """The level of the links between depth `lower_depth` and its parent depth."""
    name = f"{names[lower_depth]}_{names[lower_depth - 1]}"
    if name == "edge_cloud" and len(names) > 3:
        name += f"_level{lower_depth}"
    return name
