"""The timing of a flat round in closed form: the same trace as the event loop, without it.

When nothing in a round depends on simulated time except the timing itself (FIFO links, no
failures, a `wait_all` round without timeout, no pre-aggregation), a round is a tree of
fixed chains: broadcast down the tree, each client's download, compute and upload, relayed
hop by hop to the cloud. Its timing is then a pure function of the start time: a FIFO link is
Lindley's recursion (a transfer starts at max(request, link free), holds the wire for
bytes / bandwidth, then propagates for latency), applied to the requests in the order the
event loop would serve them.

That order is what makes the result identical, not merely equivalent. simpy processes the
pending event with the least (time, priority, creation number), and an event is created while
an earlier one is processed. So a timeout gets the key (time, NORMAL, key of the event whose
processing created it, index): among pending events, creation order is the processing order
of their creators. A spawned process starts with an URGENT event at the current instant,
processed after its creator and before anything else pending then; spawns inside spawns run
breadth first (their creation numbers say so). Its key is its creator's burst origin (the
last NORMAL event) extended by (generation, path of spawn indices): a tuple extension sorts
right after its prefix. Comparing keys as tuples then orders events as simpy does: it breaks
ties between simultaneous requests of a link, and it orders the trace (each trace event
carries the key of the event being processed and its index within that processing).
tests/test_fast_paths.py runs both on scenarios built for ties and asserts byte-identical
traces, clients.csv and metrics.

Float arithmetic follows Link.send operation by operation (now + (start - now), then
+ (bytes / bandwidth + latency)), so the times are the same doubles."""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

URGENT, NORMAL = 0, 1          # simpy.events.URGENT / NORMAL


@dataclass
class RoundTiming:
    """What the event loop would have produced for one flat round."""

    end: float                                   # the last arrival at the cloud
    arrived: list[int]                           # clients, in order of arrival at the cloud
    upload_s: dict[int, float]                   # client -> upload seconds (to the cloud)
    events: list = field(default_factory=list)   # trace events, in the event loop's order
    sends: list = field(default_factory=list)    # (link, bytes) of every transfer, in order


class _Round:
    def __init__(self):
        self.saved: list = []        # (link, busy_until before): undone if the round falls back
        self.out: list = []          # (key, index, event, link | None)

    def hop(self, link, now: float, key: tuple, sub: int, nbytes: float):
        """Link.send started while processing `key` at `now`, after `sub` trace events of that
        processing: records send and recv, returns (arrival time, arrival key)."""
        busy = link.busy_until
        self.saved.append((link, busy))
        start = now if busy <= now else busy
        tx = nbytes / link.bandwidth
        link.busy_until = start + tx
        if start > now:                          # queued: a timeout until the wire is free
            now = now + (start - now)
            key, sub = (now, NORMAL, key, 0), 0
        arrive = now + (tx + link.latency)
        akey = (arrive, NORMAL, key, 0)
        self.out.append((key, sub, (now, link.src, "send", link.dst, nbytes), link))
        self.out.append((akey, 0, (arrive, link.dst, "recv", link.src, nbytes), None))
        return arrive, akey

    def undo(self) -> None:
        for link, busy in reversed(self.saved):
            link.busy_until = busy


def flat_round(sim, sel, work, down_bytes: float) -> RoundTiming | None:
    """The timing of a flat relayed round started now, or None where the event loop is needed
    (a dropped client still computing when the round closes, or nobody to wait for)."""
    topo, now = sim.topo, sim.env.now
    rnd = _Round()
    links = sim.links
    out = rnd.out
    pos = {int(k): i for i, k in enumerate(sel)}
    ctime = work.ctime.tolist()
    drop = work.drop.tolist()
    steps = [rec.steps for rec in work.recs]
    up_bytes = work.up_bytes.tolist()
    parent = topo.parent
    depth = topo.depth
    # the broadcast: the cloud spawns _flat_down, which spawns a process per active child;
    # a spawner is (node, time, burst origin, generation, spawn path)
    pending = [("cloud", now, (now, -1, (), 0), 1, (0,))]
    starts = []                                          # (client, parent, time, key)
    while pending:
        node, t, origin, gen, path = pending.pop()
        for j, kid in enumerate(sim._active(node, sel)):
            init = origin + (gen + 1, path + (j,))
            if kid in sim.index:
                starts.append((sim.index[kid], node, t, init))
            else:
                arrive, akey = rnd.hop(links[node, kid], t, init, 0, down_bytes)
                pending.append((kid, arrive, akey, 0, ()))
    # each client: download, compute, upload over its own link
    requests: dict[str, list] = {}                       # node -> [(key, time, client)]
    t_up: dict[int, float] = {}
    dropped_end = []
    for k, node, t, init in starts:
        i = pos[k]
        name = topo.clients[k]
        got, dkey = rnd.hop(links[node, name], t, init, 0, down_bytes)
        out.append((dkey, 1, (got, name, "compute_start", "", steps[i]), None))
        done = got + ctime[i]
        ekey = (done, NORMAL, dkey, 0)
        out.append((ekey, 0, (done, name, "compute_end", "", steps[i]), None))
        if drop[i]:
            dropped_end.append(done)
            continue
        t_up[k] = done
        arrive, akey = rnd.hop(links[name, node], done, ekey, 1, up_bytes[i])
        requests.setdefault(node, []).append((akey, arrive, k))
    # relays: deepest nodes first, each link serving its requests in the event loop's order
    for d in range(max((depth[n] for n in requests), default=0), 0, -1):
        for node in [n for n in requests if depth[n] == d]:
            reqs = requests.pop(node)
            reqs.sort(key=itemgetter(0))
            up = parent[node]
            link = links[node, up]
            for akey, t, k in reqs:
                arrive, nkey = rnd.hop(link, t, akey, 1, up_bytes[pos[k]])
                requests.setdefault(up, []).append((nkey, arrive, k))
    arrivals = requests.pop("cloud", [])               # (key, time, client)
    if not arrivals:
        rnd.undo()
        return None
    arrivals.sort(key=itemgetter(0))
    end = arrivals[-1][1]
    if any(d >= end for d in dropped_end):
        rnd.undo()
        return None
    out.sort()                       # by (key, index): unique, so the rest is never compared
    return RoundTiming(end, [k for _, _, k in arrivals],
                       {k: t - t_up[k] for _, t, k in arrivals},
                       [e[2] for e in out], [(e[3], e[2][4]) for e in out if e[3] is not None])
