"""Running a scenario: build the system and the data once, then simulate every algorithm on the
same system, writing metrics as the run goes."""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from . import seeding
from .algorithms.base import Algorithm, Setup
from .algorithms.registry import get
from .data import FederatedData, load_data
from .exec.local import make_executor
from .io_util import Background, CsvLog, atomic_npz
from .learn.evaluate import dissimilarity, global_metrics, personal_accuracy
from .models.functional import Model
from .models.registry import scenario_model
from .outputs import CLIENT_COLUMNS, METRIC_COLUMNS, client_lines
from .report.summary import write_run_summary
from .config.schema import AlgorithmEntry, Scenario
from .config.errors import ScenarioError
from .config.limits import guard_resources
from .sim.engine import RoundInfo, Simulation
from .sim.failures import Failures
from .sim.links import Ledger
from .sim.trace import Trace
from .topology.graph import Topology, build_graph

@dataclass
class World:
    """The simulated system and data shared by every algorithm of a scenario."""

    topo: Topology
    data: FederatedData
    model: Model
    w0: torch.Tensor


@dataclass
class AlgoResult:
    label: str
    rows: list[dict] = field(default_factory=list)
    diverged_at: int | None = None
    trace: Trace | None = None
    paused_at: int | None = None
    nonfinite_clients: list[int] = field(default_factory=list)
    closed_form_rounds: int = 0     # rounds timed in closed form (sim/closed_form.py)


def build_world(sc: Scenario, graph=None) -> World:
    tfile = sc.topology_file
    topo = Topology.from_graph(graph if graph is not None else build_graph(sc.topology, sc.seed,
                                                                          tfile), tfile)
    tiers = max(topo.depth[c] for c in topo.clients) - 1          # aggregator tiers
    for i, entry in enumerate(sc.algorithms):
        rounds = getattr(entry.params, "tier_rounds", None)
        if rounds is not None and len(rounds) != tiers:
            raise ScenarioError.one(sc.file, f"algorithms[{i}].tier_rounds", list(rounds),
                                    f"one entry per aggregator tier, from the top: this "
                                    f"topology has {tiers}")
    data = load_data(sc, topo.n_clients)
    model = scenario_model(sc.file, sc.model, data)
    guard_resources(sc, topo.n_clients, topo.graph.number_of_nodes() - topo.n_clients, data.dim,
                    data.out_dim, len(data.x), model.n_params)  # before the states are allocated
    w0 = model.init(seeding.torch_gen(sc.seed, "model-init"), zeros=sc.model.init == "zeros")
    return World(topo, data, model, w0)


def make_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World) -> Algorithm:
    cls = get(entry.name)
    setup = Setup(world.model, world.topo.n_clients,
                  torch.from_numpy(world.data.counts.astype(np.float64)), entry.local, sc.seed,
                  world.topo.n_edges)
    algo = cls(entry.params, setup)
    algo.init(world.w0)
    return algo


class Progress:
    """One line per algorithm on stderr: rounds done, simulated time, accuracy, ETA."""

    def __init__(self, label: str, rounds: int, enabled: bool):
        self.label, self.rounds, self.enabled = label, rounds, enabled
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def update(self, t: int, row: dict, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        el = now - self.t0
        eta = el / max(t, 1) * (self.rounds - t)
        acc = row.get("test_acc", float("nan"))
        msg = (f"[{self.label}] round {t}/{self.rounds}  sim {row['sim_time_s']:.1f}s  "
               f"acc {acc:.3f}  elapsed {el:.0f}s  ETA {eta:.0f}s")
        end = "\n" if (final or not self.tty) else ""
        print(("\r" if self.tty else "") + msg, end=end, file=sys.stderr, flush=True)


def sparsity(personal: torch.Tensor | None) -> float:
    if personal is None:
        return float("nan")
    return float((personal == 0).double().mean())


CHECKPOINT = "checkpoint.npz"


def checkpoint_arrays(t: int, algo: Algorithm, sim: Simulation,
                      offsets: dict[str, int]) -> dict[str, np.ndarray]:
    """Everything needed to continue bit-for-bit, as plain arrays (copies, taken now): the
    algorithm's state tensors, the clock, the byte ledger and the output files' lengths. Random
    draws are keyed by (seed, purpose, ids), so no generator state is needed."""
    meta = {"round": t, "now": sim.env.now, "ledger": sim.ledger.as_list(), "offsets": offsets,
            "trace_count": sim.trace.count}
    arrays = {f"state/{k}": v.detach().cpu().numpy().copy()
              for k, v in algo.state_tensors().items()}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return arrays


def save_checkpoint(path: str, t: int, algo: Algorithm, sim: Simulation,
                    offsets: dict[str, int], writer: Background | None = None) -> None:
    """The checkpoint as one atomic npz; with `writer`, the snapshot is taken now and the file
    written in its thread (the previous checkpoint stays valid until the rename)."""
    arrays = checkpoint_arrays(t, algo, sim, offsets)
    if writer is None:
        atomic_npz(path, arrays)
    else:
        writer.submit(lambda: atomic_npz(path, arrays))


def load_checkpoint(path: str) -> tuple[dict, dict[str, torch.Tensor]]:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["meta"]).decode())
        state = {k[len("state/"):]: torch.from_numpy(z[k].copy()) for k in z.files
                 if k.startswith("state/")}
    return meta, state


