"""The timing of a round in closed form: the same trace and numbers as the event loop, without it.

When nothing in a round depends on simulated time except the timing itself (FIFO links, no
failures, `wait_all` rounds without timeout, no pre-aggregation, every edge reporting), a round
is a tree of fixed chains: flat, a broadcast down the tree, each client's download, compute and
upload, relayed hop by hop to the cloud; hierarchical, each aggregator's rounds over its
children (the children's training is called where the aggregator's process would call it),
then its upload. Its timing is then a pure function of the start time: a FIFO link is
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

from .closed_arrays import two_tier
from .edge_plan import plan_round
from .energy import settle

URGENT, NORMAL = 0, 1          # simpy.events.URGENT / NORMAL
_FIRST = itemgetter(0)
_EVENT = itemgetter(3)

# A key is (time, rest): rest = (priority, key of the creating event, creation index) for a
# timeout, the creator's rest + (generation, spawn path) for a spawned process. Comparing
# (time, rest) pairs is comparing the flat tuples; keeping the time apart lets list.sort use
# its float fast path on the first element of every entry (time, rest, index, event, link).


def _after(t: float, key: tuple) -> tuple:
    """A timeout firing at t, created while processing `key`."""
    return (t, (NORMAL, key, 0))


def _spawn(key: tuple, gen: int, path: tuple) -> tuple:
    """A process started while processing `key` (an URGENT event at the same instant)."""
    return (key[0], key[1] + (gen, path))


@dataclass
class RoundTiming:
    """What the event loop would have produced for one round."""

    end: float                                   # when the cloud's round closes
    arrived: list = field(default_factory=list)  # at the cloud, in order of arrival
    events: list = field(default_factory=list)   # trace events up to the close, in order
    sends: list = field(default_factory=list)    # (link, bytes) of every transfer, in order
    spill: list = field(default_factory=list)    # after the close (a dropped client still
    #                   downloading or computing): [(key, [(event, link)], creator key | None)]
    uploads: dict = field(default_factory=dict)  # hierarchical: child -> its upload
    records: list = field(default_factory=list)  # hierarchical: ClientRecords in close order


class _Round:
    def __init__(self):
        self.out: list = []          # (time, rest of key, index, event, link | None)

    def hop(self, link, now: float, key: tuple, sub: int, nbytes: float):
        """Link.send started while processing `key` at `now`, after `sub` trace events of that
        processing: records send and recv, returns (arrival time, arrival key)."""
        busy = link.busy_until
        start = now if busy <= now else busy
        tx = nbytes / link.bandwidth
        link.busy_until = start + tx
        if start > now:                          # queued: a timeout until the wire is free
            now = now + (start - now)
            key, sub = (now, (NORMAL, key, 0)), 0
        arrive = now + (tx + link.latency)
        akey = (arrive, (NORMAL, key, 0))        # _after, inlined (the hot path)
        self.out += ((now, key[1], sub, (now, link.src, "send", link.dst, nbytes), link),
                     (arrive, akey[1], 0, (arrive, link.dst, "recv", link.src, nbytes), None))
        return arrive, akey

    def client(self, links, parent: str, name: str, t: float, init: tuple, down: float,
               ctime: float, steps: int, drop: bool, up: float):
        """A client process started at `t` (key `init`): download, compute and, unless
        dropped, upload to its parent. Returns (arrival key, arrival time, compute end)."""
        got, dkey = self.hop(links[parent, name], t, init, 0, down)
        done = got + ctime
        ekey = (done, (NORMAL, dkey, 0))
        self.out += ((got, dkey[1], 1, (got, name, "compute_start", "", steps), None),
                     (done, ekey[1], 0, (done, name, "compute_end", "", steps), None))
        if drop:
            return None
        arrive, akey = self.hop(links[name, parent], done, ekey, 1, up)
        return akey, arrive, done

    def close(self, timing: RoundTiming, closed: tuple) -> RoundTiming:
        """Order everything; what comes after the cloud's `closed` event spills over."""
        out = self.out
        out.sort()                   # by (key, index): unique, so the rest is never compared
        cut = len(out)
        while cut and (out[cut - 1][0], out[cut - 1][1]) > closed:
            cut -= 1
        kept = out if cut == len(out) else out[:cut]
        timing.events = list(map(_EVENT, kept))
        timing.sends = [(e[4], e[3][4]) for e in kept if e[4] is not None]
        timing.spill = _groups(out[cut:])
        return timing


