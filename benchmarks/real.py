"""Real-workload benchmarks of issue 16: W6 (the FedAvg CNN on FEMNIST-shaped data), W7 (LEAF's
char-LSTM on Shakespeare-shaped data), W6s (a small CNN on 8x8 digits), one torch thread.

    PYTHONPATH=. python benchmarks/real.py [--only W6,W7,W6s] [--reps 2] [--rounds N]
                                           [--kinds loop,batched,sequential] [--before]

Per workload, three ways of doing the same FedAvg rounds, alternated in one process:
- "loop": the natural plain-torch program: per selected client, load the global weights into an
  `nn.Module`, one epoch of `torch.optim.SGD` steps over its shuffled minibatches (forward,
  cross-entropy, backward, step), then the sample-weighted mean of the client models;
- "batched" / "sequential": hierfl's `run_algorithm` (simulation, outputs and all) with the
  batched and the sequential executor;
- "stepwise" (--before): the batched executor with a loop-path model's steps taken one by one,
  as before `TorchModel.client_steps` (the before/after of that change in one run);
- "padded" (--kinds ...,padded): the batched executor with a loop-path model computing every
  row of a minibatch, the zero-weight padding of short last batches included, as before
  `TorchModel.real_rows`;
- "functorch" (--kinds ...,functorch): the batched executor with a vmap-path model's gradients
  taken through `torch.func.vmap` itself, as before models/grouped.py (the same bytes for an
  MLP; a CNN's convolutions equal to rounding: see models/grouped.py).
Data are random tensors of the right shapes, made in memory (no download). The figure compared
is training time: the loop's rounds against hierfl's `executor.run` time on the same rounds
(the last round is hierfl's measured one: it also takes the full-data gradients of the achieved
gamma, so it is left out of the comparison and only the rounds before it are counted). GFLOP/s
= 3 x forward FLOPs (counted from the module) x samples / seconds, next to the machine's
single-thread sgemm peak measured here. Every figure is the best of --reps repetitions, CPU
time of the process (steadier than wall time on a shared machine)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from hierfl import seeding  # noqa: E402
from hierfl.data.federated import FederatedData  # noqa: E402
from hierfl.exec.local import BatchedExecutor, SequentialExecutor  # noqa: E402
from hierfl.models.registry import scenario_model  # noqa: E402
from hierfl.run.runner import run_algorithm  # noqa: E402
from hierfl.run.world import World  # noqa: E402
from hierfl.scenario.load import load  # noqa: E402
from hierfl.topology.graph import Topology, build_graph  # noqa: E402

KINDS = ("loop", "batched", "sequential")
WORKLOADS = {
    # name: input shape, classes, text?, clients, samples (about), per round, batch, model
    "W6": dict(shape=(1, 28, 28), classes=62, text=False, clients=200, samples=200,
               per_round=20, batch=20, model={"name": "cnn"}, rounds=3),
    "W7": dict(shape=(80,), classes=80, text=True, clients=100, samples=40, per_round=20,
               batch=10, model={"name": "char_lstm"}, rounds=3),
    "W6s": dict(shape=(1, 8, 8), classes=10, text=False, clients=200, samples=90,
                per_round=20, batch=20, model={"name": "cnn", "channels": [8, 16],
                                               "dense": 32}, rounds=8),
}


def sgemm_peak(n: int = 1024, reps: int = 5) -> float:
    """Single-thread float32 matrix product GFLOP/s (best of reps)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    torch.mm(a, b)
    for _ in range(reps):
        t = time.process_time()
        torch.mm(a, b)
        best = min(best, time.process_time() - t)
    return 2 * n ** 3 / best / 1e9


def make_data(w: dict, seed: int = 0) -> FederatedData:
    """Random rows of the workload's shapes; client sizes uniform in [0.75, 1.25] x samples."""
    g = np.random.default_rng(seed)
    sizes = g.integers(int(w["samples"] * 0.75), int(w["samples"] * 1.25) + 1, w["clients"])
    n, d = int(sizes.sum()), int(np.prod(w["shape"]))
    if w["text"]:
        x = torch.from_numpy(g.integers(0, w["classes"], (n, d)))
    else:
        x = torch.from_numpy(g.standard_normal((n, d), dtype=np.float32))
    y = torch.from_numpy(g.integers(0, w["classes"], n))
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    tz = np.zeros(w["clients"] + 1, np.int64)
    return FederatedData(x, y, off, x[:0], y[:0], tz, w["classes"], tuple(w["shape"]),
                         w["classes"] if w["text"] else 0)