def _truncate(path: str, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def run_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World, out_dir: str,
                  progress: bool = True, keep_trace: bool = True,
                  resume: bool = False, stop_after: int | None = None) -> AlgoResult:
    """Simulate one algorithm entry, writing OUT/<label>/. With `resume`, continue from the
    checkpoint left by an interrupted run; `stop_after` pauses after that round (leaving a
    checkpoint, as an interruption would)."""
    torch.set_num_threads(sc.train.executor.threads)
    os.makedirs(out_dir, exist_ok=True)
    ckpt_path = os.path.join(out_dir, CHECKPOINT)
    final_path = os.path.join(out_dir, "final_params.npz")
    paths = {k: os.path.join(out_dir, f"{k}.csv") for k in ("metrics", "clients", "trace")}
    if resume and os.path.exists(final_path) and not os.path.exists(ckpt_path):
        from .report.records import read_metrics   # finished before: nothing to redo
        done = AlgoResult(entry.label, read_metrics(paths["metrics"], entry.label).rows)
        if progress:
            print(f"[{entry.label}] already finished; kept", file=sys.stderr)
        return done
    algo = make_algorithm(sc, entry, world)
    meta = None
    if resume and os.path.exists(ckpt_path):
        meta, state = load_checkpoint(ckpt_path)
        algo.load_state_tensors(state)
        for k, size in meta["offsets"].items():
            _truncate(paths[k], size)
    ex = sc.train.executor
    executor = make_executor(ex.kind, address=ex.address, clients_per_task=ex.clients_per_task) \
        if ex.kind == "ray" else make_executor(ex.kind)
    trace = Trace(keep=keep_trace)
    spec = sc.topology
    failures = Failures.from_spec(spec, sc.seed) if spec is not None else None
    sim = Simulation(sc, entry, world.topo, world.data, algo, executor, trace, failures,
                     getattr(spec, "link_sharing", "fifo"),
                     start_time=meta["now"] if meta else 0.0)
    if meta:
        restored = Ledger.from_list(meta["ledger"])
        sim.ledger.up.update(restored.up)
        sim.ledger.down.update(restored.down)
        sim.ledger.wasted = restored.wasted
        trace.count = meta["trace_count"]
    metrics = CsvLog(paths["metrics"], METRIC_COLUMNS, append=meta is not None)
    clients_log = CsvLog(paths["clients"], CLIENT_COLUMNS, append=meta is not None)
    trace_fh = open(paths["trace"], "a" if meta else "w", newline="")
    if not meta:
        trace_fh.write(",".join(Trace.HEADER) + "\n")
    result = AlgoResult(entry.label, trace=trace)
    if meta:
        from .report.records import read_metrics
        result.rows = read_metrics(paths["metrics"], entry.label).rows
    bar = Progress(entry.label, sc.train.rounds, progress)
    rounds = sc.train.rounds
    every = sc.train.checkpoint_every
    writer = Background()       # checkpoints are written while the next rounds run

    def record(t: int, info: RoundInfo | None) -> bool:
        w = algo.global_model()
        evaluate = t % sc.train.eval_every == 0 or t == rounds or t == 0
        bad = not bool(torch.isfinite(w).all()) or float(w.norm()) > sc.train.divergence_bound
        loss, acc = (global_metrics(world.model, w, world.data) if evaluate and not bad
                     else (float("nan"), float("nan")))
        personal = algo.personal_models()
        p_acc = (personal_accuracy(world.model, personal, world.data)
                 if evaluate and personal is not None and not bad else float("nan"))
        if personal is not None and not bool(torch.isfinite(personal).all()):
            bad = True
        if evaluate and not math.isfinite(loss) and not bad:
            bad = True
        lg = sim.ledger
        recs = info.clients if info else []
        gam = [r.gamma for r in recs if math.isfinite(r.gamma)]
        row = {"round": t, "sim_time_s": sim.env.now, "bytes_up": lg.bytes_up,
               "bytes_down": lg.bytes_down, "bytes_client_edge": lg.tier("client_edge"),
               "bytes_edge_cloud": lg.tier("edge_cloud"), "bytes_wasted": lg.wasted,
               "train_loss": loss, "test_acc": acc, "personal_test_acc": p_acc,
               "personal_sparsity": sparsity(personal),
               "selected": info.selected if info else 0,
               "reported": info.reported if info else 0, "failed": info.failed if info else 0,
               "stragglers": sum(r.straggler for r in recs),
               "mean_gamma": float(np.mean(gam)) if gam else float("nan"),
               "bytes_up_client_edge": lg.up["client_edge"],
               "bytes_down_client_edge": lg.down["client_edge"],
               "bytes_up_edge_cloud": lg.up["edge_cloud"],
               "bytes_down_edge_cloud": lg.down["edge_cloud"],
               "diverged": int(bad)}
        m_every = sc.monitor.dissimilarity_every
        if m_every and not bad and (t % m_every == 0 or t == rounds):
            row["dissimilarity_B"], row["grad_variance"] = dissimilarity(world.model, w,
                                                                         world.data)
        metrics.row(row)
        clients_log.write(client_lines(recs))
        trace.flush_to(trace_fh)
        result.rows.append(row)
        bar.update(t, row, final=bad or t == rounds)
        if bad:
            result.diverged_at = t
            who = sorted(set(sim.nonfinite.get(t, [])))
            where = (f"; non-finite uploads from client(s) {', '.join(map(str, who[:20]))}"
                     f"{' ...' if len(who) > 20 else ''}" if who else "")
            print(f"warning: {entry.label} diverged at round {t} (non-finite or norm > "
                  f"{sc.train.divergence_bound:g}{where}); stopped, other algorithms continue",
                  file=sys.stderr)
            if who:
                result.nonfinite_clients = who
            return False
        pause = stop_after is not None and t >= stop_after and t < rounds
        if ((every and t % every == 0) or pause) and 0 < t < rounds and sim.quiescent:
            save_checkpoint(ckpt_path, t, algo, sim,
                            {"metrics": metrics.fh.tell(), "clients": clients_log.fh.tell(),
                             "trace": trace_fh.tell()}, writer)
            if pause:
                result.paused_at = t
                return False
        return True

    try:
        if meta is not None:
            sim.run(rounds, meta["round"] + 1, record)
        elif record(0, None):
            sim.run(rounds, 1, record)
    finally:
        metrics.close()
        clients_log.close()
        trace_fh.close()
        result.closed_form_rounds = sim.closed_form_rounds
        writer.wait()                 # the last checkpoint is complete (or its error raised)
    if result.paused_at is not None:
        return result
    arrays = {"global": algo.global_model().detach().double().numpy()}
    personal = algo.personal_models()
    if personal is not None:
        for k in range(personal.shape[0]):
            arrays[f"client_{k}"] = personal[k].detach().double().numpy()
    atomic_npz(final_path, arrays)
    if os.path.exists(ckpt_path):
        os.unlink(ckpt_path)
    return result


def run_scenario(sc: Scenario, progress: bool = True, graph=None,
                 resume: bool = False, stop_after: int | None = None,
                 keep_trace: bool = True) -> dict[str, AlgoResult]:
    """keep_trace=False: trace events leave memory once written to trace.csv."""
    world = build_world(sc, graph)
    os.makedirs(sc.output, exist_ok=True)
    write_run_summary(sc, world)      # OUT/scenario.yaml, OUT/summary.json for the report
    results = {}
    for entry in sc.algorithms:
        results[entry.label] = run_algorithm(sc, entry, world, os.path.join(sc.output, entry.label),
                                             progress, keep_trace=keep_trace, resume=resume,
                                             stop_after=stop_after)
    return results
