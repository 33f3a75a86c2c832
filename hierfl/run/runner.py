"""Running a scenario: build the world once, then simulate every algorithm on the same system,
writing its outputs as the run goes."""
from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping

import torch

from ..config.schema import AlgorithmEntry, Scenario
from ..exec import Executor, RoundRunner, executor_for
from ..learn.plugin_program import with_loss
from ..outputs import Background, atomic_npz, read_metrics, write_run_summary
from ..outputs.manifest import end_manifest, read_manifest, start_manifest
from ..outputs.columns import metric_columns
from ..outputs.lock import output_lock
from ..scenario.checks import mobility_moves
from ..sim.engine import Simulation
from ..sim.failures import Failures
from ..sim.mobility import Mobility
from ..sim.trace import Trace
from ..allocator import keep_freed_memory
from .checkpoint import (CHECKPOINT, Prefix, check_outputs, cut_to, load_checkpoint,
                         remove_stale_temps, restore)
from .fingerprint import (check_resume, differences, read_fingerprint, refuse, run_fingerprint,
                          write_fingerprint)
from .overrides import write_scenario_copy
from .progress import Progress
from .recorder import (AlgoResult, OutputFiles, RoundRecorder, final_params, output_paths)
from .world import World, build_world, make_algorithm


def _finished(entry: AlgorithmEntry, paths: dict[str, str], progress: bool) -> AlgoResult:
    """An algorithm a resumed run had finished before: its rows, nothing redone."""
    if progress:
        print(f"[{entry.label}] already finished; kept", file=sys.stderr)
    return AlgoResult(entry.label, read_metrics(paths["metrics"], entry.label).rows)


def make_simulation(sc: Scenario, entry: AlgorithmEntry, world: World, algo, executor: Executor,
                    trace: Trace, start_time: float = 0.0) -> Simulation:
    """The engine for one algorithm, with its round runner (the bridge to the executor)."""
    spec = sc.topology
    failures = (Failures.from_spec(spec, sc.seed, world.availability) if spec is not None
                else None)
    runner = RoundRunner(sc, entry, world.topo, world.data, world.model, algo, executor)
    sim = Simulation(sc, entry, world.topo, runner, trace, failures,
                     getattr(spec, "link_sharing", "fifo"), start_time=start_time,
                     mobility=entry_mobility(sc, entry, world.topo))
    plugin = getattr(algo, "plugin_guard", None)
    if plugin is not None:                  # a plugin's errors name the engine's round
        plugin.round_of = lambda: sim.round
    return sim


def entry_mobility(sc: Scenario, entry: AlgorithmEntry, topo) -> Mobility | None:
    """The entry's client mobility on this topology (its moves file read), or None."""
    spec = entry.mobility_spec(sc.topology)
    if spec is None:
        return None
    return Mobility(spec, sc.seed, topo.edges, topo.edge_of, topo.parent,
                    mobility_moves(sc, entry, topo))


def run_algorithm(sc: Scenario, entry: AlgorithmEntry, world: World, out_dir: str,
                  progress: bool = True, keep_trace: bool = True,
                  resume: bool = False, stop_after: int | None = None,
                  executor: Executor | None = None, fingerprint: dict | None = None,
                  checked: dict[str, Prefix] | None = None) -> AlgoResult:
    """Simulate one algorithm entry, writing OUT/<label>/. With `resume`, continue from the
    checkpoint left by an interrupted run (refused if the run's fingerprint changed);
    `stop_after` pauses after that round (leaving a checkpoint, as an interruption would).
    `executor`: default, the scenario's (train.executor). `checked`: the output files'
    digests as `check_checkpoints` found them (else read again here)."""
    torch.set_num_threads(sc.train.executor.threads)
    keep_freed_memory()
    os.makedirs(out_dir, exist_ok=True)
    fp = fingerprint if fingerprint is not None else run_fingerprint(sc, world)
    if resume:
        remove_stale_temps(out_dir)
    ckpt_path = os.path.join(out_dir, CHECKPOINT)
    final_path = os.path.join(out_dir, "final_params.npz")
    paths = output_paths(out_dir)
    if resume and os.path.exists(final_path) and not os.path.exists(ckpt_path):
        return _finished(entry, paths, progress)
    if entry.local.loss is not None:        # train.local.loss: the model's loss replaced
        world = dataclasses.replace(world, model=with_loss(world.model, entry.local.loss))
    algo = make_algorithm(sc, entry, world)
    meta = None
    if resume and os.path.exists(ckpt_path):
        meta, state = load_checkpoint(ckpt_path)
        changed = differences(meta["fingerprint"], fp) if "fingerprint" in meta else []
        if changed:
            raise refuse(sc, ckpt_path, changed)
        checked = checked or check_outputs(paths, meta)
        algo.load_state_tensors(state)
        cut_to(paths, meta["offsets"], meta["round"])
    trace = Trace(keep=keep_trace)
    sim = make_simulation(sc, entry, world, algo, executor or executor_for(sc.train.executor),
                          trace, start_time=meta["now"] if meta else 0.0)
    if meta:
        restore(sim, meta, state)
    files = OutputFiles(paths, append=meta is not None,
                        metric_columns=metric_columns(sim.ledger.levels), prefixes=checked)
    result = AlgoResult(entry.label, trace=trace)
    if meta:
        result.rows = read_metrics(paths["metrics"], entry.label).rows
    writer = Background()       # checkpoints are written while the next rounds run
    record = RoundRecorder(sc, world, algo, sim, files, result,
                           Progress(entry.label, sc.train.rounds, progress,
                                    sc.train.duration_s), ckpt_path, writer,
                           stop_after)
    record.fingerprint = fp
    try:
        if meta is not None:
            sim.run(sc.train.rounds, meta["round"] + 1, record)
        elif record(0, None):
            sim.run(sc.train.rounds, 1, record)
        record.settle_end()
    finally:
        files.close()
        result.closed_form_rounds = sim.closed_form_rounds
        writer.wait()                 # the last checkpoint is complete (or its error raised)
    if result.paused_at is not None:
        return result
    atomic_npz(final_path, final_params(algo))
    if os.path.exists(ckpt_path):
        os.unlink(ckpt_path)
    return result