def make_world(w: dict, rounds: int, tmp: str):
    import yaml
    doc = {"name": "bench", "seed": 0,
           "topology": {"edges": {"count": 4}, "clients": {"count": w["clients"],
                                                           "compute_flops": 1.0e10}},
           "data": {"name": "synthetic", "dim": 2, "classes": 2, "samples": 4},
           "model": w["model"],
           "train": {"rounds": rounds, "clients_per_round": w["per_round"], "eval_every": rounds,
                     "executor": {"threads": 1, "device": "cpu"},
                     "local": {"epochs": 1, "batch_size": w["batch"], "lr": 0.05}},
           "algorithms": [{"name": "fedavg"}]}
    path = os.path.join(tmp, "bench.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    sc = load(path, out=os.path.join(tmp, "out"))
    topo = Topology.from_graph(build_graph(sc.topology, sc.seed, sc.topology_file),
                               sc.topology_file)
    data = make_data(w)
    model = scenario_model(sc.file, sc.model, data)
    return sc, World(topo, data, model, model.init(seeding.torch_gen(sc.seed, "model-init")))


class Timed:
    """An executor whose unmeasured calls (rounds without the gamma measurement) are timed."""

    def __init__(self, inner):
        self.inner, self.cpu, self.samples = inner, 0.0, 0

    def run(self, program, plan, full, budgets, lr, gamma, check_every, measure=True):
        t = time.process_time()
        res = self.inner.run(program, plan, full, budgets, lr, gamma, check_every, measure)
        if not measure:
            self.cpu += time.process_time() - t
            self.samples += int((plan.weights > 0).sum())
        return res


def run_hierfl(sc, world, executor, tmp: str) -> tuple[float, int]:
    timed = Timed(executor)
    run_algorithm(sc, sc.algorithms[0], world, os.path.join(tmp, "o"), progress=False,
                  keep_trace=False, executor=timed)
    return timed.cpu, timed.samples


def run_loop(world: World, w: dict, rounds: int) -> tuple[float, int]:
    """The plain per-client program, on the same clients per round (sampled here with numpy)."""
    mod = world.model.module
    data, shape, b = world.data, world.model.input_shape, w["batch"]
    g = np.random.default_rng(1)
    glob = [p.detach().clone() for p in mod.parameters()]
    cpu, samples = 0.0, 0
    for _ in range(rounds):
        picked = g.choice(data.n_clients, w["per_round"], replace=False)
        t = time.process_time()
        acc = [torch.zeros_like(p) for p in glob]
        total = 0
        for k in picked:
            lo, hi = data.offsets[k], data.offsets[k + 1]
            xk, yk = data.x[lo:hi], data.y[lo:hi]
            with torch.no_grad():
                for p, v in zip(mod.parameters(), glob):
                    p.copy_(v)
            opt = torch.optim.SGD(mod.parameters(), lr=0.05)
            perm = torch.randperm(hi - lo)
            for i in range(0, hi - lo, b):
                idx = perm[i:i + b]
                opt.zero_grad()
                loss = nn.functional.cross_entropy(mod(xk[idx].reshape(len(idx), *shape)), yk[idx])
                loss.backward()
                opt.step()
            with torch.no_grad():
                for a, p in zip(acc, mod.parameters()):
                    a.add_(p, alpha=float(hi - lo))
            total += int(hi - lo)
        glob = [a / total for a in acc]
        cpu += time.process_time() - t
        samples += total
    return cpu, samples


@contextlib.contextmanager
def stepwise(model):
    """The batched executor as it was before `TorchModel.client_steps` (the "before" of
    --before): the solver takes a loop-path model's steps one by one, copying each client's
    row into the module and its gradient out at every step."""
    own = getattr(model, "client_steps", None)
    if own is not None:
        model.client_steps = lambda *a, **k: None
    try:
        yield
    finally:
        if own is not None:
            del model.client_steps


@contextlib.contextmanager
def padded(model):
    """The loop path as it was before `TorchModel.real_rows` (the "padded" kind): every row of a
    minibatch computed, the zero-weight padding included."""
    model.real_rows = lambda m: None
    try:
        yield
    finally:
        del model.real_rows


@contextlib.contextmanager
def functorch(model):
    """The vmap path as it was before models/grouped.py (the "functorch" kind): through
    `torch.func.vmap(grad_and_value(functional_call))` itself."""
    plan = getattr(model, "grouped", None)
    model.grouped = None
    try:
        yield
    finally:
        model.grouped = plan


def bench(name: str, reps: int, rounds: int | None, peak: float,
          kinds: tuple[str, ...] = KINDS) -> dict:
    w = WORKLOADS[name]
    r = rounds or w["rounds"]
    with tempfile.TemporaryDirectory() as tmp:
        sc, world = make_world(w, r, tmp)
        fwd = world.model.fwd_flops
        best = {k: (float("inf"), 0) for k in kinds}
        for _ in range(reps):
            for kind in best:
                if kind == "loop":
                    got = run_loop(world, w, r - 1)
                elif kind in BEFORE:
                    with BEFORE[kind](world.model):
                        got = run_hierfl(sc, world, BatchedExecutor("cpu"), tmp)
                else:
                    ex = BatchedExecutor("cpu") if kind == "batched" else SequentialExecutor()
                    got = run_hierfl(sc, world, ex, tmp)
                # per sample: the rounds differ in clients between loop and hierfl
                if got[0] / got[1] < best[kind][0] / max(best[kind][1], 1) or best[kind][1] == 0:
                    best[kind] = got
    out = {"workload": name, "params": world.model.n_params, "fwd_mflop": fwd / 1e6,
           "path": getattr(world.model, "batching", "-"), "peak_gflops": peak,
           "rounds_timed": r - 1}
    loop_rate = best["loop"][1] / best["loop"][0]
    for kind, (cpu, n) in best.items():
        out[kind] = {"cpu_s": cpu, "samples": n, "samples_per_s": n / cpu,
                     "gflops": 3 * fwd * n / cpu / 1e9, "x_loop": (n / cpu) / loop_rate}
    return out


BEFORE = {"stepwise": stepwise, "padded": padded, "functorch": functorch}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="W6,W7,W6s")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--before", action="store_true",
                    help="also time the batched executor with a loop-path model's steps taken "
                    "one by one (as before TorchModel.client_steps), alternated with the rest")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="which of loop, batched, sequential, padded, functorch to time "
                    "(loop always)")
    a = ap.parse_args()
    if a.rounds is not None and a.rounds < 2:
        ap.error(f"--rounds {a.rounds}: at least 2 (the last round takes the gamma "
                 "measurement and is not timed)")
    torch.set_num_threads(1)
    peak = sgemm_peak()
    print(f"single-thread sgemm peak: {peak:.1f} GFLOP/s")
    for name in a.only.split(","):
        kinds = ("loop", *[k for k in a.kinds.split(",") if k != "loop"]) + \
            (("stepwise",) if a.before else ())
        res = bench(name, a.reps, a.rounds, peak, kinds)
        res["load"] = os.getloadavg()[0]
        res["date"] = time.strftime("%Y-%m-%d %H:%M")
        print(f"{name}: {res['params']} parameters, {res['fwd_mflop']:.3g} MFLOP/sample forward, "
              f"path {res['path']}, {res['rounds_timed']} rounds timed, load {res['load']:.1f}")
        for kind in kinds:
            r = res[kind]
            print(f"  {kind:10s} {r['cpu_s']:7.2f} cpu s  {r['samples_per_s']:8.0f} samples/s  "
                  f"{r['gflops']:6.1f} GFLOP/s ({r['gflops'] / peak:4.0%} of peak)  "
                  f"{r['x_loop']:5.2f}x the loop")
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"{name}.json"), "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
