"""Asynchronous aggregation at the bottom aggregator tier (`train.edge_round.policy: fedasync |
fedbuff`). A mixin of sim.engine.Simulation (through AsyncRounds), used by sim/hier.py's
`_aggregator` for an edge whose children are clients.

When its parent's round reaches it (a synchronous cloud round, or a job of an asynchronous
cloud), the edge takes the parent's model as its version 0 and runs asynchronous jobs of the
clients sampled under it for that round: up to `max_concurrency` at once (default: all of
them). Job j of the edge draws its client among those that are free and up, from the stream
("edge-job", round, edge, j); the client downloads the edge's current model, trains and
uploads; the edge mixes the update in at once (FedAsync: y <- (1 - a_s) y + a_s y_k) or buffers
it (FedBuff: every k updates y <- y + eta sum n_k s_k (y_k - y_start_k) / sum n_k), through the
algorithm's own edge rule applied to the one resulting model (runner.edge_async_*). Each mix
(FedAsync) or flush (FedBuff) is one edge version; staleness (clients.csv) counts edge
versions between a job's download and its arrival. After `edge_rounds` versions (the
aggregator's tier rounds: HierFAVG's kappa2 read as "edge versions per cloud round") the edge
stops dispatching and uploads its model; jobs still in flight are abandoned (dropped, their
late upload wasted), as the asynchronous cloud abandons its own at the end of a run. With
nobody free and nothing in flight it waits for the next availability change, or uploads what it
has when none will come (a FedBuff buffer short of k is never applied: its clients are dropped,
and an edge that applied no update sends nothing)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import seeding
from ..config.asynchrony import ASYNC_POLICIES
from ..config.schema import RoundSpec
from .energy import settle
from .fruitless import FruitlessJobs
from .rounds import Collector
from .work import RoundInfo

WAIT_ONE = RoundSpec()


class _Edge:
    """One edge's asynchronous period (one round of its parent)."""

    def __init__(self, node: str, t: int, members: list[int], es: Any, versions: int,
                 concurrency: int, info: RoundInfo, done) -> None:
        self.node, self.t, self.members, self.es = node, t, members, es
        self.versions, self.concurrency, self.info, self.done = versions, concurrency, info, done
        self.version = 0
        self.jobs = 0
        self.busy: dict[int, tuple] = {}         # client -> (work, collector, opened, v0, down)
        self.buffer: list = []
        self.waiting: list = []                  # (client, record) of the buffered updates
        self.mine: set[int] = set()              # clients whose update was mixed in
        self.fruitless = FruitlessJobs(len(members))   # jobs in a row without an update


