"""The simulation of one algorithm on the system: cloud, aggregator and client processes (simpy).

The engine decides when and how much; the algorithm (learn/) decides what. At the start of each
aggregation round the aggregator hands the whole round's client work to the executor in one
call, then plays out the timing of every message and computation with the steps each client
actually used. Learning maths never happens here.

Flat algorithms: aggregators relay every message (or, with `edge_preaggregate` and a linear
aggregator, the bottom tier sends one weighted partial sum upward); the cloud aggregates the
clients. Hierarchical algorithms: every aggregator runs its tier's number of rounds over its
children, recursively, then uploads once."""
from __future__ import annotations

import gc
import heapq
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import simpy
import torch
from simpy.events import NORMAL, URGENT

from .. import seeding
from ..algorithms.base import Algorithm, RoundCtx, Upload
from ..data.federated import FederatedData
from ..exec.local import Executor
from ..learn.batches import Batch, full_plan, minibatch_plan, steps_for
from ..learn.solver import SolveResult
from ..config.schema import AlgorithmEntry, Scenario
from ..topology.graph import Topology
from .closed_form import RoundTiming, flat_round, hier_round, spawned
from .failures import Failures
from .links import FairLink, Ledger, Link
from .messages import message_bytes, row_bytes, row_encodings
from .rounds import Collector
from .stragglers import plan_budgets
from .trace import Trace


@dataclass(slots=True)
class ClientRecord:
    """Per client per aggregation round (clients.csv)."""

    round: int
    edge_round: int
    client: int
    steps: int
    budget: int
    compute_s: float
    upload_s: float
    dropped: bool
    straggler: bool
    gamma: float
    failed: bool = False
    up_bytes: float = float("nan")   # the encoded size of this client's upload
    encoding: str = "dense"          # the encoding it used (sim/messages: dense|sparse|bitmap)


@dataclass
class RoundInfo:
    round: int
    selected: int = 0
    reported: int = 0
    failed: int = 0
    clients: list[ClientRecord] = field(default_factory=list)


@dataclass
class Work:
    """One executor call's outcome, as the timing side needs it."""

    sel: np.ndarray
    up: Upload
    res: SolveResult
    ctime: np.ndarray
    up_bytes: np.ndarray
    recs: list[ClientRecord]
    drop: np.ndarray          # computes, uploads nothing (dropped straggler or silent trainee)
    r: int = 0                # the aggregation round (edge round) of the call


