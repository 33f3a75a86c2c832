"""The simulation of one algorithm on the system: cloud, edge and client processes (simpy).

The engine decides when and how much; the algorithm (learn/) decides what. At the start of each
aggregation round the aggregator hands the whole round's client work to the executor in one
call, then plays out the timing of every message and computation with the steps each client
actually used. Learning maths never happens here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import simpy
import torch

from .. import seeding
from ..algorithms.base import Algorithm, RoundCtx, Upload
from ..data.federated import FederatedData
from ..exec.local import Executor
from ..learn.batches import full_plan, minibatch_plan, steps_for
from ..learn.solver import SolveResult
from ..scenario.schema import AlgorithmEntry, Scenario
from ..topology.graph import Topology
from .links import Ledger, Link
from .messages import message_bytes, row_bytes
from .rounds import Collector
from .stragglers import plan_budgets
from .trace import Trace


@dataclass
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


@dataclass
class RoundInfo:
    round: int
    selected: int = 0
    reported: int = 0
    failed: int = 0
    clients: list[ClientRecord] = field(default_factory=list)


class Simulation:
    def __init__(self, scenario: Scenario, entry: AlgorithmEntry, topo: Topology,
                 data: FederatedData, algo: Algorithm, executor: Executor,
                 trace: Trace | None = None):
        self.sc, self.entry, self.topo, self.data = scenario, entry, topo, data
        self.algo, self.executor = algo, executor
        self.model = algo.setup.model
        self.env = simpy.Environment()
        self.trace = trace or Trace()
        self.ledger = Ledger()
        self.links: dict[tuple[str, str], Link] = {}
        for a, b, attrs in topo.graph.edges(data=True):
            ra, rb = topo.graph.nodes[a]["role"], topo.graph.nodes[b]["role"]
            tier = "client_edge" if "client" in (ra, rb) else "edge_cloud"
            direction = "up" if topo.graph.nodes[a].get("parent") == b else "down"
            self.links[a, b] = Link(self.env, a, b, attrs["latency_s"], attrs["bandwidth_Bps"],
                                    tier, direction, self.trace, self.ledger)
        self.local = entry.local
        self.counts = data.counts
        self.diverged_at: int | None = None
        self.round = 0

    # ------------------------------------------------------------------ helpers
    def select(self, t: int) -> np.ndarray:
        n = self.topo.n_clients
        m = self.sc.train.clients_per_round
        m = n if m == "all" else min(int(m), n)
        if m == n:
            return np.arange(n)
        return np.sort(seeding.rng(self.sc.seed, "sample", t).choice(n, m, replace=False))

    def lr(self, t: int) -> float:
        return self.local.lr * self.local.lr_decay ** (t - 1)

    def send(self, src: str, dst: str, nbytes: float):
        return self.env.process(self.links[src, dst].send(nbytes))

    def train(self, t: int, r: int, sel: np.ndarray, start: torch.Tensor, info: RoundInfo
              ) -> tuple[Upload, SolveResult, torch.Tensor, np.ndarray, np.ndarray]:
        """One executor call for the clients `sel` of one aggregation round.
        Returns uploads, the solver result, the compute time per client, budgets, stragglers."""
        counts = self.counts[sel]
        planned = steps_for(counts, self.local.batch_size, self.local.steps, self.local.epochs)
        clients = torch.from_numpy(sel)
        ctx = RoundCtx(t, r, self.lr(t), torch.from_numpy(planned))
        program = self.algo.program(clients, start, ctx)
        budgets, stragglers = plan_budgets(self, t, r, sel, planned, program.grad_evals_per_step)
        plan = minibatch_plan(self.data.offsets, sel, self.local.batch_size, budgets,
                              self.sc.seed, t, r, self.data.x, self.data.y)
        full = full_plan(self.data.offsets, sel, self.data.x, self.data.y).at(0)
        res = self.executor.run(program, plan, full, torch.from_numpy(budgets), ctx.lr,
                                self.local.gamma, self.local.check_every)
        up = self.algo.finish(clients, start, res, ctx)
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
        return up, res, ctime, budgets, stragglers

    # ------------------------------------------------------------------ processes
    def run(self, rounds: int, start_round: int = 1,
            on_round: Callable[[int, RoundInfo], bool] | None = None) -> None:
        """Simulate cloud rounds start_round..rounds; on_round returns False to stop."""
        self.env.process(self._cloud(rounds, start_round, on_round))
        self.env.run()

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

    def _client(self, k: int, edge: str, down_bytes: float, ctime: float, up_bytes: float,
                relay: bool, collector: Collector, rec: ClientRecord, dropped: bool):
        name = self.topo.clients[k]
        yield self.send(edge, name, down_bytes)
        self.trace.add(self.env.now, name, "compute_start", "", rec.steps)
        yield self.env.timeout(ctime)
        self.trace.add(self.env.now, name, "compute_end", "", rec.steps)
        if dropped:
            return
        t_up = self.env.now
        yield self.send(name, edge, up_bytes)
        if relay:
            yield self.send(edge, "cloud", up_bytes)
        rec.upload_s = self.env.now - t_up
        if not collector.arrive(k):
            rec.dropped = True
            self.ledger.wasted += up_bytes * (2 if relay else 1)

    def _records(self, t: int, r: int, sel: np.ndarray, res: SolveResult, budgets: np.ndarray,
                 ctime: np.ndarray, stragglers: np.ndarray, drop: np.ndarray) -> list[ClientRecord]:
        return [ClientRecord(t, r, int(k), int(res.steps[i]), int(budgets[i]), float(ctime[i]),
                             float("nan"), bool(drop[i]), bool(stragglers[i]),
                             float(res.gamma[i])) for i, k in enumerate(sel)]

    def _flat_round(self, t: int, info: RoundInfo):
        """Flat algorithms: edges relay every message; the cloud aggregates the clients."""
        sel = self.select(t)
        start = self.algo.global_model()
        up, res, ctime, budgets, strag = self.train(t, 0, sel, start, info)
        drop = self._dropped(strag)
        down_bytes = message_bytes(self.algo.downlink())
        up_bytes = row_bytes(up.tensors)
        recs = self._records(t, 0, sel, res, budgets, ctime, strag, drop)
        col = Collector(self.env, int((~drop).sum()), self.sc.train.round)
        for e in range(self.topo.n_edges):
            members = [i for i, k in enumerate(sel) if self.topo.edge_of[k] == e]
            if members:
                self.env.process(self._relay_edge(e, members, sel, down_bytes, ctime, up_bytes,
                                                  col, recs, drop))
        yield col.closed
        pos = {int(k): i for i, k in enumerate(sel)}
        arrived = np.array(sorted(col.arrived), dtype=np.int64)
        rows = torch.tensor([pos[int(k)] for k in arrived], dtype=torch.long)
        ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
        self.algo.aggregate(torch.from_numpy(arrived),
                            Upload(tuple(x[rows] for x in up.tensors)), ctx)
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        info.selected, info.reported = len(sel), len(arrived)
        info.failed = len(sel) - len(arrived)
        info.clients.extend(recs)

    def _relay_edge(self, e: int, members: list[int], sel: np.ndarray, down_bytes: float,
                    ctime: np.ndarray, up_bytes: np.ndarray, col: Collector,
                    recs: list[ClientRecord], drop: np.ndarray):
        edge = self.topo.edges[e]
        yield self.send("cloud", edge, down_bytes)
        for i in members:
            self.env.process(self._client(int(sel[i]), edge, down_bytes, float(ctime[i]),
                                          float(up_bytes[i]), True, col, recs[i], bool(drop[i])))

    def _hier_round(self, t: int, info: RoundInfo):
        """Hierarchical algorithms: each edge runs R edge rounds, then uploads once."""
        sel = self.select(t)
        down_bytes = message_bytes(self.algo.downlink())
        col = Collector(self.env, 0, self.sc.train.round)
        edge_sel = [sel[self.topo.edge_of[sel] == e] for e in range(self.topo.n_edges)]
        active = [e for e in range(self.topo.n_edges) if len(edge_sel[e])]
        col = Collector(self.env, len(active), self.sc.train.round)
        uploads: dict[int, tuple[torch.Tensor, ...]] = {}
        for e in active:
            self.env.process(self._hier_edge(t, e, edge_sel[e], down_bytes, col, uploads, info))
        yield col.closed
        arrived = sorted(col.arrived)
        weights = torch.tensor([float(self.counts[edge_sel[e]].sum()) for e in arrived],
                               dtype=torch.float64)
        ctx = RoundCtx(t, 0, self.lr(t), torch.zeros(0))
        self.algo.cloud_aggregate(arrived, [uploads[e] for e in arrived], weights, ctx)
        self.trace.add(self.env.now, "cloud", "aggregate", "", len(arrived))
        info.selected = len(sel)
        info.reported = sum(len(edge_sel[e]) for e in arrived)
        info.failed = info.selected - info.reported

    def _hier_edge(self, t: int, e: int, members: np.ndarray, down_bytes: float,
                   cloud_col: Collector, uploads: dict, info: RoundInfo):
        edge = self.topo.edges[e]
        yield self.send("cloud", edge, down_bytes)
        es = self.algo.edge_start(self.algo.global_model())
        for r in range(self.entry.edge_rounds):
            start = self.algo.edge_model(es)
            up, res, ctime, budgets, strag = self.train(t, r, members, start, info)
            drop = self._dropped(strag)
            recs = self._records(t, r, members, res, budgets, ctime, strag, drop)
            col = Collector(self.env, int((~drop).sum()), self.sc.train.edge_round)
            ub = row_bytes(up.tensors)
            db = message_bytes((start,))
            for i, k in enumerate(members):
                self.env.process(self._client(int(k), edge, db, float(ctime[i]), float(ub[i]),
                                              False, col, recs[i], bool(drop[i])))
            yield col.closed
            pos = {int(k): i for i, k in enumerate(members)}
            arrived = np.array(sorted(col.arrived), dtype=np.int64)
            rows = torch.tensor([pos[int(k)] for k in arrived], dtype=torch.long)
            ctx = RoundCtx(t, r, self.lr(t), torch.zeros(0))
            es = self.algo.edge_aggregate(es, torch.from_numpy(arrived),
                                          Upload(tuple(x[rows] for x in up.tensors)), ctx)
            self.trace.add(self.env.now, edge, "aggregate", "", len(arrived))
            info.clients.extend(recs)
        msg = self.algo.edge_upload(es)
        yield self.send(edge, "cloud", message_bytes(msg))
        if cloud_col.arrive(e):
            uploads[e] = msg

    def _dropped(self, stragglers: np.ndarray) -> np.ndarray:
        """Stragglers whose work the algorithm discards (FedAvg's rule in FedProx's experiment)."""
        mode = self.sc.stragglers.drop
        if mode == "never" or not stragglers.any():
            return np.zeros_like(stragglers)
        if mode == "always" or self.entry.name == "fedavg":
            return stragglers.copy()
        return np.zeros_like(stragglers)