def check_checkpoints(sc: Scenario) -> dict[str, dict[str, Prefix]]:
    """Every algorithm's checkpoint in OUT checked (its arrays' checksums, the output files it
    vouches for): a resume refuses a changed one before it rewrites anything. Returns, per
    label, the output files' digests to go on from."""
    out = {}
    for entry in sc.algorithms:
        folder = os.path.join(sc.output, entry.label)
        ckpt = os.path.join(folder, CHECKPOINT)
        if os.path.isfile(ckpt):
            meta, _ = load_checkpoint(ckpt, note=True)
            out[entry.label] = check_outputs(output_paths(folder), meta)
    return out


def run_scenario(sc: Scenario, progress: bool = True, graph=None,
                 resume: bool = False, stop_after: int | None = None,
                 keep_trace: bool = True, executor: Executor | None = None,
                 borrowed: Mapping[str, Callable[[str], object]] | None = None
                 ) -> dict[str, AlgoResult]:
    """Every output of a run, in order: OUT/summary.json, scenario.yaml and fingerprint.json,
    the manifest OUT/run.json, each algorithm's OUT/<label>/ (run_algorithm), the manifest's
    end. keep_trace=False: trace events leave memory once written to trace.csv. `executor`:
    default, the scenario's (train.executor). `borrowed`: {label: fill} for the algorithms
    another run has run with the same numbers (a sweep's points, sweep/reuse.py): fill(folder)
    puts that run's OUT/<label>/ there instead of running it again (no result is returned
    for it). OUT is locked for the whole run (outputs/lock.py): a run while another process
    writes to OUT is refused, a ScenarioError naming that process."""
    world = build_world(sc, graph)
    fp = run_fingerprint(sc, world)
    with output_lock(sc.output, sc.file, "output"):       # one writer per output folder
        return _run_locked(sc, world, fp, progress, resume, stop_after, keep_trace, executor,
                           borrowed)


def _run_locked(sc: Scenario, world: World, fp: dict, progress: bool, resume: bool,
                stop_after: int | None, keep_trace: bool, executor: Executor | None,
                borrowed: Mapping[str, Callable[[str], object]] | None
                ) -> dict[str, AlgoResult]:
    checked = {}
    if resume:                        # before anything in OUT is rewritten:
        check_resume(sc, fp)          # the same run,
        read_manifest(sc.output)      # its manifest readable,
        checked = check_checkpoints(sc)     # its checkpoints and outputs as they were written
        remove_stale_temps(sc.output)
    if not (resume and read_fingerprint(sc.output) is not None):
        write_run_summary(sc, world)  # OUT/scenario.yaml, OUT/summary.json for the report
        write_scenario_copy(sc)       # command-line overrides shown in OUT/scenario.yaml
        write_fingerprint(sc.output, fp)
    start_manifest(sc)                # OUT/run.json: which scenario these results belong to
    results = {}
    for entry in sc.algorithms:
        folder = os.path.join(sc.output, entry.label)
        if borrowed and entry.label in borrowed:
            borrowed[entry.label](folder)
            continue
        results[entry.label] = run_algorithm(sc, entry, world, folder, progress,
                                             keep_trace=keep_trace, resume=resume,
                                             stop_after=stop_after, executor=executor,
                                             fingerprint=fp, checked=checked.get(entry.label))
    end_manifest(sc.output, all(r.paused_at is None for r in results.values()))
    return results
