"""CPU seconds of the phases of one W2E run (issue 19: the bookkeeping around the executor), in
one process, on one thread: every phase is wrapped in a process-time timer (inclusive: a
phase's figure holds the phases indented under it), the run repeated, the best kept.

    python benchmarks/phases.py [--algo 0|1] [--rounds 100] [--repeat 4]

To compare a change with its base, run it alternately from each tree (a copy of this file in
the other tree's benchmarks/: it measures the tree it lies in)."""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

# (module, attribute path, label): the label's indent says which phase holds it
PHASES = [
    ("hierfl.exec.round", "RoundRunner.train", "RoundRunner.train"),
    ("hierfl.exec.local", "BatchedExecutor.run", "  executor.run"),
    ("hierfl.exec.round", "minibatch_plan", "  batch plan"),
    ("hierfl.exec.round", "RoundRunner._full", "  full-data batch"),
    ("hierfl.exec.round", "RoundRunner._compute_s", "  compute seconds"),
    ("hierfl.exec.round", "finite_rows", "  finite rows"),
    ("hierfl.exec.round", "RoundRunner.aggregate", "aggregation"),
    ("hierfl.sim.flat", "flat_round", "closed-form timing"),
    ("hierfl.sim.engine", "Simulation._apply", "closed form applied"),
    ("hierfl.sim.flat", "settle", "energy (settle)"),
    ("hierfl.sim.engine", "Simulation.select", "selection"),
    ("hierfl.run.recorder", "RoundRecorder.__call__", "recorder"),
    ("hierfl.run.recorder", "RoundRecorder.row", "  metrics row + evaluations"),
    ("hierfl.run.recorder", "client_lines", "  clients.csv"),
    ("hierfl.sim.trace", "Trace.flush_to", "  trace.csv"),
    ("hierfl.run.runner", "run_fingerprint", "run fingerprint"),
]


def timed(owner, name: str, acc: dict[str, float], label: str) -> None:
    """Replace owner.name by itself timed: its CPU seconds added to acc[label]."""
    fn = getattr(owner, name)

    def run(*a, **k):
        c = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[label] = acc.get(label, 0.0) + time.process_time() - c
    setattr(owner, name, functools.wraps(fn)(run))


def instrument(acc: dict[str, float]) -> None:
    """Wrap every phase (where it is looked up: the module that calls it) in a timer."""
    for mod_name, path, label in PHASES:
        owner = importlib.import_module(mod_name)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        timed(owner, name, acc, label)


def w2e_run(doc: str, repeat: int):
    """The command line (--algo, --rounds, --repeat) and, on one torch thread, a function
    giving W2E's (scenario, world, entry) in a folder."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--algo", type=int, default=0, help="0: fedavg, 1: scaffold")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=repeat)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    import run as bench
    from hierfl.run import build_world

    def world_in(tmp: str):
        sc = bench._scenario(bench.w2e(args.rounds), args.algo, args.rounds, "batched", tmp)
        return sc, build_world(sc), sc.algorithms[0]
    return args, world_in


def main() -> None:
    args, world_in = w2e_run(__doc__, 4)
    from hierfl.run import run_algorithm

    acc: dict[str, float] = {}
    instrument(acc)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sc, world, entry = world_in(tmp)
        for i in range(args.repeat + 1):           # the first run warms up, untimed
            acc.clear()
            c = time.process_time()
            run_algorithm(sc, entry, world, os.path.join(tmp, str(i)), progress=False,
                          keep_trace=False)
            acc["run_algorithm (whole)"] = time.process_time() - c
            if i and (not best or acc["run_algorithm (whole)"] < best["run_algorithm (whole)"]):
                best = dict(acc)
    print(f"W2E {entry.label}, {args.rounds} rounds, CPU s (best of {args.repeat}):")
    for label in ["run_algorithm (whole)"] + [p[2] for p in PHASES]:
        print(f"  {label:32s} {best.get(label, 0.0):.3f}")


if __name__ == "__main__":
    main()
