"""Topology file keys: a tree rooted at one cloud, of any depth, declared tier by tier (or with
the `edges:` shorthand, or as an explicit graph file), with device and link profiles, link
sharing, client availability and failures."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .fields import all_of, at_most, non_negative, positive, spec, unit_interval
from .mobility import MobilitySpec
from .schema import Dist


@dataclass(frozen=True)
class LinkSpec:
    latency_s: Dist = spec(0.0, "one-way latency in seconds")
    bandwidth_Bps: Dist = spec(1.25e8, "bandwidth in bytes per second (both directions)")
    uplink_Bps: Dist | None = spec(None, "upward bandwidth, if different (bytes/s)")
    downlink_Bps: Dist | None = spec(None, "downward bandwidth, if different (bytes/s)")
    tx_w: Dist = spec(0.0, "a client's radio power while sending on this link, W (clients' "
                      "links only; 0: not counted)")
    rx_w: Dist = spec(0.0, "a client's radio power while receiving on this link, W (clients' "
                      "links only; 0: not counted)")


@dataclass(frozen=True)
class CloudSpec:
    compute_flops: Dist = spec(1e12, "FLOP/s (aggregation is free in this version)")


@dataclass(frozen=True)
class EdgesSpec:
    count: int = spec(1, "number of edge servers", check=all_of(positive, at_most(1e6)))
    link: LinkSpec = spec(default_factory=LinkSpec, doc="each edge <-> cloud")
    compute_flops: Dist = spec(1e11, "FLOP/s")


@dataclass(frozen=True)
class TierSpec:
    """One tier of aggregators between the cloud and the clients (listed from the top)."""

    count: int = spec(doc="nodes in this tier", check=all_of(positive, at_most(1e6)))
    name: str = spec("edge", "tier name; nodes are <name><i>")
    link: LinkSpec = spec(default_factory=LinkSpec, doc="each node <-> its parent")
    compute_flops: Dist = spec(1e11, "FLOP/s")
    assignment: Literal["round_robin", "random"] | list[list[int]] = spec(
        "round_robin", "node -> parent node of the tier above (lists: one per parent)")


@dataclass(frozen=True)
class ClassShare:
    """A share of the clients with a named device class and link class."""

    fraction: float = spec(doc="share of the clients", check=unit_interval)
    device: str | None = spec(None, "a name under profiles.devices")
    link: str | None = spec(None, "a name under profiles.links")


@dataclass(frozen=True)
class DeviceProfile:
    compute_flops: Dist = spec(doc="FLOP/s")
    power_w: Dist = spec(0.0, "power while computing, W (0: not counted)")
    idle_w: Dist = spec(0.0, "power while waiting inside a round, W (0: not counted)")
    source: str = spec("", "where the numbers come from")


@dataclass(frozen=True)
class Profiles:
    devices: dict[str, DeviceProfile] = spec(default_factory=dict,
                                             doc="name -> {compute_flops, power_w, idle_w, "
                                             "source}")
    links: dict[str, LinkSpec] = spec(default_factory=dict, doc="name -> link attributes")


@dataclass(frozen=True)
class ClientsSpec:
    count: int | None = spec(None, "number of clients (with trace: the file's rows)",
                             check=all_of(positive, at_most(1e7)))
    assignment: Literal["round_robin", "random"] | list[list[int]] = spec(
        "round_robin", "client -> bottom-tier node: round_robin, random, or one list per node")
    compute_flops: Dist = spec(1e9, "device speed, FLOP/s")
    link: LinkSpec = spec(default_factory=LinkSpec, doc="each client <-> its edge")
    power_w: Dist = spec(0.0, "power while computing, W (0: not counted; docs/energy.md)")
    idle_w: Dist = spec(0.0, "power while waiting inside a round, W (0: not counted)")
    mix: list[ClassShare] | None = spec(None, "profile shares (override compute_flops / link)")
    trace: str | None = spec(None, "measured devices and links: CSV of client,compute_flops,"
                             "uplink_Bps,downlink_Bps,latency_s[,device,link], relative to this "
                             "file (instead of compute_flops, link and mix)")

    def __post_init__(self) -> None:
        if self.trace is None and self.count is None:
            raise ValueError("clients need count: (or trace:, a CSV with one row per client)")
        if self.trace is not None:
            drawn = [k for k, d in (("compute_flops", 1e9), ("link", LinkSpec()), ("mix", None))
                     if getattr(self, k) != d]
            if drawn:
                raise ValueError(f"{', '.join(drawn)}: the trace gives every client's device "
                                 "and link (leave them out)")


@dataclass(frozen=True)
class AvailabilitySpec:
    kind: Literal["always", "bernoulli", "markov", "trace"] = spec(
        "always", "client availability model")
    p: float = spec(1.0, "bernoulli: probability a client is available in a round",
                    check=unit_interval)
    mean_on_s: float = spec(60.0, "markov: mean on-period (exponential), seconds", check=positive)
    mean_off_s: float = spec(20.0, "markov: mean off-period (exponential), seconds",
                             check=positive)
    path: str | None = spec(None, "trace: CSV of client,start_s,end_s availability intervals, "
                            "relative to this file")

    def __post_init__(self) -> None:
        given = [k for k, d in (("p", 1.0), ("mean_on_s", 60.0), ("mean_off_s", 20.0),
                                ("path", None)) if getattr(self, k) != d]
        own = {"always": (), "bernoulli": ("p",), "markov": ("mean_on_s", "mean_off_s"),
               "trace": ("path",)}
        extra = [k for k in given if k not in own[self.kind]]
        if extra:
            raise ValueError(f"{', '.join(extra)} does not apply to kind {self.kind!r}"
                             + (f" (it takes {', '.join(own[self.kind])})" if own[self.kind]
                                else ""))
        if self.kind == "trace" and not self.path:
            raise ValueError("kind trace needs path: (a CSV of client,start_s,end_s)")


@dataclass(frozen=True)
class Window:
    start_s: float = spec(doc="start, simulated seconds", check=non_negative)
    end_s: float = spec(doc="end, simulated seconds", check=non_negative)
    node: str | None = spec(None, "node that is down (e.g. edge1)")
    link: list[str] | None = spec(None, "[a, b]: the link between a and b is down (both ways)")

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError("end_s must be >= start_s")
        if (self.node is None) == (self.link is None):
            raise ValueError("give node: or link:, exactly one")
        if self.link is not None and len(self.link) != 2:
            raise ValueError("link: needs two node names")


@dataclass(frozen=True)
class FailureSpec:
    crash_p: float = spec(0.0, "probability a selected client crashes mid-training in a round",
                          check=unit_interval)
    outages: list[Window] = spec(default_factory=list, doc="node or link outage windows")


@dataclass(frozen=True)
class TopologySpec:
    clients: ClientsSpec | None = spec(None, "clients (not with graph:)")
    cloud: CloudSpec = spec(default_factory=CloudSpec, doc="the root")
    edges: EdgesSpec | None = spec(None, "one tier of edge servers (shorthand for tiers:)")
    tiers: list[TierSpec] | None = spec(None, "aggregator tiers, from the top down")
    graph: str | None = spec(None, "explicit graph file (node-link .json or .graphml), "
                             "relative to this file")
    profiles: Profiles = spec(default_factory=Profiles, doc="named device and link classes")
    link_sharing: Literal["fifo", "fair"] = spec(
        "fifo", "fifo: one transfer at a time; fair: bandwidth shared by concurrent transfers")
    availability: AvailabilitySpec = spec(default_factory=AvailabilitySpec,
                                          doc="client availability")
    failures: FailureSpec = spec(default_factory=FailureSpec, doc="crashes and outages")
    mobility: MobilitySpec | None = spec(None, "clients moving between bottom-tier aggregators "
                                         "(config/mobility.py; absent: none)")

    def __post_init__(self) -> None:
        if self.graph is None and self.clients is None:
            raise ValueError("a topology needs clients: (or graph:)")
        if self.edges is not None and self.tiers is not None:
            raise ValueError("give edges: or tiers:, not both")
        if self.graph is not None and (self.edges or self.tiers or self.clients):
            raise ValueError("graph: describes the whole tree; drop edges:/tiers:/clients:")

    @property
    def tier_list(self) -> list[TierSpec]:
        if self.tiers is not None:
            return list(self.tiers)
        e = self.edges or EdgesSpec()
        return [TierSpec(count=e.count, name="edge", link=e.link, compute_flops=e.compute_flops)]
