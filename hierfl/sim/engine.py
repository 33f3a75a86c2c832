"""The simulation of one algorithm on the system: cloud, aggregator and client processes (simpy).

The engine decides when and how much; the round runner (exec/round.py) decides what. At the
start of each aggregation round the aggregator hands the whole round's client work to the
runner in one call, then plays out the timing of every message and computation with the steps
each client actually used. No learning maths and no tensors here: models, states and uploads
pass through as opaque handles, with their sizes in bytes.

The engine is split along its sections: this module is the core (processes, clients, the
clock, closing a round computed in closed form); `flat.py` the flat rounds (aggregators relay
every message, or with `edge_preaggregate` and a linear aggregator the bottom tier sends one
weighted partial sum upward; the cloud aggregates the clients); `hier.py` the hierarchical
rounds (every aggregator runs its tier's number of rounds over its children, recursively, then
uploads once); `closed_form.py` the exact scheduling of rounds that need no event loop."""
from __future__ import annotations

import gc
import heapq
import math
from typing import Any, Callable

import numpy as np
import simpy
from simpy.events import NORMAL, URGENT

from .. import seeding
from ..config.errors import ScenarioError
from ..config.schema import AlgorithmEntry, Scenario
from ..topology.graph import Topology
from ..config.asynchrony import ASYNC_POLICIES
from .asynchronous import AsyncRounds
from .closed_form import RoundTiming, spawned
from .failures import Failures
from .energy import unsend
from .flat import FlatRounds
from .hier import HierRounds
from .links import FairLink, Ledger, Link, Links
from .mobility import MobileRounds, Mobility
from .rounds import Collector
from . import tasks
from .tasks import after
from .trace import Trace
from .work import Chosen, ClientRecord, RoundInfo, RoundRunner, Work


__all__ = ["Simulation", "ClientRecord", "RoundInfo", "Work", "Chosen"]


