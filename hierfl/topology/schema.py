"""Topology file keys (a tree: cloud <- edges <- clients)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..scenario.fields import all_of, at_most, positive, spec
from ..scenario.schema import Dist


@dataclass(frozen=True)
class LinkSpec:
    latency_s: Dist = spec(0.0, "one-way latency in seconds")
    bandwidth_Bps: Dist = spec(1.25e8, "bandwidth in bytes per second (both directions)")
    uplink_Bps: Dist | None = spec(None, "upward bandwidth, if different (bytes/s)")
    downlink_Bps: Dist | None = spec(None, "downward bandwidth, if different (bytes/s)")


@dataclass(frozen=True)
class CloudSpec:
    compute_flops: Dist = spec(1e12, "FLOP/s (aggregation is free in this version)")


@dataclass(frozen=True)
class EdgesSpec:
    count: int = spec(1, "number of edge servers", check=all_of(positive, at_most(1e6)))
    link: LinkSpec = spec(default_factory=LinkSpec, doc="each edge <-> cloud")
    compute_flops: Dist = spec(1e11, "FLOP/s")


@dataclass(frozen=True)
class ClientsSpec:
    count: int = spec(doc="number of clients", check=all_of(positive, at_most(1e7)))
    assignment: Literal["round_robin", "random"] | list[list[int]] = spec(
        "round_robin", "client -> edge: round_robin, random, or one list of client ids per edge")
    compute_flops: Dist = spec(1e9, "device speed, FLOP/s")
    link: LinkSpec = spec(default_factory=LinkSpec, doc="each client <-> its edge")


@dataclass(frozen=True)
class TopologySpec:
    clients: ClientsSpec = spec(doc="clients")
    cloud: CloudSpec = spec(default_factory=CloudSpec, doc="the root")
    edges: EdgesSpec = spec(default_factory=EdgesSpec, doc="edge servers")
