"""The event engine's speed (issue 19): trace events per second where rounds need the event loop.

A W8-like 3-tier system (10 regions, 100 edges, CLIENTS clients, PER_ROUND a round, a 5-feature
logreg so that learning is small) run with `train.timing: events` (every message and computation
through simpy), FedAvg (relayed flat rounds) and HierFAVG (tier_rounds [1, 2]), in this process.
Every RoundRunner method is timed, so the engine's own CPU seconds are Simulation.run's minus
the runner's (the per-round evaluation and output writing run inside it and stay counted);
the figure is trace events (send, recv, compute_start, compute_end, aggregate, ..., each one
a simulated event) per engine CPU second, and per CPU second of the whole run.

    python benchmarks/engine.py [--clients N] [--per-round M] [--rounds R] [--repeat K]

CPU seconds (time.process_time), the figure to trust on a shared machine; `uptime`'s load is
printed with each result. Results go to benchmarks/results/ENGINE.json."""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def scenario(clients: int, per_round: int, rounds: int, **train) -> dict:
    """W8's system (benchmarks/scale.py) with 100 edges, `per_round` clients a round and every
    round through the event loop."""
    from scale import w8
    doc = w8(rounds, clients)
    doc["name"] = "engine"
    doc["topology"]["tiers"][1]["count"] = 100
    doc["train"].pop("executor", None)
    doc["train"].update(clients_per_round=per_round, timing="events", **train)
    return doc


class RunnerClock:
    """CPU seconds spent inside RoundRunner methods (the learning side), nested calls once."""

    def __init__(self):
        self.cpu = 0.0
        self.sim = 0.0
        self.depth = 0

    def wrap(self, fn):
        @functools.wraps(fn)
        def timed(*a, **kw):
            if self.depth:
                return fn(*a, **kw)
            self.depth += 1
            c = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.cpu += time.process_time() - c
                self.depth -= 1
        return timed

    def install(self) -> None:
        from hierfl.exec.round import RoundRunner
        from hierfl.sim.engine import Simulation
        for name, fn in list(vars(RoundRunner).items()):
            if callable(fn) and not name.startswith("__") and not isinstance(fn, staticmethod):
                setattr(RoundRunner, name, self.wrap(fn))
        run = Simulation.run

        def timed_run(sim, *a, **kw):           # the simulation alone (no output writing)
            c = time.process_time()
            try:
                return run(sim, *a, **kw)
            finally:
                self.sim += time.process_time() - c
        Simulation.run = timed_run


def measure(clients: int, per_round: int, rounds: int, out: str) -> dict:
    import yaml
    from hierfl.run import build_world, run_algorithm
    from hierfl.scenario.load import load
    clock = RunnerClock()
    clock.install()
    path = os.path.join(out, "engine.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(scenario(clients, per_round, rounds), fh, sort_keys=False)
    sc = load(path, out=os.path.join(out, "run"))
    world = build_world(sc)
    res = {}
    for entry in sc.algorithms:
        folder = os.path.join(sc.output, entry.label)
        clock.cpu = clock.sim = 0.0
        c0 = time.process_time()
        run_algorithm(sc, entry, world, folder, progress=False)
        cpu = time.process_time() - c0
        with open(os.path.join(folder, "trace.csv")) as fh:
            events = sum(1 for _ in fh) - 1
        engine = clock.sim - clock.cpu
        res[entry.label] = {"events": events, "cpu_s": round(cpu, 3),
                            "sim_cpu_s": round(clock.sim, 3),
                            "runner_cpu_s": round(clock.cpu, 3), "engine_cpu_s": round(engine, 3),
                            "events_per_engine_s": round(events / engine),
                            "events_per_cpu_s": round(events / cpu)}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--per-round", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = measure(args.clients, args.per_round, args.rounds, tmp)
    res["load"] = os.getloadavg()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ENGINE.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print("ENGINE", json.dumps(res))


if __name__ == "__main__":
    main()
