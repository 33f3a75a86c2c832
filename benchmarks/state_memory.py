"""Per-client state of the drift-correcting algorithms at scale: 100,000 clients of a
610-parameter model (logreg 60 -> 10). Each algorithm is built, initialised and run for a few
rounds of 100 clients (real programs, solver, finish and aggregate on random data) in a fresh
process; we report the bytes of its state tensors and the resident-memory growth.

    python benchmarks/state_memory.py [--clients N] [--algos scaffold,feddyn,feddc]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def one(name: str, n_clients: int, rounds: int = 3, per_round: int = 100) -> dict:
    import numpy as np
    import torch

    from hierfl.algorithms.base import RoundCtx, Setup
    from hierfl.algorithms.registry import REGISTRY
    from hierfl.learn.batches import full_plan, minibatch_plan
    from hierfl.learn.solver import solve
    from hierfl.models.functional import Layer, Model
    from hierfl.config.schema import LocalSpec

    torch.set_num_threads(1)
    model = Model([Layer(60, 10, True)], "classification", "logreg")
    g = torch.Generator().manual_seed(0)
    counts = np.full(n_clients, 20, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    cls = REGISTRY[name]
    setup = Setup(model, n_clients, torch.from_numpy(counts.astype(np.float64)),
                  LocalSpec(steps=5, batch_size=10, lr=0.05), seed=0)
    before = rss_mb()
    algo = cls(cls.Params(), setup)
    algo.init(model.init(g))
    after_init = rss_mb()
    state_bytes = sum(t.numel() * t.element_size() for t in algo.state_tensors().values())
    rng = np.random.default_rng(0)
    for t in range(1, rounds + 1):
        sel = np.sort(rng.choice(n_clients, per_round, replace=False))
        # data of the selected clients only (rows laid out as if all clients had data)
        x = torch.randn(int(offsets[-1]), 60, generator=g) if t == 1 else x  # noqa: F821
        y = torch.randint(0, 10, (int(offsets[-1]),), generator=g) if t == 1 else y  # noqa: F821
        ctx = RoundCtx(t, 0, 0.05, torch.full((per_round,), 5))
        clients = torch.from_numpy(sel)
        start = algo.global_model()
        prog = algo.program(clients, start, ctx)
        budgets = np.full(per_round, 5)
        plan = minibatch_plan(offsets, sel, 10, budgets, 0, t, 0, x, y)
        full = full_plan(offsets, sel, x, y).at(0)
        with torch.no_grad():
            res = solve(prog, plan, full, torch.from_numpy(budgets), 0.05)
        up = algo.finish(clients, start, res, ctx)
        algo.aggregate(clients, up, ctx)
    data_mb = (x.numel() * 4 + y.numel() * 8) / 2 ** 20
    return {"algorithm": name, "clients": n_clients, "params": model.n_params,
            "state_mb": state_bytes / 2 ** 20, "rss_growth_init_mb": after_init - before,
            "rss_growth_after_rounds_mb": rss_mb() - before - data_mb,
            "finite": bool(torch.isfinite(algo.global_model()).all())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=100_000)
    ap.add_argument("--algos", default="scaffold,feddyn,feddc")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.clients)))
        return 0
    out = []
    for name in args.algos.split(","):
        p = subprocess.run([sys.executable, __file__, "--one", name, "--clients",
                            str(args.clients)], capture_output=True, text=True)
        if p.returncode != 0:
            out.append({"algorithm": name, "error": p.stderr.strip().splitlines()[-1:]})
        else:
            out.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(out[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
