"""Hierarchical rounds: every aggregator runs its tier's number of rounds over its children,
recursively, then uploads once; the cloud aggregates its children's uploads. A mixin of
sim.engine.Simulation. The learning steps of an aggregator's round (`edge_train`,
`edge_close`, `tier_close`) are shared with the closed form (closed_form.hier_round)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .closed_form import hier_round
from .energy import settle
from .rounds import Collector
from .work import Chosen, RoundInfo, Work


class HierRounds:
    """The hierarchical sections of the engine (uses Simulation's core)."""

    def _hier_round(self, t: int, info: RoundInfo):
        runner = self.runner
        sel = self.select(t)
        if len(sel) == 0:                       # nobody available: an empty round
            yield from self._empty_round()
            return
        chosen = self._mark_active(sel)
        runner.round_selection(t, sel)          # stragglers drawn over the whole round
        kids = chosen.active("cloud")
        reporting = set(runner.reporting(t, kids))
        col = Collector(self.env, len(reporting), self.round_spec)
        uploads: dict[str, Any] = {}
        got: dict[str, set[int]] = {}          # child -> the clients its upload aggregates
        down = runner.down_bytes()
        model = runner.global_model()
        edge = self.sc.train.edge_round
        if (self.closed_form and self.quiescent and kids and len(reporting) == len(kids)
                and edge.policy == "wait_all" and edge.timeout_s is None
                and self._every_edge_aggregates(t, chosen)):
            self.links.of_clients(None, chosen.ids.tolist())   # made together, not one a hop
            timing = hier_round(self, t, chosen, kids, model, down)
            closed = self._at(timing.end)
            self._apply(timing)
            info.clients.extend(timing.records)
            col.arrived.extend(timing.arrived)
            uploads.update(timing.uploads)
            ok = {r.client for r in timing.records if not r.dropped and not r.failed}
            for kid in kids:                    # no failures: whoever was not dropped
                got[kid] = ok.intersection(self.under[kid].tolist())
            yield closed
        else:                                   # the clients' links, made together
            self.links.of_clients(None, chosen.ids.tolist())
            self.spawn(*(self._hier_child("cloud", kid, t, chosen, model, down, col, uploads,
                                          info, kid in reporting, got) for kid in kids))
            yield col.closed
        arrived = sorted(col.arrived, key=lambda n: kids.index(n))
        runner.cloud_close(t, arrived, uploads, self.weights(arrived, got))
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        info.selected = len(sel)            # reported: clients whose update reached the cloud
        info.reported = len(set().union(*(got[n] for n in arrived)))  # a moving client
        #                                          may be aggregated under two edges: once
        info.failed = info.selected - info.reported

    def _every_edge_aggregates(self, t: int, chosen: Chosen) -> bool:
        """The closed form's premise that every child uploads: a bottom aggregator, called
        once per round of its parent (its calls numbered r = 0, 1, ... through the cloud
        round, edge_train), keeps a client in one of the rounds of each call. One whose
        clients are all dropped stragglers in every round of a call aggregates nothing and
        sends nothing, which only the event loop models."""
        runner, sel, parent = self.runner, chosen.ids, self.topo.parent
        if runner.dropped_before(t, 0, sel) is None:      # nobody is ever dropped
            return True
        kept: dict[int, np.ndarray] = {}
        pos = {k: i for i, k in enumerate(sel.tolist())}
        for node, kids in chosen.kids.items():
            if not kids or not self.topo.is_client(kids[0]):
                continue
            rows = [pos[self.index[c]] for c in kids]
            each, calls, up = self.tier_rounds(node), 1, parent[node]
            while up != "cloud":
                calls *= self.tier_rounds(up)
                up = parent[up]
            for call in range(calls):
                for r in range(call * each, (call + 1) * each):
                    if r not in kept:
                        kept[r] = ~runner.dropped_before(t, r, sel)
                    if kept[r][rows].any():
                        break
                else:
                    return False
        return True

    def weights(self, nodes: list[str], got: dict[str, set[int]]) -> list[float]:
        """Each node's aggregation weight: the samples of the clients whose updates its upload
        aggregates (`got[node]`: their indices; not those of its selected clients that were
        dropped, crashed, offline or late, whose updates it left out). Integer sums: the same
        numbers in whatever order the clients are found."""
        counts = self.counts
        return [float(counts[np.fromiter(got[n], np.int64, len(got[n]))].sum()) for n in nodes]

    def _hier_child(self, parent: str, node: str, t: int, chosen: Chosen, model: Any,
                    down_bytes: float, col: Collector, uploads: dict, info: RoundInfo,
                    report: bool, got: dict[str, set[int]]):
        """An aggregator's part of its parent's round. With no client update aggregated below
        it (all crashed, offline, lost or late) it has nothing to report and sends nothing."""
        if (yield from self.send(parent, node, down_bytes)) is None:
            col.fail(node)
            return
        msg, nbytes, mine = yield from self._aggregator(node, t, chosen, model, info)
        if not report:
            return
        if msg is None or not mine:
            col.fail(node)
            return
        if (yield from self.send(node, parent, nbytes)) is None:
            col.fail(node)
            return
        if col.arrive(node):
            uploads[node] = msg
            got[node] = mine
        else:                                   # late: its parent's round had closed
            self.ledger.wasted += nbytes

    def _aggregator(self, node: str, t: int, chosen: Chosen, model: Any, info: RoundInfo):
        """An aggregator's rounds over its children; returns (its upload, the upload's bytes,
        the clients whose updates it aggregated in any of its rounds)."""
        runner = self.runner
        es = runner.edge_start(model)
        kids = chosen.active(node)
        if self.async_edges and kids and self.topo.is_client(kids[0]):    # sim/async_edge.py
            return (yield from self._async_edge(node, t, kids, es, info))
        policy = self.sc.train.edge_round
        mine: set[int] = set()
        bottom = bool(kids) and self.topo.is_client(kids[0])
        for _ in range(self.tier_rounds(node)):
            start, db = runner.edge_model(es)
            if bottom and self.mobility is not None:   # whoever is under it at this start
                kids = self.members(node, chosen.ids)
                if not kids:
                    self.trace.add(self.env.now, node, "aggregate", "", 0)
                    continue
            if bottom:
                opened = self.env.now
                work = self.edge_train(node, t, kids, start)
                drops = work.drop.tolist()
                col = Collector(self.env, len(drops) - sum(drops), policy)
                ids = work.sel.tolist()             # their links: made at the round's start
                self.spawn(*(self._client(k, i, node, db, work, False, col)
                             for i, k in enumerate(ids)))
                yield col.closed
                settle(work.recs, work.drop, work.up_bytes, db, opened, self.env.now, self.topo,
                       work.secagg)
                es = self.edge_close(t, es, work, col.arrived)
                self._records_of(info).extend(work.recs)
                mine.update(int(k) for k in col.arrived)
            else:
                col = Collector(self.env, len(kids), policy)
                ups: dict[str, Any] = {}
                below: dict[str, set[int]] = {}
                self.spawn(*(self._hier_child(node, kid, t, chosen, start, db, col, ups,
                                              info, True, below) for kid in kids))
                yield col.closed
                es = self.tier_close(t, below, es, kids, col.arrived, ups, start)
                for n in col.arrived:
                    mine.update(below[n])
            self.trace.add(self.env.now, node, "aggregate", "", len(col.arrived))
        msg, nbytes = runner.edge_upload(es)
        return msg, nbytes, mine

    # the learning side of an aggregator's round, shared by the event loop and the closed form
    def edge_train(self, node: str, t: int, kids: list[str], start: Any) -> Work:
        """A bottom-tier aggregator's clients train (one runner call)."""
        r = self._calls.get((t, node), 0)     # keyed by round: an edge that does not
        self._calls[t, node] = r + 1          # report may still run into round t + 1
        members = np.array([self.index[c] for c in kids], np.int64)
        return self._train(t, r, members, start)

    def edge_close(self, t: int, es: Any, work: Work, arrived_clients: list) -> Any:
        """Aggregate the clients that arrived; the others are marked dropped."""
        pos = {k: i for i, k in enumerate(work.sel.tolist())}
        ks = sorted(arrived_clients)
        arrived = np.array(ks, dtype=np.int64)
        es = self.runner.edge_close(t, es, work, arrived, [pos[k] for k in ks])
        self._mark_unused(work, arrived)
        return es

    def tier_close(self, t: int, got: dict[str, set[int]], es: Any, kids: list[str],
                   arrived: list, ups: dict, start: Any) -> Any:
        """Aggregate the child aggregators' uploads that arrived, each weighted by the samples
        of the clients its upload aggregates (`got`)."""
        arrived_n = sorted(arrived, key=kids.index)
        return self.runner.tier_close(t, es, arrived_n, ups, self.weights(arrived_n, got), start)