class Simulation:
    def __init__(self, scenario: Scenario, entry: AlgorithmEntry, topo: Topology,
                 data: FederatedData, algo: Algorithm, executor: Executor,
                 trace: Trace | None = None, failures: Failures | None = None,
                 link_sharing: str = "fifo", start_time: float = 0.0):
        self.sc, self.entry, self.topo, self.data = scenario, entry, topo, data
        self.algo, self.executor = algo, executor
        self.model = algo.setup.model
        self.env = simpy.Environment(initial_time=start_time)
        self.inflight = 0         # client / relay processes alive (checkpoints need none)
        self.trace = trace or Trace()
        self.ledger = Ledger()
        self.failures = failures or Failures.none()
        link_cls = FairLink if link_sharing == "fair" else Link
        self.links: dict[tuple[str, str], Link] = {}
        g = topo.graph
        for a, b, attrs in g.edges(data=True):
            lower = a if g.nodes[a].get("parent") == b else b
            tier = "client_edge" if g.nodes[lower]["role"] == "client" else "edge_cloud"
            direction = "up" if lower == a else "down"
            self.links[a, b] = link_cls(self.env, a, b, attrs["latency_s"], attrs["bandwidth_Bps"],
                                        tier, direction, self.trace, self.ledger, self.failures)
        self.local = entry.local
        self.stragglers = entry.stragglers or scenario.stragglers
        self.counts = data.counts
        self.round = 0
        self._calls: dict[tuple[int, str], int] = {}   # (cloud round, aggregator) -> calls
        self.nonfinite: dict[int, list[int]] = {}   # round -> clients whose upload was not finite
        self._pos = {kid: i for kids in topo.children.values() for i, kid in enumerate(kids)}
        self.index = {name: k for k, name in enumerate(topo.clients)}   # client name -> id
        f, train = self.failures, scenario.train
        # rounds whose timing depends on nothing but itself are computed in closed form
        self.closed_form = (train.timing == "auto" and link_cls is Link and f.kind != "markov"
                            and f.crash_p <= 0 and not (f.node_down or f.link_down)
                            and train.round.policy == "wait_all"
                            and train.round.timeout_s is None
                            and not (train.edge_preaggregate and algo.linear_aggregate))
        self.closed_form_rounds = 0
        self.under = {n: np.array(sorted(self.index[c] for c in self._leaves(n)),
                                  dtype=np.int64) for n in topo.graph.nodes
                      if not topo.is_client(n)}

    def _leaves(self, node: str) -> list[str]:
        kids = self.topo.children[node]
        if not kids:
            return [node] if self.topo.is_client(node) else []
        return [c for k in kids for c in self._leaves(k)]

    # ------------------------------------------------------------------ helpers
    def select(self, t: int) -> np.ndarray:
        n = self.topo.n_clients
        m = self.sc.train.clients_per_round
        avail = self.failures.available(t, self.env.now, n)
        pool = np.arange(n) if avail is None else np.flatnonzero(avail)
        m = len(pool) if m == "all" else min(int(m), len(pool))
        if m < len(pool):
            pool = np.sort(seeding.rng(self.sc.seed, "sample", t).choice(pool, m, replace=False))
        return pool

    def lr(self, t: int) -> float:
        return self.local.lr * self.local.lr_decay ** (t - 1)

    def spawn(self, gen):
        """Start a process that moves messages or computes; counted while it lives."""
        self.inflight += 1
        return self.env.process(self._tracked(gen))

    def _tracked(self, gen):
        try:
            return (yield from gen)
        finally:
            self.inflight -= 1

    @property
    def quiescent(self) -> bool:
        """No message in flight and no client computing: a round boundary a checkpoint can
        capture exactly (idle links, the clock, the ledger)."""
        return self.inflight == 0

    def send(self, src: str, dst: str, nbytes: float):
        """Generator (use with `yield from`): the arrival time, or None if the message was lost."""
        return self.links[src, dst].send(nbytes)

    def tier_rounds(self, node: str) -> int:
        """Aggregation rounds an aggregator runs per round of its parent."""
        rounds = getattr(self.entry.params, "tier_rounds", None)
        depth = self.topo.depth[node]
        if rounds:
            return int(rounds[depth - 1])
        bottom = len(self.topo.children[node]) and self.topo.is_client(self.topo.children[node][0])
        return self.entry.edge_rounds if bottom else 1

    def train(self, t: int, r: int, sel: np.ndarray, start: torch.Tensor,
              silent: np.ndarray | None = None) -> Work:
        """One executor call for the clients `sel` of one aggregation round."""
        counts = self.counts[sel]
        planned = steps_for(counts, self.local.batch_size, self.local.steps, self.local.epochs)
        clients = torch.from_numpy(sel)
        ctx = RoundCtx(t, r, self.lr(t), torch.from_numpy(planned))
        program = self.algo.program(clients, start, ctx)
        budgets, strag = plan_budgets(self, t, r, sel, planned, program.grad_evals_per_step)
        plan = minibatch_plan(self.data.offsets, sel, self.local.batch_size, budgets,
                              self.sc.seed, t, r, self.data.x, self.data.y)
        # the achieved gamma is measured in evaluated rounds (train.eval_every) or for a target
        measure = t % self.sc.train.eval_every == 0 or t >= self.sc.train.rounds
        if measure or self.local.gamma is not None or hasattr(program, "prepare"):
            full = full_plan(self.data.offsets, sel, self.data.x, self.data.y).at(0)
        else:                                       # not needed: no rows
            full = Batch(self.data.x[:0].expand(len(sel), 0, -1), self.data.y[:0].expand(
                len(sel), 0, *self.data.y.shape[1:]), self.data.x.new_zeros(len(sel), 0))
        res = self.executor.run(program, plan, full, torch.from_numpy(budgets), ctx.lr,
                                self.local.gamma, self.local.check_every, measure=measure)
        up = self.algo.finish(clients, start, res, ctx)
        finite = torch.ones(len(sel), dtype=torch.bool)
        for tensor in up.tensors:      # a non-finite entry makes its row's sum non-finite;
            ok = torch.isfinite(tensor.sum(1))      # the sum is 7x cheaper than isfinite
            if not bool(ok.all()):                  # exact (a large finite row may overflow)
                ok = torch.isfinite(tensor).all(1)
            finite &= ok
        if not bool(finite.all()):      # numerical health: name the clients where it arose
            self.nonfinite.setdefault(t, []).extend(sel[~finite.numpy()].tolist())
        # compute cost: FLOPs of every sample-gradient evaluated, forward + backward = 3 x forward
        valid = (plan.weights > 0).sum(-1).cumsum(1)                   # (C, S) rows so far
        steps = res.steps.clamp(min=0)
        idx = ((steps - 1).clamp(min=0) % valid.shape[1]).unsqueeze(1)
        if valid.shape[1] == 1:                                        # full batch: reused
            rows = valid[:, 0] * steps
        else:
            rows = torch.where(steps > 0, valid.gather(1, idx).squeeze(1), 0)
        samples = rows.double() * program.grad_evals_per_step \
            + res.full_evals.double() * torch.from_numpy(counts).double()
        flops = samples * 3 * self.model.fwd_flops
        ctime = (flops / torch.from_numpy(self.topo.client_flops[sel])).numpy()
        drop = self._dropped(strag)
        if silent is not None:
            drop = drop | silent
        recs = [ClientRecord(t, r, k, st, bu, ct, float("nan"), dr, sg, ga)
                for k, st, bu, ct, dr, sg, ga in zip(sel.tolist(), res.steps.tolist(),
                                                     budgets.tolist(), ctime.tolist(),
                                                     drop.tolist(), strag.tolist(),
                                                     res.gamma.tolist())]
        up_bytes = row_bytes(up.tensors, up.encoding)
        for rec, nb, enc in zip(recs, up_bytes, row_encodings(up.tensors, up.encoding)):
            rec.up_bytes, rec.encoding = float(nb), enc
        return Work(sel, up, res, ctime, up_bytes, recs, drop, r)

    def _dropped(self, stragglers: np.ndarray) -> np.ndarray:
        """Stragglers whose work the algorithm discards (FedAvg's rule in FedProx's experiment)."""
        mode = self.stragglers.drop
        if mode == "never" or not stragglers.any():
            return np.zeros_like(stragglers)
        if mode == "always" or self.algo.drops_stragglers:
            return stragglers.copy()
        return np.zeros_like(stragglers)

    # ------------------------------------------------------------------ processes
    def run(self, rounds: int, start_round: int = 1,
            on_round: Callable[[int, RoundInfo], bool] | None = None) -> None:
        """Simulate cloud rounds start_round..rounds; on_round returns False to stop."""
        self.env.process(self._cloud(rounds, start_round, on_round))
        # a round allocates many short-lived tuples (events, keys, records): collecting the
        # young generation every 700 allocations cost up to 30% of W5's time
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
        try:
            self.env.run()
        finally:
            gc.set_threshold(*threshold)

    def _cloud(self, rounds: int, start_round: int, on_round):
        for t in range(start_round, rounds + 1):
            self.round = t
            self.trace.add(self.env.now, "cloud", "round_start", "", t)
            info = RoundInfo(t)
            if self.algo.hierarchical:
                yield from self._hier_round(t, info)
            else:
                yield from self._flat_round(t, info)
            self.trace.add(self.env.now, "cloud", "round_end", "", t)
            if on_round is not None and not on_round(t, info):
                return

    @staticmethod
    def _active(node: str, chosen: "Chosen") -> list[str]:
        """Children of `node` with a selected client at or below them (see _mark_active)."""
        return chosen.kids.get(node, [])

    def _mark_active(self, sel: np.ndarray) -> "Chosen":
        """The subtree spanned by this round's clients: O(selected x depth), not O(all). Each
        round's processes keep their own: a late broadcast must not see the next round's."""
        amap: dict[str, list[str]] = {}
        seen: set[str] = set()
        parent, pos = self.topo.parent, self._pos
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
                collector: Collector, preagg: "PreAgg | None" = None):
        """Download, compute, upload (relayed to the cloud when `relay`)."""
        rec, name = work.recs[i], self.topo.clients[k]
        if (yield from self.send(parent, name, down_bytes)) is None:
            return self._fail(collector, k, rec, preagg)
        self.trace.add(self.env.now, name, "compute_start", "", rec.steps)
        crash = self.failures.crash_after(self.round, rec.edge_round, k, float(work.ctime[i]))
        if crash is not None:
            yield self.env.timeout(crash)
            self.trace.add(self.env.now, name, "crash", "", rec.steps)
            return self._fail(collector, k, rec, preagg)
        yield self.env.timeout(float(work.ctime[i]))
        self.trace.add(self.env.now, name, "compute_end", "", rec.steps)
        if work.drop[i]:
            return None
        if not self.failures.client_up(k, self.env.now):
            self.trace.add(self.env.now, name, "offline", "", 0)
            return self._fail(collector, k, rec, preagg)
        t_up, nbytes = self.env.now, float(work.up_bytes[i])
        hops = [name, parent] if (not relay or preagg is not None) else self.topo.path_up(name)
        for j, (a, b) in enumerate(zip(hops[:-1], hops[1:])):
            if (yield from self.send(a, b, nbytes)) is None:       # lost: the link counted this hop
                self.ledger.wasted += nbytes * j               # the hops before it are wasted too
                return self._fail(collector, k, rec, preagg)
        rec.upload_s = self.env.now - t_up
        target = preagg.collector if preagg is not None else collector
        if not target.arrive(k):
            rec.dropped = True
            self.ledger.wasted += nbytes * (len(hops) - 1)
        return None

    @staticmethod
    def _mark_unused(work: Work, arrived: np.ndarray) -> None:
        """At a round's close: participants whose update was not aggregated are dropped."""
        used = set(arrived.tolist())
        for rec in work.recs:
            if rec.client not in used:
                rec.dropped = True

    def _fail(self, collector: Collector, k: int, rec: ClientRecord, preagg) -> None:
        rec.failed = True
        (preagg.collector if preagg is not None else collector).fail(k)
        return None

    # ---------------------------------------------------------------- flat
    def _flat_round(self, t: int, info: RoundInfo):
        picked = self.select(t)
        if len(picked) == 0:                    # nobody available: an empty round
            return
        sel = self.algo.trainees(picked)        # usually == picked; extra ones train silently
        silent = ~np.isin(sel, picked)
        chosen = self._mark_active(sel)
        work = self.train(t, 0, sel, self.algo.global_model(), silent)
        down_bytes = message_bytes(self.algo.downlink())
        preagg = self.sc.train.edge_preaggregate and self.algo.linear_aggregate
        col = Collector(self.env, 0 if preagg else int((~work.drop).sum()), self.sc.train.round)
        partials: list = []
        if preagg:
            edges = [e for e in self.topo.edges if np.isin(self.under[e], sel[~work.drop]).any()]
            col = Collector(self.env, len(edges), self.sc.train.round)
        pos = {int(k): i for i, k in enumerate(sel)}
        # closed form: only with nothing left in flight from an earlier round (its events would
        # interleave with this round's)
        timing = flat_round(self, chosen, work, down_bytes) \
            if self.closed_form and self.quiescent else None
        if timing is not None:               # the event loop's outcome, computed directly
            closed = self._at(timing.end)
            self._apply(timing)
            col.arrived.extend(timing.arrived)
            yield closed
        else:
            self.spawn(self._flat_down("cloud", chosen, pos, down_bytes, work, col, partials,
                                       preagg))
            yield col.closed
        if preagg:
            ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
            arrived_edges = set(col.arrived)
            got = [p for p in partials if p[0] in arrived_edges]
            self.algo.aggregate_partials([(p[1], p[2]) for p in got], ctx)
            arrived = np.array(sorted(k for p in got for k in p[3]), dtype=np.int64)
        else:
            arrived = np.array(sorted(col.arrived), dtype=np.int64)
            ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
            if np.array_equal(arrived, sel):        # everyone, in order: no gather
                up = work.up
            else:
                rows = torch.tensor([pos[int(k)] for k in arrived], dtype=torch.long)
                up = Upload(tuple(x[rows] for x in work.up.tensors), work.up.encoding)
            self.algo.aggregate(torch.from_numpy(arrived), up, ctx)
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        self._mark_unused(work, arrived)
        info.selected, info.reported = len(picked), len(arrived)
        info.failed = len(picked) - len(arrived)
        info.clients.extend(work.recs)

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

    def _at(self, time: float, priority: int = NORMAL) -> simpy.Event:
        """An event at exactly `time` (a timeout of `time - now` may round to another double)."""
        ev = self.env.event()
        ev._ok, ev._value = True, None
        heapq.heappush(self.env._queue, (time, priority, next(self.env._eid), ev))
        return ev

    def _flat_down(self, node: str, chosen: "Chosen", pos: dict, down_bytes: float, work: Work,
                   col: Collector, partials: list, preagg: bool):
        """Forward the broadcast from `node` to every active child, recursively."""
        kids = self._active(node, chosen)
        bottom = kids and self.topo.is_client(kids[0])
        pa = None
        if bottom and preagg:
            members = [self.index[c] for c in kids]
            live = [k for k in members if not work.drop[pos[k]]]
            if live:
                pa = PreAgg(Collector(self.env, len(live), self.sc.train.round, opened=col.opened))
                self.spawn(self._preagg_up(node, pa, pos, work, col, partials))
        for kid in kids:
            if self.topo.is_client(kid):
                k = self.index[kid]
                self.spawn(self._client(k, pos[k], node, down_bytes, work, True, col, pa))
            else:
                self.spawn(self._flat_child(node, kid, chosen, pos, down_bytes, work, col,
                                            partials, preagg))
        if False:  # pragma: no cover - makes this function a generator
            yield

    def _flat_child(self, parent: str, node: str, chosen, pos, down_bytes, work, col, partials,
                    preagg):
        if (yield from self.send(parent, node, down_bytes)) is None:
            for k in self.under[node]:
                if int(k) in pos and not work.drop[pos[int(k)]]:
                    self._fail(col, int(k), work.recs[pos[int(k)]], None)
            return
        yield from self._flat_down(node, chosen, pos, down_bytes, work, col, partials, preagg)

    def _preagg_up(self, edge: str, pa: "PreAgg", pos: dict, work: Work, col: Collector,
                   partials: list):
        """Bottom-tier pre-aggregation: wait for the clients, send one partial sum upward."""
        yield pa.collector.closed
        ks = sorted(pa.collector.arrived)
        if not ks:
            col.fail(edge)
            return
        rows = torch.tensor([pos[k] for k in ks], dtype=torch.long)
        tensors, weight = self.algo.partial(torch.tensor(ks), Upload(
            tuple(x[rows] for x in work.up.tensors), work.up.encoding))
        self.trace.add(self.env.now, edge, "aggregate", "", len(ks))
        nbytes = message_bytes(tensors) + 4.0      # the partial sums + their total weight
        path = self.topo.path_up(edge)
        for a, b in zip(path[:-1], path[1:]):
            if (yield from self.send(a, b, nbytes)) is None:
                col.fail(edge)
                return
        if col.arrive(edge):
            partials.append((edge, tensors, weight, ks))

    # ---------------------------------------------------------------- hierarchical
    def _hier_round(self, t: int, info: RoundInfo):
        sel = self.select(t)
        if len(sel) == 0:                       # nobody available: an empty round
            return
        chosen = self._mark_active(sel)
        kids = self._active("cloud", chosen)
        reporting = set(self.algo.reporting(t, kids))
        col = Collector(self.env, len(reporting), self.sc.train.round)
        uploads: dict[str, tuple] = {}
        down = message_bytes(self.algo.downlink())
        model = self.algo.global_model()
        edge = self.sc.train.edge_round
        if (self.closed_form and self.quiescent and kids and len(reporting) == len(kids)
                and edge.policy == "wait_all" and edge.timeout_s is None):
            timing = hier_round(self, t, chosen, kids, model, down)
            closed = self._at(timing.end)
            self._apply(timing)
            info.clients.extend(timing.records)
            col.arrived.extend(timing.arrived)
            uploads.update(timing.uploads)
            yield closed
        else:
            for kid in kids:
                self.spawn(self._hier_child("cloud", kid, t, chosen, model, down, col, uploads,
                                            info, kid in reporting))
            yield col.closed
        arrived = sorted(col.arrived, key=lambda n: kids.index(n))
        weights = torch.tensor([float(self.counts[np.intersect1d(self.under[n], sel)].sum())
                                for n in arrived], dtype=torch.float64)
        ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
        self.algo.cloud_aggregate(arrived, [uploads[n] for n in arrived], weights, ctx)
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        info.selected = len(sel)
        info.reported = int(sum(np.isin(self.under[n], sel).sum() for n in arrived))
        info.failed = info.selected - info.reported

    def _hier_child(self, parent: str, node: str, t: int, chosen: "Chosen", model: torch.Tensor,
                    down_bytes: float, col: Collector, uploads: dict, info: RoundInfo,
                    report: bool = True):
        if (yield from self.send(parent, node, down_bytes)) is None:
            col.fail(node)
            return
        msg = yield from self._aggregator(node, t, chosen, model, info)
        if not report:
            return
        if msg is None:
            col.fail(node)
            return
        if (yield from self.send(node, parent, message_bytes(msg))) is None:
            col.fail(node)
            return
        if col.arrive(node):
            uploads[node] = msg

    def _aggregator(self, node: str, t: int, chosen: "Chosen", model: torch.Tensor,
                    info: RoundInfo):
        """An aggregator's rounds over its children; returns what it uploads."""
        es = self.algo.edge_start(model)
        kids = self._active(node, chosen)
        policy = self.sc.train.edge_round
        for _ in range(self.tier_rounds(node)):
            start = self.algo.edge_model(es)
            db = message_bytes((start,))
            if kids and self.topo.is_client(kids[0]):
                work = self._edge_train(node, t, kids, start)
                col = Collector(self.env, int((~work.drop).sum()), policy)
                for i, k in enumerate(work.sel):
                    self.spawn(self._client(int(k), i, node, db, work, False, col))
                yield col.closed
                es = self._edge_close(t, es, work, col.arrived)
                info.clients.extend(work.recs)
            else:
                col = Collector(self.env, len(kids), policy)
                ups: dict[str, tuple] = {}
                for kid in kids:
                    self.spawn(self._hier_child(node, kid, t, chosen, start, db, col, ups,
                                                info))
                yield col.closed
                es = self._tier_close(t, chosen.ids, es, kids, col.arrived, ups, start)
            self.trace.add(self.env.now, node, "aggregate", "", len(col.arrived))
        return self.algo.edge_upload(es)

    # the learning side of an aggregator's round, shared by the event loop and the closed form
    def _edge_train(self, node: str, t: int, kids: list[str], start: torch.Tensor) -> Work:
        """A bottom-tier aggregator's clients train (one executor call)."""
        r = self._calls.get((t, node), 0)     # keyed by round: an edge that does not
        self._calls[t, node] = r + 1          # report may still run into round t + 1
        members = np.array([self.index[c] for c in kids], np.int64)
        return self.train(t, r, members, start)

    def _edge_close(self, t: int, es, work: Work, arrived_clients: list):
        """Aggregate the clients that arrived; the others are marked dropped."""
        pos = {int(k): i for i, k in enumerate(work.sel)}
        arrived = np.array(sorted(arrived_clients), dtype=np.int64)
        rows = torch.tensor([pos[int(k)] for k in arrived], dtype=torch.long)
        ctx = RoundCtx(t, work.r, self.lr(t), torch.zeros(0))
        weights = torch.from_numpy(self.counts[arrived].astype(np.float64))
        es = self.algo.edge_aggregate(es, torch.from_numpy(arrived), Upload(
            tuple(x[rows] for x in work.up.tensors), work.up.encoding), weights, ctx)
        self._mark_unused(work, arrived)
        return es

    def _tier_close(self, t: int, sel: np.ndarray, es, kids: list[str], arrived: list,
                    ups: dict, start: torch.Tensor):
        """Aggregate the child aggregators' uploads that arrived."""
        arrived_n = sorted(arrived, key=kids.index)
        weights = torch.tensor([float(self.counts[np.intersect1d(self.under[n], sel)].sum())
                                for n in arrived_n], dtype=torch.float64)
        ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
        up = Upload(tuple(torch.stack([ups[n][j] for n in arrived_n])
                          for j in range(len(ups[arrived_n[0]])))) if arrived_n else \
            Upload((torch.zeros(0, start.numel()),))
        return self.algo.edge_aggregate(es, None, up, weights, ctx)


@dataclass(frozen=True)
class Chosen:
    """A round's selected clients and the subtree they span (aggregator -> active children)."""

    ids: np.ndarray
    kids: dict[str, list[str]]


@dataclass
class PreAgg:
    collector: Collector
