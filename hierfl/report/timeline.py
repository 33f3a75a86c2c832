"""The timeline of one cloud round, from OUT/<label>/trace.csv: per node, when it receives
(download), computes and sends (upload); the rest of the round it is idle.

The trace has (time_s, node, kind, peer, value) rows. A transfer is a `send` at the source (peer =
destination, value = bytes) followed by a `recv` at the destination (peer = source, same bytes);
a recv (or a `lost`: the transfer ends there) is paired with the earliest unpaired send of the
same link and size. Clients are the nodes that compute (or leaves two hops or more below the
cloud); the cloud is the node that starts rounds; aggregators are the rest, ordered by hops from
the cloud. A `handover` (mobility) is kept as (time, client, "from->to")."""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..outputs import Event, read_round


class Bar(NamedTuple):       # a tuple: a W9 round makes ~10^5 of them
    node: str
    kind: str          # "download" | "compute" | "upload"
    start: float
    end: float
    peer: str = ""


@dataclass
class Timeline:
    round: int
    start: float
    end: float
    bars: list[Bar]
    nodes: list[str]            # rows, top to bottom: cloud, aggregators by depth, clients
    clients: set[str]
    marks: list[tuple[float, str]]   # (time, node) of aggregations
    in_flight: int = 0          # sends with no recv before the round ended
    handovers: list[tuple[float, str, str]] = field(default_factory=list)  # (time, client,
    #                                                  "from->to"): mobility (sim/mobility.py)


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def build(events: list[Event], round_: int) -> Timeline:
    """Bars of one round's events (see the module docstring for the pairing rule)."""
    if not events:
        return Timeline(round_, 0.0, 0.0, [], [], set(), [])
    t0 = min(e[0] for e in events if e[2] == "round_start") if any(
        e[2] == "round_start" for e in events) else events[0][0]
    t1 = max(e[0] for e in events)
    root = next((e[1] for e in events if e[2] == "round_start"), "cloud")
    clients = {e[1] for e in events if e[2] in ("compute_start", "compute_end")}
    pending: dict[tuple[str, str, float], deque[float]] = {}
    bars: list[Bar] = []
    add = bars.append
    open_compute: dict[str, float] = {}
    marks: list[tuple[float, str]] = []
    handovers: list[tuple[float, str, str]] = []
    adjacency: dict[str, set[str]] = {}
    for time, node, kind, peer, value in events:
        if kind == "send":
            q = pending.get((node, peer, value))
            if q is None:
                q = pending[(node, peer, value)] = deque()
                adjacency.setdefault(node, set()).add(peer)
                adjacency.setdefault(peer, set()).add(node)
            q.append(time)
        elif kind == "recv" or kind == "lost":      # a lost transfer ends where it was lost
            q = pending.get((peer, node, value))
            if q:
                start = q.popleft()
                add(Bar(node, "download", start, time, peer))
                add(Bar(peer, "upload", start, time, node))
        elif kind == "compute_start":
            open_compute[node] = time
        elif kind == "compute_end" and node in open_compute:
            add(Bar(node, "compute", open_compute.pop(node), time))
        elif kind == "aggregate":
            marks.append((time, node))
        elif kind == "handover":
            handovers.append((time, node, peer))
            clients.add(node)
    in_flight = 0
    for (src, dst, _), starts in pending.items():
        for s in starts:       # still on the wire when the round closed: drawn to the end
            in_flight += 1
            bars.append(Bar(dst, "download", s, t1, src))
            bars.append(Bar(src, "upload", s, t1, dst))
    for node, s in open_compute.items():
        bars.append(Bar(node, "compute", s, t1))
    # rows: root, aggregators by hops from the root, then clients grouped under their parent;
    # a client is a node that computes, or a leaf two or more hops below the root
    depth = {root: 0}
    frontier = [root]
    while frontier:
        nxt = []
        for n in frontier:
            for m in sorted(adjacency.get(n, ()), key=_natural):
                if m not in depth:
                    depth[m] = depth[n] + 1
                    nxt.append(m)
        frontier = nxt
    clients |= {n for n, d in depth.items() if d >= 2 and len(adjacency.get(n, ())) == 1}
    aggs = sorted((n for n in depth if n != root and n not in clients),
                  key=lambda n: (depth[n], _natural(n)))
    order = {a: i for i, a in enumerate(aggs)}
    parent_of = {c: min((p for p in adjacency.get(c, ()) if p in order),
                        key=lambda p: (-depth[p], _natural(p)), default="") for c in clients}
    cl = sorted(clients, key=lambda c: (order.get(parent_of[c], -1), _natural(c)))
    nodes = [root, *aggs, *cl]
    return Timeline(round_, t0, t1, bars, nodes, clients, marks, in_flight, handovers)


def load(folder: str, round_: int) -> Timeline | None:
    p = os.path.join(folder, "trace.csv")
    if not os.path.isfile(p):
        return None
    ev = read_round(p, round_)
    return build(ev, round_) if ev else None


def busy_fraction(tl: Timeline, node: str, kind: str) -> float:
    """Share of the round during which `node` does `kind` (overlapping bars merged)."""
    span = tl.end - tl.start
    if span <= 0:
        return 0.0
    iv = sorted((b.start, b.end) for b in tl.bars if b.node == node and b.kind == kind)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total / span
