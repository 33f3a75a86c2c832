"""Asynchronous aggregation at the cloud (`train.round.policy: fedasync | fedbuff`), flat
algorithms. A mixin of sim.engine.Simulation.

Up to `max_concurrency` clients work at once. A job: the cloud draws a client (the same seeded
stream as synchronous sampling: job j draws from `sample`/j among the available clients not
already working), sends it the current model along its path, the client trains from that model
and uploads along its path; at arrival its update is applied at once (FedAsync, Xie et al. 2019:
x <- (1 - a_s) x + a_s x_k, a_s = alpha s(tau)) or buffered and applied as one weighted mean of
deltas every k arrivals (FedBuff, Nguyen et al. 2022: x <- x + eta sum n_k (x_k - x_start_k) /
sum n_k). tau, the staleness, is the number of server versions between the job's download and its
arrival (clients.csv `staleness`). Each server version is a "round" of metrics.csv (evaluated
every train.eval_every versions); a finished, failed or dropped job frees its slot and a new job
starts. The run ends after train.rounds versions, or with the first version at or after
train.duration_s (no job starts after it; with nothing in flight then, the run ends there); jobs
still in flight at the end are abandoned. A client that is unavailable when it would upload fails
(markov / trace availability); when nobody can be dispatched and nothing is in flight the cloud
waits for the next availability change, or the run ends. Async runs are never quiescent by
themselves: with train.round.drain_every they are made so (sim/async_drain.py), and checkpoints
are written there; without it none is (`--resume` starts them over)."""
from __future__ import annotations

import sys

import numpy as np

from .. import seeding
from ..config.schema import RoundSpec
from .async_drain import AsyncDrain
from .async_edge import AsyncEdges
from .energy import settle
from .fruitless import FruitlessJobs
from .rounds import Collector
from .work import RoundInfo

WAIT_ONE = RoundSpec()