def _groups(entries: list) -> list:
    """Spilled entries grouped by the event whose processing writes them, in order, each with
    its creator's key when the creator spilled too (it must then be created when that one is
    processed, as simpy would: its creation number orders it among later events)."""
    groups: dict = {}
    for t, rest, _, event, link in entries:
        groups.setdefault((t, rest), []).append((event, link))
    out = []
    for key, events in groups.items():
        creator = _creator(key)
        out.append((key, events, creator if creator in groups else None))
    return out


def _creator(key: tuple) -> tuple:
    """The key of the event whose processing created `key`'s event."""
    t, rest = key
    if len(rest) == 3:                                   # a timeout: (NORMAL, creator, index)
        return rest[1]
    gen, path = rest[-2], rest[-1]                       # a spawn: origin + (gen, path)
    return (t, rest[:-2]) if gen == 1 else (t, rest[:-2] + (gen - 1, path[:-1]))


def spawned(key: tuple) -> bool:
    """Is this the start of a process (simpy's URGENT Initialize event)?"""
    return len(key[1]) > 3


def flat_round(sim, chosen, work, down_bytes: float) -> RoundTiming | None:
    """The timing of a flat relayed round started now (training done), or None where the
    event loop is needed (nobody to wait for: the round closes at once)."""
    if work.drop.all():
        return None
    fast = two_tier(sim, chosen, work, down_bytes)     # the common shape, on arrays
    if fast is not None:
        end, arrived, events, sends = fast
        return RoundTiming(end, arrived, events, sends)
    topo, now = sim.topo, sim.env.now
    rnd = _Round()
    links = sim.links
    pos = {int(k): i for i, k in enumerate(chosen.ids)}
    ctime = work.ctime.tolist()
    drop = work.drop.tolist()
    steps = [rec.steps for rec in work.recs]
    up_bytes = work.up_bytes.tolist()
    parent = topo.parent
    depth = topo.depth
    index = sim.index
    # the broadcast: the cloud, then every aggregator when the model arrives, spawns a process
    # per active child; a spawner is (node, time, burst origin, generation, spawn path)
    pending = [("cloud", now, (now, (-1, (), 0)), 0, ())]
    requests: dict[str, list] = {}                # node -> [(time, rest of key, client)]
    t_up: dict[int, float] = {}
    while pending:
        node, t, origin, gen, path = pending.pop()
        t0, rest0 = origin
        for j, kid in enumerate(chosen.active(node)):
            init = (t0, rest0 + (gen + 1, path + (j,)))      # _spawn, inlined (per client)
            k = index.get(kid)
            if k is None:
                arrive, akey = rnd.hop(links[node, kid], t, init, 0, down_bytes)
                pending.append((kid, arrive, akey, 0, ()))
                continue
            i = pos[k]
            got = rnd.client(links, node, kid, t, init, down_bytes, ctime[i], steps[i],
                             drop[i], up_bytes[i])
            if got is not None:
                akey, arrive, t_up[k] = got
                requests.setdefault(node, []).append((arrive, akey[1], k))
    # relays: deepest nodes first, each link serving its requests in the event loop's order
    for d in range(max((depth[n] for n in requests), default=0), 0, -1):
        for node in [n for n in requests if depth[n] == d]:
            reqs = requests.pop(node)
            reqs.sort()                                  # by the requests' keys
            up = parent[node]
            link = links[node, up]
            for t, rest, k in reqs:
                arrive, nkey = rnd.hop(link, t, (t, rest), 1, up_bytes[pos[k]])
                requests.setdefault(up, []).append((arrive, nkey[1], k))
    arrivals = requests.pop("cloud")                   # (time, rest of key, client)
    arrivals.sort()
    end, rest, _ = arrivals[-1]
    for t, _, k in arrivals:                       # as _client: arrival - compute end
        work.recs[pos[k]].upload_s = t - t_up[k]
    return rnd.close(RoundTiming(end, [k for _, _, k in arrivals]), _after(end, (end, rest)))


