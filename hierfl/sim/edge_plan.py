"""The learning of a closed-form hierarchical round, batched across aggregators (issue 19).

In a round computed in closed form (closed_form.hier_round) every aggregator runs all its rounds
and every client that is not dropped arrives: the learning then depends on nothing the timing
decides. It is done first, tier round by tier round across ALL aggregators of a depth at once
(lock-step): at each round of the bottom tier one runner call trains every edge's clients
(exec/edges.py), then each edge aggregates its own arrivals as its process would; upper tiers
aggregate their children's uploads the same way. The timing walk then replays it: the same
Work, the same uploads, in the order each aggregator's process would have asked for them.

Only where the runner batches (`batches_edges`) and each depth's aggregators are alike (all
over clients or all over aggregators, the same number of rounds); otherwise None: the walk
calls the runner per aggregator as before."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import numpy as np


class EdgePlan:
    """Per aggregator, in order: its bottom rounds' (Work, broadcast bytes, non-finite clients),
    its upper rounds' broadcast bytes and its uploads (message, bytes)."""

    def __init__(self):
        self.works: dict[str, deque] = defaultdict(deque)
        self.ups: dict[str, deque] = defaultdict(deque)
        self.downs: dict[str, deque] = defaultdict(deque)   # upper rounds' broadcast bytes

    def work(self, sim, t: int, node: str):
        """The next round of a bottom aggregator: (its Work, the broadcast's bytes)."""
        work, db, bad = self.works[node].popleft()
        sim.runner.note_nonfinite(t, bad)     # named where its own call would name them
        return work, db

    def upload(self, node: str) -> tuple[Any, float]:
        return self.ups[node].popleft()


def plan_round(sim, t: int, chosen, kids: list[str], model: Any) -> EdgePlan | None:
    """The learning of the round below the cloud's children `kids` (all reporting), or None
    where it is not batched."""
    if not getattr(sim.runner, "batches_edges", False) or not kids or not _alike(sim, chosen,
                                                                                 kids):
        return None
    plan = EdgePlan()
    _learn(sim, t, chosen, kids, [model] * len(kids), plan)
    return plan


def _alike(sim, chosen, nodes: list[str]) -> bool:
    """Every depth below: all aggregators over clients or all over aggregators, with one
    number of rounds."""
    while nodes:
        kids = [chosen.active(n) for n in nodes]
        if not all(kids):
            return False
        bottom = {sim.topo.is_client(k[0]) for k in kids}
        if len(bottom) > 1 or len({sim.tier_rounds(n) for n in nodes}) > 1:
            return False
        if bottom.pop():
            return True
        nodes = [k for ks in kids for k in ks]
    return True


def _learn(sim, t: int, chosen, nodes: list[str], starts: list[Any],
           plan: EdgePlan) -> tuple[list[tuple[Any, float]], list[set[int]]]:
    """The aggregators `nodes` (one depth) each receive their start model and run their rounds
    in lock-step; returns their uploads (also queued on the plan) and, for each, the clients
    whose updates its upload aggregates."""
    runner = sim.runner
    es = [runner.edge_start(s) for s in starts]
    mine: list[set[int]] = [set() for _ in nodes]
    kids = [chosen.active(n) for n in nodes]
    bottom = sim.topo.is_client(kids[0][0])
    for _ in range(sim.tier_rounds(nodes[0])):
        models = [runner.edge_model(e) for e in es]
        if bottom:
            works = _train(sim, t, nodes, kids, [m for m, _ in models])
            for i, (node, (work, bad), (_, db)) in enumerate(zip(nodes, works, models)):
                plan.works[node].append((work, db, bad))
                mine[i].update(work.sel[~work.drop].tolist())
            # the arrivals are the clients not dropped: sim.edge_close's marking changes nothing
            es = runner.close_edges(t, es, [w for w, _ in works])
        else:
            for node, (_, db) in zip(nodes, models):
                plan.downs[node].append(db)
            below = [k for ks in kids for k in ks]
            outs, sets = _learn(sim, t, chosen, below,
                                [models[i][0] for i, ks in enumerate(kids) for _ in ks], plan)
            ups, aggregated = iter(outs), iter(sets)
            for i, ks in enumerate(kids):
                got = {k: next(ups)[0] for k in ks}
                kept = {k: next(aggregated) for k in ks}
                for k in ks:
                    mine[i].update(kept[k])
                es[i] = sim.tier_close(t, kept, es[i], ks, ks, got, models[i][0])
    out = [runner.edge_upload(e) for e in es]
    for node, up in zip(nodes, out):
        plan.ups[node].append(up)
    return out, mine


def _train(sim, t: int, nodes: list[str], kids: list[list[str]], starts: list[Any]) -> list:
    """One runner call for every bottom aggregator's clients (sim.edge_train's bookkeeping)."""
    rs = set()
    for node in nodes:
        r = sim._calls.get((t, node), 0)
        sim._calls[t, node] = r + 1
        rs.add(r)
    if len(rs) != 1:
        raise RuntimeError(f"round {t}: edges out of step {sorted(rs)}")
    index = sim.index
    segments = [np.array([index[c] for c in ks], np.int64) for ks in kids]
    return sim.runner.train_edges(t, rs.pop(), segments, starts)