class Simulation(FlatRounds, HierRounds, AsyncRounds, MobileRounds):
    def __init__(self, scenario: Scenario, entry: AlgorithmEntry, topo: Topology,
                 runner: RoundRunner, trace: Trace | None = None,
                 failures: Failures | None = None, link_sharing: str = "fifo",
                 start_time: float = 0.0, mobility: Mobility | None = None):
        self.sc, self.entry, self.topo = scenario, entry, topo
        self.mobility = mobility      # clients moving between edges (sim/mobility.py), or None
        self._parent = topo.parent    # the tree as attached (a copy per round with mobility)
        self.runner = runner
        self.env = simpy.Environment(initial_time=start_time)
        self.inflight = 0         # client / relay processes alive (checkpoints need none)
        self.trace = trace or Trace()
        self.ledger = Ledger.for_levels(topo.levels)    # bytes per link level and tier
        self.failures = failures or Failures.none()
        link_cls = FairLink if link_sharing == "fair" else Link
        self.links = Links(self, link_cls)       # made on first use: O(links used), not O(all)
        self.counts = runner.counts
        self.round = 0
        self._calls: dict[tuple[int, str], int] = {}   # (cloud round, aggregator) -> calls
        self._pos = {kid: i for kids in topo.children.values() for i, kid in enumerate(kids)}
        self.index = {name: k for k, name in enumerate(topo.clients)}   # client name -> id
        f, train = self.failures, scenario.train
        # rounds whose timing depends on nothing but itself are computed in closed form
        self.failures.n_clients = topo.n_clients
        self.round_spec = entry.round_policy(train)        # the cloud tier's round policy
        self.asynchronous = self.round_spec.policy in ASYNC_POLICIES
        if mobility is not None and self.asynchronous:
            raise ScenarioError.one(scenario.file, "mobility", mobility.spec.kind,
                                    f"{entry.label}: mobility with an asynchronous round "
                                    "policy is not supported (synchronous rounds only)")
        if mobility is not None and getattr(entry, "secure_aggregation", None) is not None:
            raise ScenarioError.one(scenario.file, "mobility", mobility.spec.kind,
                                    f"{entry.label}: secure aggregation's round trips run with "
                                    "the client's first edge; with mobility a client may upload "
                                    "elsewhere (not supported: give this entry mobility: "
                                    "{kind: none})")
        self.closed_form = (train.timing == "auto" and not self.asynchronous and link_cls is Link and f.kind not in ("markov", "trace")
                            and f.crash_p <= 0 and not (f.node_down or f.link_down)
                            and self.round_spec.policy == "wait_all"
                            and self.round_spec.timeout_s is None
                            and not (train.edge_preaggregate and runner.linear_aggregate)
                            and mobility is None
                            and getattr(entry, "secure_aggregation", None) is None)
        self.closed_form_rounds = 0
        self.under = topo.leaves_under()     # node -> sorted ids of the clients below it
        self._paths: dict[str, tuple[str, ...]] = {}     # aggregator -> path_up

    @property
    def nonfinite(self) -> dict[int, list[int]]:
        """Round -> clients whose upload was not finite (the runner's numerical health)."""
        return self.runner.nonfinite

    # ------------------------------------------------------------------ helpers
    def select(self, t: int) -> np.ndarray:
        n = self.topo.n_clients
        m = self.sc.train.clients_per_round
        avail = self.failures.available(t, self.env.now, n)
        pool = np.arange(n) if avail is None else np.flatnonzero(avail)
        self.runner.selected_from(len(pool))    # privacy: the round's q is m / this
        m = len(pool) if m == "all" else min(int(m), len(pool))
        if m < len(pool):
            pool = np.sort(seeding.rng(self.sc.seed, "sample", t).choice(pool, m, replace=False))
        return pool

    def spawn(self, *gens) -> None:
        """Start workers that move messages or compute, counted while they live (tasks.py).
        Several at once start one after another at the same instant, as when spawned in a row;
        pass them together only when nothing is scheduled between their creations."""
        if gens:
            tasks.start(self, gens)

    @property
    def quiescent(self) -> bool:
        """No message in flight and no client computing: a round boundary a checkpoint can
        capture exactly (idle links, the clock, the ledger)."""
        return self.inflight == 0

    def send(self, src: str, dst: str, nbytes: float):
        """Generator (use with `yield from`): the arrival time, or None if the message was lost."""
        return self.links[src, dst].send(nbytes)

    def path_up(self, node: str) -> tuple[str, ...]:
        """An aggregator, its parent, ..., cloud (aggregators do not move: cached)."""
        path = self._paths.get(node)
        if path is None:
            path = self._paths[node] = tuple(self.topo.path_up(node))
        return path

    def tier_rounds(self, node: str) -> int:
        """Aggregation rounds an aggregator runs per round of its parent."""
        rounds = self.entry.tier_rounds
        depth = self.topo.depth[node]
        if rounds:
            return int(rounds[depth - 1])
        bottom = len(self.topo.children[node]) and self.topo.is_client(self.topo.children[node][0])
        return self.entry.edge_rounds if bottom else 1

    # ------------------------------------------------------------------ processes
    def run(self, rounds: int, start_round: int = 1,
            on_round: Callable[[int, RoundInfo], bool] | None = None) -> None:
        """Simulate cloud rounds start_round..rounds; on_round returns False to stop."""
        proc = self.env.process(self._async_cloud(rounds, start_round, on_round)
                                if self.asynchronous else
                                self._cloud(rounds, start_round, on_round))
        if self.mobility is not None:            # handovers go on: stop with the last round
            self.env.process(self._mover(self.env.now))
        # a round allocates many short-lived tuples (events, keys, records): collecting the
        # young generation every 700 allocations cost up to 30% of W5's time
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
        try:
            if self.asynchronous or self.mobility:
                self.env.run(until=proc)
            else:                                # env.run() without a frame per event
                tasks.drain(self.env)
        finally:
            gc.set_threshold(*threshold)

    def _cloud(self, rounds: int, start_round: int, on_round):
        for t in range(start_round, rounds + 1):
            self.round = t
            if self.mobility is not None:
                self._moved()
            self.trace.add(self.env.now, "cloud", "round_start", "", t)
            info = self.open_info = RoundInfo(t)
            if self.runner.hierarchical:
                yield from self._hier_round(t, info)
            else:
                yield from self._flat_round(t, info)
            self.trace.add(self.env.now, "cloud", "round_end", "", t)
            duration = self.sc.train.duration_s
            info.last = duration is not None and self.env.now >= duration or \
                self.runner.exhausted()         # privacy.target_epsilon reached
            stop = on_round is not None and not on_round(t, info) or info.last
            info.recorded = True
            if stop:
                return

    def _mark_active(self, sel: np.ndarray) -> Chosen:
        """The subtree spanned by this round's clients: O(selected x depth), not O(all). Each
        round's processes keep their own: a late broadcast must not see the next round's."""
        amap: dict[str, list[str]] = {}
        seen: set[str] = set()
        parent, pos = self._parent, self._pos
        for k in sel.tolist():
            node = self.topo.clients[k]
            while node != "cloud" and node not in seen:
                seen.add(node)
                amap.setdefault(parent[node], []).append(node)
                node = parent[node]
        for kids in amap.values():
            kids.sort(key=pos.__getitem__)
        return Chosen(sel, amap)

    def _client(self, k: int, i: int, parent: str, down_bytes: float, work: Work, relay: bool,
                collector: Collector, preagg=None):
        """Download, compute, upload (relayed to the cloud when `relay`)."""
        rec, name, env = work.recs[i], self.topo.clients[k], self.env
        moving = self.mobility is not None
        got = yield from (self.hop(parent, name, down_bytes, k) if moving else
                          self.links[parent, name].send(down_bytes))
        if got is None:
            return self._fail(collector, k, rec, preagg, counted=not work.drop[i])
        add, record = self.trace.add, self.trace.record
        sa = work.secagg
        if sa is not None and not work.drop[i]:     # the key agreement: before it trains
            sa_hops = (name, parent) if sa.at == "edge" else (name, *self.path_up(parent))
            if (yield from self._exchanges(sa_hops, sa.before[i])) is None:
                return self._fail(collector, k, rec, preagg)
        record((env._now, name, "compute_start", "", rec.steps))
        ctime = float(work.ctime[i])
        f = math.nan if work.crash_at is None else float(work.crash_at[i])   # (_train's)
        crash = None if f != f else f * ctime
        if crash is not None:
            yield env.timeout(crash)
            add(env._now, name, "crash", "", rec.steps)
            return self._fail(collector, k, rec, preagg, counted=not work.drop[i])
        yield after(env, ctime)
        record((env._now, name, "compute_end", "", rec.steps))
        if work.drop[i]:
            return None
        if not self.failures.client_up(k, env._now):
            add(env._now, name, "offline", "", 0)
            return self._fail(collector, k, rec, preagg)
        t_up, nbytes = env._now, float(work.up_bytes[i])
        hops = (name, parent) if (not relay or preagg is not None) else \
            (name, *self.path_up(self.attached(k) if moving else parent))  # moving: its edge now
        if moving:
            rec.edge = hops[1]
        for j in range(len(hops) - 1):
            a, b = hops[j], hops[j + 1]
            sent = yield from (self.hop(a, b, nbytes, k) if moving and not j else
                               self.links[a, b].send(nbytes))
            if sent is None:                                   # lost: the link counted this hop
                self.ledger.wasted += nbytes * j               # the hops before it are wasted too
                return self._fail(collector, k, rec, preagg)
        if sa is not None and (yield from self._exchanges(sa_hops, sa.after[i])) is None:
            return self._fail(collector, k, rec, preagg)          # lost while unmasking
        target = preagg.collector if preagg is not None else collector
        if target.arrive(k):
            rec.upload_s = env._now - t_up
        else:               # late: no aggregator uses it (upload_s stays empty, as when
            rec.dropped = True      # it arrives after the round's rows were written)
            self.ledger.wasted += nbytes * (len(hops) - 1)
        return None

    def _exchanges(self, hops: tuple[str, ...], trips):
        """Secure aggregation's round trips of one client with the protocol's server along
        `hops` (client first): each (bytes up, bytes down, up first) sends its bytes up the
        path and the answer down it, in that order or the other; None where a message is
        lost (the ledger counts what was sent)."""
        ups = list(zip(hops[:-1], hops[1:]))
        downs = list(zip(hops[:0:-1], hops[-2::-1]))
        for up, down, up_first in trips:
            legs = ((ups, up), (downs, down)) if up_first else ((downs, down), (ups, up))
            for pairs, nbytes in legs:
                for a, b in pairs:
                    if (yield from self.links[a, b].send(nbytes)) is None:
                        return None
        return True

    @staticmethod
    def _mark_unused(work: Work, arrived: np.ndarray) -> None:
        """At a round's close: participants whose update was not aggregated are dropped."""
        used = set(arrived.tolist())
        for rec in work.recs:
            if rec.client not in used:
                rec.dropped = True

    def _records_of(self, info: RoundInfo) -> list[ClientRecord]:
        """Where an edge round's records go: its cloud round's, or, when that round was
        written already (an edge that does not report, or is late), the late records of the
        round then open (written with its clients.csv rows and energy)."""
        return self.open_info.late if info.recorded else info.clients

    def _fail(self, collector: Collector, k: int, rec: ClientRecord, preagg,
              counted: bool = True) -> None:
        """The client's update is lost: no achieved gamma is claimed for it. `counted`: the
        round expects its update (a dropped straggler's was never expected: its collector
        counts only the others, so its crash must not count towards closing the round)."""
        rec.failed = True
        rec.gamma = float("nan")
        unsend(rec, self.topo)      # settled already (its aggregator closed): no upload now
        if counted:
            (preagg.collector if preagg is not None else collector).fail(k)
        return None

    # ------------------------------------------------------------------ closed-form rounds
    def _apply(self, timing: RoundTiming) -> None:
        """Commit a closed-form round (the links' reservations are already made): trace and
        ledger; events after the round's close (a dropped client still computing) become
        simpy events at their exact times, in flight, so the next round plays through the
        event loop and interleaves with them as it would have. Call after creating the
        round's closing event (the spilled events come after it at equal times)."""
        self.closed_form_rounds += 1
        self.trace.extend(timing.events)
        add = self.ledger.add
        for link, nbytes in timing.sends:
            add(link.tier, link.direction, nbytes)
        later: dict = {}
        for key, events, creator in timing.spill:
            if creator is None:
                self._later(key, events, later)
            else:                           # created when its creator is processed
                later.setdefault(creator, []).append((key, events))

    def _later(self, key: tuple, events: list, later: dict) -> None:
        """A spilled event at its exact time, counted in flight; it writes its trace events and
        creates the spilled events its processing created."""
        self.inflight += 1

        def land(_):
            for event, link in events:
                self.trace.add(*event)
                if link is not None:
                    self.ledger.add(link.tier, link.direction, event[4])
            for child in later.pop(key, []):
                self._later(*child, later)
            self.inflight -= 1

        self._at(key[0], URGENT if spawned(key) else NORMAL).callbacks.append(land)

    def _train(self, t: int, r: int, sel: np.ndarray, start: Any,
               silent: np.ndarray | None = None) -> Work:
        """runner.train, told which clients will crash (failures.crashes, drawn now): their
        state (personal models, control variates, residuals) is left as it was, as a client
        that never finished its steps leaves it; the Work carries when they crash. Every
        training the event loop times comes through here (the closed form's batched edge
        calls run only without crashes)."""
        # keyed by the cloud round, or by the job under an asynchronous cloud (t: its
        # number; keyed by version, every job of a client in one version crashed alike)
        crash = self.failures.crashes(t if self.asynchronous else self.round, r, sel)
        doomed = None if crash is None else ~np.isnan(crash)
        work = self.runner.train(t, r, sel, start, silent, doomed=doomed)
        work.crash_at = crash
        return work

    def _empty_round(self):
        """Nobody available: an empty round. Where availability changes in time (markov,
        trace) it lasts until the next change, when a client may be back; at no time it left
        the clock, and so availability, where it was: every later round empty."""
        nxt = self.failures.next_change(self.env.now)
        if nxt is not None and nxt > self.env.now:
            yield self._at(nxt)

    def _at(self, time: float, priority: int = NORMAL) -> simpy.Event:
        """An event at exactly `time` (a timeout of `time - now` may round to another double)."""
        ev = self.env.event()
        ev._ok, ev._value = True, None
        heapq.heappush(self.env._queue, (time, priority, next(self.env._eid), ev))
        return ev
