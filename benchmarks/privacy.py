"""What privacy, robust rules, attacks and secure aggregation add to a run (issue 43: clipping
and noise at most +15% over a batched W2 round), alternated in one process on one machine.

    PYTHONPATH=. python benchmarks/privacy.py [--reps 5] [--rounds 100]

W2 (benchmarks/run.py: 1,000 clients, 100 per round, logreg on synthetic dim 60, E = 1 of batch
10; FedAvg only) run whole through `run_scenario` (simulation, training, evaluation, outputs)
with each setting below, one after the other per repetition (A B C ... A B C ...); the medians
of CPU seconds (this process, one torch thread) and their ratio to the plain run are printed,
and the share of the run spent inside exec/protect.py (client_side + combine + accounting),
timed by wrapping those methods, the part the goal is about."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import w2  # noqa: E402

from hierfl.exec import protect  # noqa: E402
from hierfl.run import run_scenario  # noqa: E402
from hierfl.scenario.load import load  # noqa: E402

DP = {"kind": "client_level", "clip": 1.0, "noise_multiplier": 1.0}
SETTINGS = {
    "plain": {},
    "DP, noise at the cloud": {"privacy": DP},
    "DP, adaptive clip": {"privacy": {**DP, "adaptive": {"count_noise": 5.0}}},
    "DP, noise at each client": {"privacy": {**DP, "noise_at": "client"}},
    "sign_flip 10% + median": {"attack": {"kind": "sign_flip", "fraction": 0.1},
                               "aggregate": {"cloud": {"kind": "median"}}},
    "sign_flip 10% + krum f=10": {"attack": {"kind": "sign_flip", "fraction": 0.1},
                                  "aggregate": {"cloud": {"kind": "krum", "f": 10}}},
    "secagg at the cloud": {"secure_aggregation": {"at": "cloud"}},
}
INSIDE = ("client_side", "combine", "close_round", "trips")


class Clock:
    """CPU seconds inside Protect's methods (wrapped for the run, unwrapped after)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.saved = {m: getattr(protect.Protect, m) for m in INSIDE}

    def __enter__(self):
        for name, fn in self.saved.items():
            def timed(*a, _fn=fn, **kw):
                t = time.process_time()
                try:
                    return _fn(*a, **kw)
                finally:
                    self.total += time.process_time() - t
            setattr(protect.Protect, name, timed)
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in self.saved.items():
            setattr(protect.Protect, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args()
    torch.set_num_threads(1)
    times: dict = {k: [] for k in SETTINGS}
    inside: dict = {k: [] for k in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps + 1):
            for k, keys in SETTINGS.items():
                doc = w2(args.rounds)
                doc["algorithms"] = [{"name": "fedavg", **keys}]
                path = os.path.join(tmp, f"w2_{rep}_{len(times[k])}.yaml")
                with open(path, "w") as fh:
                    yaml.safe_dump(doc, fh)
                sc = load(path, out=os.path.join(tmp, f"out{rep}_{abs(hash(k))}"))
                with Clock() as clock:
                    t = time.process_time()
                    run_scenario(sc, progress=False, report=False) \
                        if "report" in run_scenario.__code__.co_varnames else \
                        run_scenario(sc, progress=False)
                    spent = time.process_time() - t
                if rep:                                   # the first round of runs warms up
                    times[k].append(spent)
                    inside[k].append(clock.total)
    base = statistics.median(times["plain"])
    print(f"W2 whole run (FedAvg, {args.rounds} rounds, run_scenario), CPU s, median of "
          f"{args.reps}")
    for k in SETTINGS:
        med, ins = statistics.median(times[k]), statistics.median(inside[k])
        print(f"  {k:28s} {med:7.2f} s  {med / base:5.2f}x plain   inside protect "
              f"{ins:6.3f} s = {100 * ins / base:5.1f}% of the plain run")


if __name__ == "__main__":
    main()
