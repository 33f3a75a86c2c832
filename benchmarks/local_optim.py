"""What the local optimizers add to a batched round (issue: momentum SGD and Adam at most +10%
over plain SGD), alternated in one run on one machine.

    PYTHONPATH=. python benchmarks/local_optim.py [--reps 7]

Workloads: W2's round (100 clients of 80 training rows, synthetic dim 60, 10 classes, logreg,
E = 1 of batch 10: 8 steps each) and the small digits CNN (20 clients, 10 steps of batch 10 on
8x8 images, channels 8/16, dense 32). Each repetition runs plain SGD, SGD with momentum 0.9 and
weight decay 5e-4, and Adam one after the other (and plain SGD taken one step at a time, as
every optimizer is: what the fused path saves) through the batched executor (the solver a run
uses) on the same plan; the medians of CPU time (single thread) and the ratios are printed."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from hierfl.config.schema import ModelSpec
from hierfl.exec.local import BatchedExecutor
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.learn.optim import SGD, Adam
from hierfl.learn.solver import TermsProgram
from hierfl.models.registry import build_model

OPTIMIZERS = {"plain SGD": None, "SGD, one step at a time": SGD(), "SGD momentum + wd": SGD(momentum=0.9, weight_decay=5e-4),
              "Adam": Adam()}


def workload(name: str, spec: ModelSpec, shape: tuple, c: int, n: int, steps: int, b: int):
    g = torch.Generator().manual_seed(0)
    d = int(np.prod(shape))
    model = build_model(spec, d, 10, 10, shape)
    counts = np.full(c, n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    x = torch.randn(int(offsets[-1]), d, generator=g)
    y = torch.randint(0, 10, (int(offsets[-1]),), generator=g)
    clients = np.arange(c)
    budgets = np.full(c, steps)
    plan = minibatch_plan(offsets, clients, b, budgets, 0, 1, 0, x, y)
    full = full_plan(offsets, clients, x, y).at(0)
    start = model.init(g).expand(c, -1).clone()

    def run(opt):
        prog = TermsProgram(model, start, optimizer=opt)
        BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), 0.05, None, 5,
                              measure=False)
    return name, run


def whole_w2(reps: int) -> None:
    """W2 (benchmarks/run.py, FedAvg only, 100 rounds) run whole through `run_scenario`
    (simulation, planning, evaluation, outputs), plain SGD against momentum + wd and Adam,
    alternated; CPU seconds (this process, one torch thread), medians."""
    import os
    import sys
    import tempfile

    import yaml

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from run import w2

    from hierfl.run import run_scenario
    from hierfl.scenario.load import load

    opts = {"plain SGD": None, "SGD momentum + wd": {"name": "sgd", "momentum": 0.9,
                                                     "weight_decay": 5e-4},
            "Adam": {"name": "adam"}}
    times: dict = {k: [] for k in opts}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(reps + 1):
            for k, opt in opts.items():
                doc = w2(100)
                doc["algorithms"] = [{"name": "fedavg"}]
                if opt is not None:
                    doc["train"]["local"]["optimizer"] = opt
                path = os.path.join(tmp, f"w2_{len(times[k])}_{k[:4]}.yaml")
                with open(path, "w") as fh:
                    yaml.safe_dump(doc, fh)
                sc = load(path, out=os.path.join(tmp, f"out{rep}{k[:4]}"))
                t = time.process_time()                  # CPU time: steadier here
                run_scenario(sc, progress=False)
                if rep:                                   # the first round of runs warms up
                    times[k].append(time.process_time() - t)
    base = statistics.median(times["plain SGD"])
    print("W2 whole run (FedAvg, 100 rounds, run_scenario)")
    for k, ts in times.items():
        med = statistics.median(ts)
        print(f"  {k:24s} {med:8.2f} s   {med / base:5.2f}x plain SGD")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cases = [workload("W2 round (logreg, 100 clients x 8 steps)", ModelSpec(name="logreg"),
                      (60,), 100, 80, 8, 10),
             workload("digits CNN (20 clients x 10 steps)",
                      ModelSpec(name="cnn", options={"channels": [8, 16], "dense": 32}),
                      (1, 8, 8), 20, 100, 10, 10)]
    whole_w2(max(3, args.reps // 2))
    for name, run in cases:
        times = {k: [] for k in OPTIMIZERS}
        for opt in OPTIMIZERS.values():
            run(opt)                                   # warm
        for _ in range(args.reps):
            for k, opt in OPTIMIZERS.items():          # alternated: A B C A B C ...
                t = time.process_time()
                run(opt)
                times[k].append(time.process_time() - t)
        base = statistics.median(times["plain SGD"])
        print(name)
        for k, ts in times.items():
            med = statistics.median(ts)
            print(f"  {k:24s} {med * 1e3:8.2f} ms  {med / base:5.2f}x plain SGD")


if __name__ == "__main__":
    main()
