"""Flat rounds: the cloud aggregates the clients; aggregators relay every message down and up
(or, with `edge_preaggregate` and a linear aggregator, the bottom tier waits for its clients
and sends one weighted partial sum upward). A mixin of sim.engine.Simulation."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .closed_form import flat_round
from .energy import settle
from .rounds import Collector
from .work import Chosen, RoundInfo, Work


@dataclass
class PreAgg:
    collector: Collector


class FlatRounds:
    """The flat sections of the engine (uses Simulation's core: spawn, send, _client, ...)."""

    def _flat_round(self, t: int, info: RoundInfo):
        runner = self.runner
        picked = self.select(t)
        if len(picked) == 0:                    # nobody available: an empty round
            yield from self._empty_round()
            return
        sel = runner.trainees(picked)           # usually == picked; extra ones train silently
        silent = ~np.isin(sel, picked)
        chosen = self._mark_active(sel)
        opened = self.env.now
        work = self._train(t, 0, sel, runner.global_model(), silent)
        down_bytes = runner.down_bytes()
        preagg = self.sc.train.edge_preaggregate and runner.linear_aggregate
        col = Collector(self.env, 0 if preagg else int((~work.drop).sum()), self.round_spec)
        partials: list = []
        if preagg:
            edges = [e for e in self.topo.edges if np.isin(self.under[e], sel[~work.drop]).any()]
            col = Collector(self.env, len(edges), self.round_spec)
            self._sums_through = Counter(hop for e in edges for hop in self._hops(e))
            self._sum_bytes = runner.partial_bytes(work) \
                if edges and self.round_spec.limit_s is not None else 0.0
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
        else:                                # the clients' links, made together
            self.links.of_clients(None, sel.tolist())
            self._broadcast("cloud", chosen, pos, down_bytes, work, col, partials, preagg)
            yield col.closed
        settle(work.recs, work.drop, work.up_bytes, down_bytes, opened, self.env.now, self.topo,
               work.secagg)
        if preagg:
            arrived_edges = set(col.arrived)
            got = [p for p in partials if p[0] in arrived_edges]
            runner.aggregate_partials(t, [p[1] for p in got])
            arrived = np.array(sorted(k for p in got for k in p[2]), dtype=np.int64)
        else:
            arrived = np.array(sorted(col.arrived), dtype=np.int64)
            rows = None if np.array_equal(arrived, sel) else [pos[int(k)] for k in arrived]
            runner.aggregate(t, arrived, work, rows)         # rows None: everyone, in order
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        self._mark_unused(work, arrived)
        info.selected, info.reported = len(picked), len(arrived)
        info.failed = len(picked) - len(arrived)
        info.clients.extend(work.recs)

    def _broadcast(self, node: str, chosen: Chosen, pos: dict, down_bytes: float, work: Work,
                   col: Collector, partials: list, preagg: bool) -> None:
        """Start a process per active child of `node` that forwards the model to it (a
        client's process then trains and uploads; an aggregator's broadcasts in turn)."""
        kids = chosen.active(node)
        bottom = kids and self.topo.is_client(kids[0])
        pa = None
        gens = []                   # started together: nothing is scheduled between them
        if bottom and preagg:
            members = [self.index[c] for c in kids]
            live = [k for k in members if not work.drop[pos[k]]]
            if live:
                opened = col.opened - self._partial_lead(node)
                pa = PreAgg(Collector(self.env, len(live), self.round_spec, opened=opened))
                gens.append(self._preagg_up(node, pa, pos, work, col, partials))
        if bottom:                  # a node's children are all clients or all aggregators
            ids = list(map(self.index.__getitem__, kids))   # links: made at the round's start
            gens.extend(self._client(k, pos[k], node, down_bytes, work, True, col, pa)
                        for k in ids)
        else:
            gens.extend(self._flat_child(node, kid, chosen, pos, down_bytes, work, col,
                                         partials, preagg) for kid in kids)
        self.spawn(*gens)

    def _hops(self, edge: str) -> list[tuple[str, str]]:
        path = self.topo.path_up(edge)
        return list(zip(path[:-1], path[1:]))

    def _partial_lead(self, edge: str) -> float:
        """Under a time limit (a deadline, or wait_all's timeout_s), how much earlier than the
        cloud a pre-aggregating edge closes: its partial sum's time up its path (latency +
        bytes / bandwidth per hop, each hop carrying the sums of every pre-aggregating edge
        below it, as if they were sent together), so that a sum sent at the edge's close
        reaches the cloud before the limit (a nanosecond before: an arrival at the limit itself
        comes after the cloud's timer, late)."""
        if self.round_spec.limit_s is None:
            return 0.0
        lead = 0.0
        for a, b in self._hops(edge):
            lat, bw = self.topo.link(a, b)
            lead += lat + self._sums_through[a, b] * self._sum_bytes / bw
        return lead * (1 + 1e-9) + 1e-9

    def _flat_child(self, parent: str, node: str, chosen, pos, down_bytes, work, col, partials,
                    preagg):
        if (yield from self.send(parent, node, down_bytes)) is None:
            lost = [int(k) for k in self.under[node]
                    if int(k) in pos and not work.drop[pos[int(k)]]]
            for k in lost:      # pre-aggregating: the cloud counts bottom edges, not clients
                self._fail(col, k, work.recs[pos[k]], None, counted=not preagg)
            if preagg:
                for edge in dict.fromkeys(self._parent[self.topo.clients[k]] for k in lost):
                    col.fail(edge)
            return
        self._broadcast(node, chosen, pos, down_bytes, work, col, partials, preagg)

    def _preagg_up(self, edge: str, pa: PreAgg, pos: dict, work: Work, col: Collector,
                   partials: list):
        """Bottom-tier pre-aggregation: wait for the clients, send one partial sum upward."""
        yield pa.collector.closed
        ks = sorted(pa.collector.arrived)
        if not ks:
            col.fail(edge)
            return
        part, nbytes = self.runner.partial(ks, [pos[k] for k in ks], work)
        self.trace.add(self.env.now, edge, "aggregate", "", len(ks))
        path = self.topo.path_up(edge)
        for j, (a, b) in enumerate(zip(path[:-1], path[1:])):
            if (yield from self.send(a, b, nbytes)) is None:    # lost: as a relayed upload,
                self.ledger.wasted += nbytes * j                # the hops before it wasted and
                for k in ks:                                    # its clients' updates failed
                    self._fail(col, k, work.recs[pos[k]], None, counted=False)
                col.fail(edge)
                return
        if col.arrive(edge):
            partials.append((edge, part, ks))
        else:                                   # late: the cloud's round had closed
            self.ledger.wasted += nbytes * (len(path) - 1)