class AsyncRounds(AsyncEdges, AsyncDrain):
    """The asynchronous cloud (uses Simulation's core: spawn, send, _client, failures, ...)."""

    def _async_cloud(self, rounds: int, start_round: int, on_round):
        pol = self.round_spec
        n, m = self.topo.n_clients, self.sc.train.clients_per_round
        self._a = _AsyncState(version=start_round - 1, rounds=rounds, on_round=on_round,
                              concurrency=pol.max_concurrency or (n if m == "all" else int(m)),
                              done=self.env.event(), n_clients=n)
        self._a.info = RoundInfo(start_round)
        if not self._async_restore():       # a resumed run's round_start is in its trace
            self.trace.add(self.env.now, "cloud", "round_start", "", start_round)
        duration = self.sc.train.duration_s
        if duration is not None:
            self.env.process(self._async_deadline(duration))
        self._dispatch()
        yield self._a.done

    def _async_deadline(self, duration: float):
        """At train.duration_s no job starts any more; the run ends with the next server
        version (evaluated), or now if nothing is in flight."""
        yield self.env.timeout(max(duration - self.env.now, 0.0))
        self._a.expired = True
        if not self._a.busy:
            self._async_end()

    def _async_end(self) -> None:
        if not self._a.done.triggered:
            self._a.done.succeed()

    def _dispatch(self) -> None:
        """Start jobs until every slot is taken or nobody is free."""
        a = self._a
        tries = 0
        if a.expired and not a.busy:
            self._async_end()
        if a.draining:                      # sim/async_drain.py
            if not a.busy:
                self._drained()
            return
        if a.fruitless.paused:              # sim/fruitless.py: until things may change
            return
        while not a.done.triggered and not a.expired and len(a.busy) < a.concurrency:
            a.jobs += 1
            avail = self.failures.available(a.jobs, self.env.now, self.topo.n_clients)
            if avail is None and not self.runner.hierarchical:
                if not self._dispatch_any(a.jobs):
                    return
                continue
            up = np.ones(self.topo.n_clients, dtype=bool) if avail is None else avail
            workers = self._free_workers(up)
            if not workers and self.failures.kind == "bernoulli" and tries < 1000:
                tries += 1          # availability is drawn per job: draw again
                continue
            if not workers:
                a.jobs -= 1         # the job number goes to the next worker that can take it
                if not a.busy:
                    self._wait_for_clients()
                return
            rng = seeding.rng(self.sc.seed, "sample", a.jobs)
            w = workers[0] if len(workers) == 1 else \
                workers[int(rng.choice(len(workers), 1, replace=False)[0])]
            a.busy.add(w)
            job = self._hier_job(a.jobs, w, up) if self.runner.hierarchical else \
                self._flat_job(a.jobs, int(w))
            self.spawn(job)

    def _dispatch_any(self, j: int) -> bool:
        """Job j of a flat run where every client is always available: the same draw as
        `_free_workers` (index i of the sorted free clients) in O(busy log busy), not
        O(clients): the i-th client not busy. False when every client is busy."""
        a = self._a
        busy = sorted(a.busy)
        free = self.topo.n_clients - len(busy)
        if free <= 0:
            a.jobs -= 1
            return False
        i = 0 if free == 1 else int(seeding.rng(self.sc.seed, "sample", j).choice(
            free, 1, replace=False)[0])
        for b in busy:
            if b > i:
                break
            i += 1
        a.busy.add(i)
        self.spawn(self._flat_job(j, i))
        return True

    def _free_workers(self, up: np.ndarray) -> list:
        """Flat: the available clients not working; hierarchical: the aggregators under the
        cloud that are not working and have an available client."""
        if not self.runner.hierarchical:
            free = up.copy()
            free[list(self._a.busy)] = False
            return np.flatnonzero(free).tolist()
        return [n for n in self.topo.children["cloud"]
                if n not in self._a.busy and up[self.under[n]].any()]

    def _wait_for_clients(self) -> None:
        """Nobody available and nothing in flight: retry at the next availability change."""
        nxt = self.failures.next_change(self.env.now)
        if nxt is None:
            self._async_end()
            return
        self.env.timeout(nxt - self.env.now).callbacks.append(lambda _: self._dispatch())

    def _flat_job(self, j: int, k: int):
        a, runner = self._a, self.runner
        v0, start, opened = a.version, runner.global_model(), self.env.now
        work = self._train(j, 0, np.array([k], dtype=np.int64), start)
        path = self.topo.path_up(self.topo.clients[k])[::-1]   # cloud ... aggregator, client
        col = Collector(self.env, 0 if work.drop[0] else 1, WAIT_ONE)
        down = runner.down_bytes()
        lost = False
        for src, dst in zip(path[:-2], path[1:-1]):
            if (yield from self.send(src, dst, down)) is None:
                lost = True
                break
        if lost:
            self._fail(col, k, work.recs[0], None)
        else:
            yield from self._client(k, 0, path[-2], down, work, True, col)
        a.busy.discard(k)
        # energy over the job, from its download to its arrival (a hierarchical job's edge
        # rounds settle their own, as in synchronous rounds)
        settle(work.recs, work.drop, work.up_bytes, down, opened, self.env.now, self.topo)
        update = runner.async_update(work) if col.arrived else None
        self._finish(v0, start, work.recs, update, 1)

    def _hier_job(self, j: int, node: str, up: np.ndarray):
        """A top aggregator's job: its rounds over a sample of its available clients, then one
        upload to the cloud (sim/hier.py's aggregator, unchanged)."""
        a, runner = self._a, self.runner
        mine = self.under[node][up[self.under[node]]]
        m, n = self.sc.train.clients_per_round, self.topo.n_clients
        take = len(mine) if m == "all" else min(len(mine), max(1, round(int(m) * len(
            self.under[node]) / n)))
        if take < len(mine):
            top = self.topo.children["cloud"].index(node)
            mine = np.sort(seeding.rng(self.sc.seed, "sample", j, top).choice(
                mine, take, replace=False))
        v0, start = a.version, runner.global_model()
        col = Collector(self.env, 1, WAIT_ONE)
        ups: dict = {}
        got: dict = {}
        info = RoundInfo(j)
        runner.round_selection(j, mine)         # its edges' stragglers drawn over the job's
        yield from self._hier_child("cloud", node, j, self._mark_active(mine), start,
                                    runner.down_bytes(), col, ups, info, True, got)
        a.busy.discard(node)
        update = runner.async_update(None, ups[node], self.weights([node], got)[0]) \
            if col.arrived else None
        self._finish(v0, start, info.clients, update, len(mine), len(got.get(node, ())))

    def _finish(self, v0: int, start, recs: list, update, picked: int,
                reported: int | None = None) -> None:
        """A job is over: its records join the version being built; its update (None: it
        failed or was dropped) is mixed in or buffered; a new job starts."""
        a = self._a
        if a.done.triggered:                           # arrived after the run ended
            return
        for rec in recs:                # (under asynchronous edges: the edge's staleness)
            if rec.staleness != rec.staleness:
                rec.staleness = float(a.version - v0)
            rec.round = a.info.round                   # the version it lands in
        a.info.clients.extend(recs)
        got = (1 if update is not None else 0) if reported is None else reported
        a.info.reported += got
        a.info.failed += picked - got
        if update is not None:
            a.fruitless.updated()
            self._apply_update(update, start, a.version - v0)
        else:
            for rec in recs:
                rec.dropped = rec.dropped or reported is None
            why = a.fruitless.failed(self.env, self.failures, self._dispatch)
            if why is not None:
                f = a.fruitless
                print(f"warning: {f.pauses * f.limit} jobs in a row ended without an update "
                      f"and {why}: the run ends at version {a.version}", file=sys.stderr)
                self._async_end()
                return
            if a.fruitless.paused:          # (its wait's end dispatches)
                return
        self._dispatch()

    def _apply_update(self, update, start, tau: int) -> None:
        a, pol, runner = self._a, self.round_spec, self.runner
        if pol.policy == "fedasync":
            runner.async_mix(update, pol.alpha * pol.staleness.weight(tau))
            self._new_version(1)
            return
        a.buffer.append((update, start, pol.staleness.weight(tau)))
        if len(a.buffer) >= int(pol.k):
            runner.async_buffer(a.buffer, pol.server_lr)
            a.buffer = []
            self._new_version(int(pol.k))

    def _new_version(self, updates: int) -> None:
        a = self._a
        a.version += 1
        info = a.info
        info.selected = info.reported + info.failed
        duration = self.sc.train.duration_s
        info.last = a.version >= a.rounds or (duration is not None and self.env.now >= duration)
        self.trace.add(self.env.now, "cloud", "aggregate", "", updates)
        self.trace.add(self.env.now, "cloud", "round_end", "", a.version)
        go = a.on_round is None or a.on_round(a.version, info)
        if not go or info.last:
            self._async_end()
            return
        self.round = a.version + 1
        self.trace.add(self.env.now, "cloud", "round_start", "", a.version + 1)
        a.info = RoundInfo(a.version + 1)
        drain = self.round_spec.drain_every
        a.draining = a.draining or (bool(drain) and a.version % drain == 0)


class _AsyncState:
    """The asynchronous cloud's bookkeeping during a run."""

    def __init__(self, version: int, rounds: int, on_round, concurrency: int, done,
                 n_clients: int) -> None:
        self.version, self.rounds, self.on_round = version, rounds, on_round
        self.concurrency, self.done = concurrency, done
        self.jobs = 0
        self.expired = False                # train.duration_s has passed
        self.draining = self.quieting = False   # train.round.drain_every (sim/async_drain.py)
        self.busy: set[int] = set()
        self.buffer: list = []
        self.info: RoundInfo | None = None
        self.fruitless = FruitlessJobs(n_clients)  # jobs in a row without an update