class AsyncEdges:
    """Asynchronous bottom-tier aggregators (uses Simulation's core)."""

    @property
    def async_edges(self) -> bool:
        return self.sc.train.edge_round.policy in ASYNC_POLICIES

    def _async_edge(self, node: str, t: int, kids: list[str], es: Any, info: RoundInfo):
        """The edge's period; returns (its upload, its bytes, the clients it aggregated)."""
        pol = self.sc.train.edge_round
        members = [self.index[c] for c in kids]
        e = _Edge(node, t, members, es, self.tier_rounds(node),
                  pol.max_concurrency or len(members), info, self.env.event())
        self._edge_dispatch(e)
        yield e.done
        self._edge_abandon(e)
        for _, rec in e.waiting:                # buffered, never applied: not aggregated
            rec.dropped = True
        msg, nbytes = self.runner.edge_upload(e.es)
        return msg, nbytes, e.mine

    def _edge_id(self, node: str) -> int:
        ids = self.__dict__.get("_edge_ids")
        if ids is None:
            ids = self._edge_ids = {n: i for i, n in enumerate(self.under)}
        return ids[node]

    def _edge_dispatch(self, e: _Edge) -> None:
        while not e.done.triggered and not e.fruitless.paused and len(e.busy) < e.concurrency:
            now = self.env.now
            free = [k for k in e.members if k not in e.busy and self.failures.client_up(k, now)]
            if not free:
                if not e.busy:
                    self._edge_idle(e)
                return
            k = free[0] if len(free) == 1 else free[int(seeding.rng(
                self.sc.seed, "edge-job", e.t, self._edge_id(e.node), e.jobs).integers(
                len(free)))]
            e.jobs += 1
            e.busy[k] = None                    # taken now; the job fills in its state
            self.spawn(self._edge_job(e, k))

    def _edge_idle(self, e: _Edge) -> None:
        """Nobody up and nothing in flight: retry at the next availability change, or end."""
        nxt = self.failures.next_change(self.env.now)
        if nxt is None:
            e.done.succeed()
            return
        self.env.timeout(nxt - self.env.now).callbacks.append(lambda _: self._edge_dispatch(e))

    def _edge_job(self, e: _Edge, k: int):
        if e.done.triggered:                # the period ended before this job started
            return
        v0, es0 = e.version, e.es
        start, db = self.runner.edge_model(es0)
        opened = self.env.now
        work = self.edge_train(e.node, e.t, [self.topo.clients[k]], start)
        col = Collector(self.env, 0 if work.drop[0] else 1, WAIT_ONE)
        e.busy[k] = (work, col, opened, v0, db)
        yield from self._client(k, 0, e.node, db, work, False, col)
        if e.done.triggered:                # abandoned at the period's end (recorded there)
            return
        del e.busy[k]
        settle(work.recs, work.drop, work.up_bytes, db, opened, self.env.now, self.topo)
        tau = e.version - v0
        self._edge_records(e, work, tau)
        if col.arrived:
            e.fruitless.updated()
            self._edge_apply(e, self.runner.edge_async_update(e.t, es0, work), start, tau,
                             (k, work.recs[0]))
        else:
            work.recs[0].dropped = True
            if e.fruitless.failed(self.env, self.failures, lambda: self._edge_dispatch(e)) \
                    is not None:            # (sim/fruitless.py: the period ends)
                if not e.done.triggered:
                    e.done.succeed()
                return
        self._edge_dispatch(e)

    def _edge_records(self, e: _Edge, work, tau: int) -> None:
        for rec in work.recs:
            rec.staleness = float(tau)
        self._records_of(e.info).extend(work.recs)

    def _edge_apply(self, e: _Edge, update, start, tau: int, sender: tuple) -> None:
        """Mix the update in (FedAsync) or buffer it (FedBuff); its client counts as
        aggregated (e.mine, the edge's weight) once its update is applied: a buffer left
        unapplied when the period ends leaves its clients out (dropped)."""
        pol, runner = self.sc.train.edge_round, self.runner
        if pol.policy == "fedasync":
            e.es = runner.edge_async_mix(e.t, e.es, update, pol.alpha * pol.staleness.weight(tau))
            e.mine.add(sender[0])
            self._edge_version(e, 1)
            return
        e.buffer.append((update, start, pol.staleness.weight(tau)))
        e.waiting.append(sender)
        if len(e.buffer) >= int(pol.k):
            e.es = runner.edge_async_buffer(e.t, e.es, e.buffer, pol.server_lr)
            e.buffer = []
            e.mine.update(k for k, _ in e.waiting)
            e.waiting = []
            self._edge_version(e, int(pol.k))

    def _edge_version(self, e: _Edge, updates: int) -> None:
        e.version += 1
        self.trace.add(self.env.now, e.node, "aggregate", "", updates)
        if e.version >= e.versions and not e.done.triggered:
            e.done.succeed()

    def _edge_abandon(self, e: _Edge) -> None:
        """The period is over: jobs in flight are dropped (a later upload is wasted)."""
        for k, job in sorted(e.busy.items()):
            if job is None:                     # dispatched at this very instant: not started
                continue
            work, col, opened, v0, db = job
            if not col.closed.triggered:
                col.closed.succeed()
            settle(work.recs, work.drop, work.up_bytes, db, opened, self.env.now, self.topo)
            for rec in work.recs:
                rec.dropped = True
            self._edge_records(e, work, e.version - v0)
        e.busy.clear()