def hier_round(sim, t: int, chosen, kids: list[str], model, down: float) -> RoundTiming:
    """A hierarchical round started now: every child of the cloud runs its aggregator rounds
    (training included) and uploads. The caller has checked that every child reports."""
    now = sim.env.now
    rnd = _Round()
    plan = plan_round(sim, t, chosen, kids, model)       # the learning, batched, or None
    origin = (now, (-1, (), 0))                          # the cloud's processing
    closes: list = []                                    # (close key, ClientRecords)
    arrivals = []
    uploads = {}
    for j, kid in enumerate(kids):
        arrive, akey = rnd.hop(sim.links["cloud", kid], now, _spawn(origin, 1, (j,)), 0, down)
        (msg, nbytes), key, at, _ = _aggregator(sim, rnd, kid, t, chosen, model, akey,
                                                arrive, closes, plan)
        got, rkey = rnd.hop(sim.links[kid, "cloud"], at, key, 1, nbytes)
        arrivals.append((rkey, got, kid))
        uploads[kid] = msg
    arrivals.sort(key=_FIRST)
    last_key, end, _ = arrivals[-1]
    closes.sort(key=_FIRST)
    timing = RoundTiming(end, [n for _, _, n in arrivals], uploads=uploads,
                         records=[rec for _, recs in closes for rec in recs])
    return rnd.close(timing, _after(end, last_key))


def _aggregator(sim, rnd: _Round, node: str, t: int, chosen, model, key: tuple, now: float,
                closes: list, plan=None):
    """HierRounds._aggregator from the processing `key` (the broadcast's arrival) at `now`,
    with the same learning steps (edge_train, edge_close, tier_close), or their results
    replayed from `plan` (sim/edge_plan.py): returns ((upload, its bytes), key and time of
    the processing that sends it, the clients whose updates the upload aggregates)."""
    runner = sim.runner
    es = runner.edge_start(model) if plan is None else None
    kids = chosen.active(node)
    bottom = sim.topo.is_client(kids[0])
    links = sim.links
    mine: set[int] = set()
    for _ in range(sim.tier_rounds(node)):
        if plan is None:
            start, db = runner.edge_model(es)
        elif not bottom:
            start, db = None, plan.downs[node].popleft()
        if bottom:
            opened = now
            if plan is None:
                work = sim.edge_train(node, t, kids, start)
            else:
                work, db = plan.work(sim, t, node)
            ctime, drop, up = work.ctime.tolist(), work.drop.tolist(), work.up_bytes.tolist()
            arrivals = []
            for j, k in enumerate(work.sel.tolist()):
                rec = work.recs[j]
                got = rnd.client(links, node, sim.topo.clients[k], now, _spawn(key, 1, (j,)), db,
                                 ctime[j], rec.steps, drop[j], up[j])
                if got is not None:
                    arrivals.append(got + (k, rec))
            if arrivals:
                arrivals.sort(key=_FIRST)
                for _, arrive, done, _, rec in arrivals:
                    rec.upload_s = arrive - done
                last_key, now = arrivals[-1][0], arrivals[-1][1]
                key = _after(now, last_key)               # the collector closes
            else:                                         # closes at once, before the spawns
                key = _after(now, key)
            settle(work.recs, work.drop, work.up_bytes, db, opened, now, sim.topo)
            if plan is None:
                es = sim.edge_close(t, es, work, [a[3] for a in arrivals])
            closes.append((key, work.recs))
            mine.update(a[3] for a in arrivals)
            n_arrived = len(arrivals)
        else:
            arrivals = []
            ups = {}
            below = {}
            for j, kid in enumerate(kids):
                arrive, akey = rnd.hop(links[node, kid], now, _spawn(key, 1, (j,)), 0, db)
                (msg, nbytes), ckey, at, below[kid] = _aggregator(
                    sim, rnd, kid, t, chosen, start, akey, arrive, closes, plan)
                got, rkey = rnd.hop(links[kid, node], at, ckey, 1, nbytes)
                arrivals.append((rkey, got, kid))
                ups[kid] = msg
                mine.update(below[kid])
            arrivals.sort(key=_FIRST)
            last_key, now = arrivals[-1][0], arrivals[-1][1]
            key = _after(now, last_key)
            if plan is None:
                es = sim.tier_close(t, below, es, kids, [a[2] for a in arrivals], ups, start)
            n_arrived = len(arrivals)
        rnd.out.append((now, key[1], 0, (now, node, "aggregate", "", n_arrived), None))
    return (runner.edge_upload(es) if plan is None else plan.upload(node)), key, now, mine
