"""hierfl benchmarks (`make bench`): workloads W1..W5 of issue 7, each measured against the
floor (benchmarks/floor.py, a minimal batched torch loop with no simulator) and against the
sequential executor, alternating, in fresh processes (so that peak RSS is per run).

    python benchmarks/run.py [--quick] [--only W1,W3,STATE,W1P] [--repeat N] [--out DIR]

W1P (benchmarks/whole.py) times whole processes instead: the plain loop of floor_w1.py against
`hierfl run` of W1, with and without the report.

Per workload and algorithm it prints wall seconds, local steps/s, client updates/s, peak RSS,
the fraction of hierfl's time outside training (simulation, bookkeeping, evaluation, CSV and
trace writing: everything but executor.run) and the ratios hierfl / floor and
sequential / hierfl (on the same rounds). CPU seconds of the process are measured too: on a
shared machine they are the steadier figure, and every ratio is given on both. Results go to
benchmarks/results/<W>.json and a table in benchmarks/README.md."""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

# ----------------------------------------------------------------------------- workloads


def _flat_topology(clients: int, edges: int) -> dict:
    return {"edges": {"count": edges, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.25e8}},
            "clients": {"count": clients, "compute_flops": {"dist": "lognormal", "median": 1e9,
                                                            "sigma": 0.5},
                        "link": {"latency_s": {"dist": "uniform", "low": 0.01, "high": 0.1},
                                 "bandwidth_Bps": 2.5e6}}}


def w1(rounds: int) -> dict:
    """FedProx's Synthetic(1,1) recipe."""
    return {"name": "w1", "seed": 0, "topology": _flat_topology(30, 3),
            "data": {"name": "synthetic", "alpha": 1.0, "beta": 1.0},
            "model": {"name": "logreg"},
            "train": {"rounds": rounds, "clients_per_round": 10, "eval_every": 1,
                      "local": {"epochs": 20, "batch_size": 10, "lr": 0.01}},
            "algorithms": [{"name": "fedavg"}, {"name": "fedprox", "mu": 1.0}]}


def w2(rounds: int) -> dict:
    """1,000 clients of 100 samples (80 train, 20 test), 100 per round, E = 1."""
    return {"name": "w2", "seed": 0, "topology": _flat_topology(1000, 10),
            "data": {"name": "synthetic", "alpha": 1.0, "beta": 1.0, "samples": 100},
            "model": {"name": "logreg"},
            "train": {"rounds": rounds, "clients_per_round": 100, "eval_every": 5,
                      "local": {"epochs": 1, "batch_size": 10, "lr": 0.01}},
            "algorithms": [{"name": "fedavg"}, {"name": "scaffold"}]}


def w2e(rounds: int) -> dict:
    """W2 evaluated only at round 0 and the last, on both sides (issue 19's training gap)."""
    doc = w2(rounds)
    doc["name"] = "w2e"
    doc["train"]["eval_every"] = rounds
    return doc


def w3(rounds: int) -> dict:
    """MLP 784-200-200-10 on 100 clients x 600 training samples of MNIST-shaped data."""
    return {"name": "w3", "seed": 0, "topology": _flat_topology(100, 2),
            "data": {"name": "synthetic", "alpha": 0.0, "beta": 0.0, "dim": 784, "classes": 10,
                     "samples": 750, "test_fraction": 0.2},
            "model": {"name": "mlp", "hidden": [200, 200]},
            "train": {"rounds": rounds, "clients_per_round": 10, "eval_every": 10,
                      "local": {"epochs": 1, "batch_size": 50, "lr": 0.05}},
            "algorithms": [{"name": "fedavg"}]}


def w4(rounds: int) -> dict:
    """pFedMac-SH on client -> edge -> cloud, 1,000 clients under 10 edges."""
    return {"name": "w4", "seed": 0, "topology": _flat_topology(1000, 10),
            "data": {"name": "synthetic", "alpha": 0.5, "beta": 0.5, "samples": 100},
            "model": {"name": "logreg"},
            "train": {"rounds": rounds, "clients_per_round": 100, "eval_every": 5,
                      "local": {"steps": 5, "batch_size": 10, "lr": 0.05}},
            "algorithms": [{"name": "pfedmac_sh", "edge_rounds": 2, "inner_steps": 5,
                            "inner_lr": 0.05, "lambda1": 0.5,
                            "sparsity": {"kind": "l1", "gamma": 0.05}}]}


def w5(rounds: int, clients: int = 10_000) -> dict:
    """The simulator alone: a trivial model (2 features, 2 classes, 2 train samples, 1 step),
    1,000 clients per round."""
    return {"name": "w5", "seed": 0, "topology": _flat_topology(clients, 10),
            "data": {"name": "synthetic", "dim": 2, "classes": 2, "samples": 3,
                     "test_fraction": 0.34},
            "model": {"name": "logreg"},
            "train": {"rounds": rounds, "clients_per_round": 1000, "eval_every": 10,
                      "local": {"steps": 1, "batch_size": 2, "lr": 0.01}},
            "algorithms": [{"name": "fedavg"}]}


# rounds (full, quick) and rounds of the sequential comparison (full, quick)
WORKLOADS = {
    "W1": (w1, (200, 20), (20, 5)),
    "W2": (w2, (100, 20), (10, 3)),
    "W2E": (w2e, (100, 20), (0, 0)),
    "W3": (w3, (50, 10), (10, 3)),
    "W4": (w4, (20, 4), (4, 2)),
    "W5": (w5, (100, 10), (0, 0)),
}
FLOOR_ALGOS = ("fedavg", "fedprox", "scaffold")


# ----------------------------------------------------------------------------- one measured run


def _scenario(doc: dict, algo: int, rounds: int, kind: str, tmp: str):
    import yaml

    from hierfl.scenario.load import load

    doc = json.loads(json.dumps(doc))
    doc["train"]["rounds"] = rounds
    doc["train"]["executor"] = {"kind": kind, "threads": 1}
    doc["algorithms"] = [doc["algorithms"][algo]]
    path = os.path.join(tmp, "bench.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    return load(path, out=os.path.join(tmp, "out"))


def _peak_rss_mb() -> float:
    """This process's resident-memory high-water mark (VmHWM; ru_maxrss would carry the
    driver's peak over fork + exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def worker(job: dict) -> dict:
    """Run one job in this (fresh) process; returns its measurements."""
    import torch

    torch.set_num_threads(1)
    wl = WORKLOADS[job["workload"]][0]
    kw = {"clients": job["clients"]} if job.get("clients") else {}
    doc = wl(job["rounds"], **kw)
    with tempfile.TemporaryDirectory() as tmp:
        sc = _scenario(doc, job["algo"], job["rounds"], job.get("kind", "batched"), tmp)
        from hierfl.run import build_world
        rss_base = _rss_mb()
        t0 = time.perf_counter()
        world = build_world(sc)
        build_s = time.perf_counter() - t0
        entry = sc.algorithms[0]
        rss_world = _rss_mb()
        if job["impl"] == "floor":
            out = _run_floor(sc, entry, world)
        else:
            out = _run_hierfl(sc, entry, world, tmp)
    out.update(build_s=build_s, peak_rss_mb=_peak_rss_mb(), rss_after_world_mb=rss_world,
               rss_base_mb=rss_base, rss_end_mb=_rss_mb(), label=entry.label,
               n_params=world.model.n_params)
    return out


def _run_hierfl(sc, entry, world, tmp: str) -> dict:
    from hierfl.exec import executor_for
    from hierfl.run import run_algorithm

    stats = {"exec_s": 0.0, "exec_cpu": 0.0, "steps": 0, "updates": 0}

    class Timed:
        """Times executor.run: everything else is outside training."""

        def __init__(self, inner):
            self.inner = inner

        def run(self, *a, **k):
            t0, c0 = time.perf_counter(), time.process_time()
            res = self.inner.run(*a, **k)
            stats["exec_s"] += time.perf_counter() - t0
            stats["exec_cpu"] += time.process_time() - c0
            stats["steps"] += int(res.steps.sum())
            stats["updates"] += int(res.steps.numel())
            return res

    timed = Timed(executor_for(sc.train.executor))      # the scenario's executor, timed
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_algorithm(sc, entry, world, os.path.join(tmp, "out", entry.label),
                           progress=False, keep_trace=False, executor=timed)   # as `hierfl run`
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    accs = [r["test_acc"] for r in result.rows if r["test_acc"] == r["test_acc"]]
    events = result.trace.count if result.trace is not None else 0
    return {"wall_s": wall, "cpu_s": cpu, "train_s": stats["exec_s"],
            "train_cpu_s": stats["exec_cpu"], "steps": stats["steps"],
            "updates": stats["updates"], "final_acc": accs[-1] if accs else float("nan"),
            "final_loss": result.rows[-1]["train_loss"], "events": events,
            "rounds_done": len(result.rows) - 1}


def floor_args(sc, entry, world) -> dict:
    import numpy as np  # noqa: F401

    from floor import Net

    loc = entry.local
    algo = entry.name
    mu = float(getattr(entry.params, "mu", 0.0)) if algo == "fedprox" else 0.0
    m = world.model
    widths = [m.layers[0].n_in] + [layer.n_out for layer in m.layers]
    d = world.data
    return dict(net=Net(widths), w0=world.w0, x=d.x, y=d.y, offsets=d.offsets, xt=d.x_test,
                yt=d.y_test, seed=sc.seed, rounds=sc.train.rounds,
                per_round=sc.train.clients_per_round, batch=int(loc.batch_size), lr=loc.lr,
                epochs=loc.epochs, steps=loc.steps, algorithm=algo, mu=mu,
                eval_every=sc.train.eval_every)


def _run_floor(sc, entry, world) -> dict:
    from floor import run_floor

    c0 = time.process_time()
    t0 = time.perf_counter()
    res = run_floor(**floor_args(sc, entry, world))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "train_s": res.train_s, "steps": res.steps,
            "updates": res.updates, "final_acc": res.evals[-1][2],
            "final_loss": res.evals[-1][1], "eval_s": res.eval_s, "rounds_done": sc.train.rounds}


def spawn(job: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, __file__, "--worker", json.dumps(job)],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"job {job} failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- arithmetic check


def check_floor_arithmetic(workload: str, algo: int, rounds: int = 3) -> float:
    """Max |hierfl - floor| of the global model after `rounds` rounds when the floor is given
    hierfl's own minibatches: the two loops do the same arithmetic (not timed)."""
    import torch

    from floor import run_floor
    from hierfl.learn.batches import minibatch_plan
    from hierfl.run import build_world, run_algorithm
    import numpy as np

    doc = WORKLOADS[workload][0](rounds)
    with tempfile.TemporaryDirectory() as tmp:
        sc = _scenario(doc, algo, rounds, "batched", tmp)
        world = build_world(sc)
        entry = sc.algorithms[0]
        run_algorithm(sc, entry, world, os.path.join(tmp, "h"), progress=False)
        got = np.load(os.path.join(tmp, "h", "final_params.npz"))["global"]
    d = world.data
    b = int(entry.local.batch_size)

    def batches(t, sel, k):
        p = minibatch_plan(d.offsets, sel, b, k, sc.seed, t, 0, d.x, d.y)
        return p.rows, p.weights

    with torch.no_grad():
        res = run_floor(**floor_args(sc, entry, world), batches=batches)
    return float(np.abs(res.w.double().numpy() - got).max())


# ----------------------------------------------------------------------------- driver


def best(runs: list[dict], key: str) -> float:
    return min(r[key] for r in runs)


def measure(workload: str, quick: bool, repeat: int) -> dict:
    fn, (full, short), (seq_full, seq_short) = WORKLOADS[workload]
    rounds, seq_rounds = (short, seq_short) if quick else (full, seq_full)
    doc = fn(rounds)
    out = {"workload": workload, "rounds": rounds, "seq_rounds": seq_rounds, "quick": quick,
           "doc": fn.__doc__, "algorithms": []}
    if workload == "W5":
        return measure_w5(out, rounds, repeat)
    for a, spec in enumerate(doc["algorithms"]):
        name = spec["name"]
        from hierfl.algorithms.registry import REGISTRY
        if name not in REGISTRY:
            out["algorithms"].append({"name": name, "skipped": f"{name} is not registered"})
            continue
        job = {"workload": workload, "algo": a, "rounds": rounds}
        has_floor = name in FLOOR_ALGOS
        runs = {"hierfl": [], "floor": [], "hierfl_seqr": [], "sequential": []}
        for _ in range(repeat):                       # alternate floor / hierfl
            if has_floor:
                runs["floor"].append(spawn({**job, "impl": "floor"}))
            runs["hierfl"].append(spawn({**job, "impl": "hierfl"}))
        for _ in range(max(1, repeat - 1) if seq_rounds else 0):
            sj = {**job, "rounds": seq_rounds}
            runs["hierfl_seqr"].append(spawn({**sj, "impl": "hierfl"}))
            runs["sequential"].append(spawn({**sj, "impl": "hierfl", "kind": "sequential"}))
        res = summarise(name, runs)
        if has_floor:
            res["floor_max_abs_diff_same_batches"] = check_floor_arithmetic(workload, a)
        out["algorithms"].append(res)
    return out


def summarise(name: str, runs: dict) -> dict:
    h = runs["hierfl"]
    hb = min(h, key=lambda r: r["wall_s"])
    res = {"name": name, "label": hb["label"], "runs": runs,
           "wall_s": best(h, "wall_s"), "cpu_s": best(h, "cpu_s"),
           "steps": hb["steps"], "updates": hb["updates"],
           "steps_per_s": hb["steps"] / best(h, "wall_s"),
           "updates_per_s": hb["updates"] / best(h, "wall_s"),
           "peak_rss_mb": hb["peak_rss_mb"], "final_acc": hb["final_acc"],
           "outside_training": 1.0 - hb["train_s"] / hb["wall_s"],
           "outside_training_cpu": 1.0 - hb["train_cpu_s"] / hb["cpu_s"],
           "build_s": hb["build_s"], "events": hb["events"]}
    if runs["floor"]:
        f = runs["floor"]
        res.update(floor_wall_s=best(f, "wall_s"), floor_cpu_s=best(f, "cpu_s"),
                   floor_acc=f[0]["final_acc"], floor_peak_rss_mb=f[0]["peak_rss_mb"],
                   vs_floor=best(h, "wall_s") / best(f, "wall_s"),
                   vs_floor_cpu=best(h, "cpu_s") / best(f, "cpu_s"))
    if runs["sequential"]:
        s, hs = runs["sequential"], runs["hierfl_seqr"]
        res.update(seq_wall_s=best(s, "wall_s"), seq_hierfl_wall_s=best(hs, "wall_s"),
                   seq_acc=s[0]["final_acc"], seq_hierfl_acc=hs[0]["final_acc"],
                   seq_speedup=best(s, "wall_s") / best(hs, "wall_s"),
                   seq_speedup_cpu=best(s, "cpu_s") / best(hs, "cpu_s"))
    return res


def measure_w5(out: dict, rounds: int, repeat: int) -> dict:
    sizes = (10_000, 20_000)
    per = {}
    for n in sizes:
        runs = [spawn({"workload": "W5", "algo": 0, "rounds": rounds, "impl": "hierfl",
                       "clients": n}) for _ in range(repeat)]
        b = min(runs, key=lambda r: r["wall_s"])
        per[n] = {"runs": runs, "wall_s": b["wall_s"], "cpu_s": best(runs, "cpu_s"),
                  "events": b["events"], "events_per_s": b["events"] / b["wall_s"],
                  "events_per_cpu_s": b["events"] / best(runs, "cpu_s"),
                  "peak_rss_mb": min(r["peak_rss_mb"] for r in runs),
                  "rss_base_mb": min(r["rss_base_mb"] for r in runs),
                  "rss_after_world_mb": min(r["rss_after_world_mb"] for r in runs),
                  "rss_end_mb": min(r["rss_end_mb"] for r in runs),
                  "outside_training": 1.0 - b["train_s"] / b["wall_s"]}
    a, b = per[sizes[0]], per[sizes[1]]
    out["sizes"] = {str(k): v for k, v in per.items()}
    # memory that grows with the number of clients: the slope between the two sizes (the same
    # clients per round, so the same number of simulated events and trace rows)
    out["rss_kb_per_client"] = ((b["rss_end_mb"] - b["rss_base_mb"]) - (a["rss_end_mb"] -
                                a["rss_base_mb"])) * 1024 / (sizes[1] - sizes[0])
    out["world_kb_per_client"] = ((b["rss_after_world_mb"] - b["rss_base_mb"]) -
                                  (a["rss_after_world_mb"] - a["rss_base_mb"])) * 1024 / \
        (sizes[1] - sizes[0])
    out["algorithms"] = [{"name": "fedavg", "label": "fedavg", "wall_s": a["wall_s"],
                          "cpu_s": a["cpu_s"], "events": a["events"],
                          "events_per_s": a["events_per_s"],
                          "events_per_cpu_s": a["events_per_cpu_s"],
                          "peak_rss_mb": a["peak_rss_mb"],
                          "outside_training": a["outside_training"]}]
    return out


# ----------------------------------------------------------------------------- output


def fmt(v, spec: str = ".2f") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return format(v, spec)


def table(results: list[dict]) -> str:
    lines = ["| workload | algorithm | rounds | wall s (cpu s) | local steps/s | client updates/s "
             "| peak RSS MB | outside training | hierfl / floor wall (cpu) | sequential / hierfl "
             "wall (cpu), rounds | final acc hierfl / floor / seq-batched / seq |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for a in r["algorithms"]:
            if "skipped" in a:
                lines.append(f"| {r['workload']} | {a['name']} | – | skipped: {a['skipped']} "
                             "| | | | | | | |")
                continue
            if r["workload"] == "W5":
                lines.append(
                    f"| W5 | {a['name']} | {r['rounds']} | {fmt(a['wall_s'])} ({fmt(a['cpu_s'])}) "
                    f"| {fmt(a['events_per_s'], ',.0f')} events/s "
                    f"({fmt(a['events_per_cpu_s'], ',.0f')} per cpu s), {a['events']:,} events "
                    f"| – | {fmt(a['peak_rss_mb'], '.0f')} "
                    f"({fmt(r['rss_kb_per_client'], '.1f')} KB/client) | "
                    f"{fmt(a['outside_training'], '.0%')} | – | – | – |")
                continue
            vf = (f"{fmt(a.get('vs_floor'))} ({fmt(a.get('vs_floor_cpu'))})"
                  if "vs_floor" in a else "–")
            vs = (f"{fmt(a.get('seq_speedup'), '.1f')} ({fmt(a.get('seq_speedup_cpu'), '.1f')}), "
                  f"{r['seq_rounds']}" if "seq_speedup" in a else "–")
            acc = " / ".join(fmt(a.get(k), ".3f") for k in ("final_acc", "floor_acc",
                                                            "seq_hierfl_acc", "seq_acc"))
            lines.append(
                f"| {r['workload']} | {a['label']} | {r['rounds']} | {fmt(a['wall_s'])} "
                f"({fmt(a['cpu_s'])}) | {fmt(a['steps_per_s'], ',.0f')} | "
                f"{fmt(a['updates_per_s'], ',.0f')} | {fmt(a['peak_rss_mb'], '.0f')} | "
                f"{fmt(a['outside_training'], '.0%')} | {vf} | {vs} | {acc} |")
    return "\n".join(lines)


def state_table(rows: list[dict]) -> str:
    lines = ["| algorithm | clients | parameters | state tensors MB | RSS growth MB (init / "
             "after 3 rounds) |", "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['algorithm']} | error: {r['error']} | | | |")
            continue
        lines.append(f"| {r['algorithm']} | {r['clients']:,} | {r['params']} | "
                     f"{r['state_mb']:.0f} | {r['rss_growth_init_mb']:.0f} / "
                     f"{r['rss_growth_after_rounds_mb']:.0f} |")
    return "\n".join(lines)


def _replace_block(text: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        return text[:text.index(start)] + block + text[text.index(end) + len(end):]
    return text + "\n" + block + "\n"


def merged_table(text: str, results: list[dict]) -> str:
    """The results table with the rows of the workloads measured now, and the rows of the others
    as the README already had them (a run of `--only W2E` keeps W1's row), in workload order."""
    fresh = table(results).splitlines()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    old = (text[text.index(start) + len(start):text.index(end)].strip().splitlines()[2:]
           if start in text and end in text else [])
    measured = {r["workload"] for r in results}
    rows = fresh[2:] + [ln for ln in old if ln.split("|")[1].strip() not in measured]
    order = {w: i for i, w in enumerate(WORKLOADS)}
    rows.sort(key=lambda ln: order.get(ln.split("|")[1].strip(), len(order)))
    return "\n".join(fresh[:2] + rows)


def write_readme(out_dir: str) -> None:
    results = []
    for w in WORKLOADS:
        p = os.path.join(out_dir, f"{w}.json")
        if os.path.exists(p):
            with open(p) as fh:
                results.append(json.load(fh))
    path = os.path.join(HERE, "README.md")
    text = open(path).read() if os.path.exists(path) else ""
    text = _replace_block(text, "results", merged_table(text, results))
    wp = os.path.join(out_dir, "W1P.json")
    if os.path.exists(wp):
        import whole
        with open(wp) as fh:
            text = _replace_block(text, "whole", whole.table(json.load(fh)))
    sp = os.path.join(out_dir, "state_memory.json")
    if os.path.exists(sp):
        with open(sp) as fh:
            text = _replace_block(text, "state", state_table(json.load(fh)))
    with open(path, "w") as fh:
        fh.write(text)


def run_state_memory(out_dir: str) -> None:
    """SCAFFOLD / FedDyn / FedDC state on 100,000 clients (benchmarks/state_memory.py)."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "state_memory.py")],
                       capture_output=True, text=True, cwd=ROOT)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    with open(os.path.join(out_dir, "state_memory.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print(state_table(rows), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--only", help="comma-separated workloads, e.g. W1,W2")
    ap.add_argument("--repeat", type=int, help="alternated repetitions (best is kept); "
                    "default 2 (W2: 5), 1 with --quick")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    only = [w.strip().upper() for w in args.only.split(",")] if args.only else \
        [*WORKLOADS, "W1P", "STATE"]
    bad = [w for w in only if w not in WORKLOADS and w not in ("STATE", "W1P")]
    if bad:
        ap.error(f"unknown workload(s) {bad}; known: {', '.join(WORKLOADS)}")
    repeat = args.repeat or (1 if args.quick else 2)
    # W2 runs in 1-2 s, where this shared machine's speed swings by +-20% between runs:
    # more alternated repetitions make its best-of figures steadier, for a few seconds more
    short = {"W2": 5, "W2E": 5}
    os.makedirs(args.out, exist_ok=True)
    results = []
    for w in only:
        if w == "W1P":
            print("[W1P] whole processes: floor_w1.py against hierfl run", file=sys.stderr,
                  flush=True)
            import whole
            r = whole.measure(WORKLOADS["W1"][1][1 if args.quick else 0],
                              repeat if args.repeat or args.quick else max(repeat, 2))
            with open(os.path.join(args.out, "W1P.json"), "w") as fh:
                json.dump(r, fh, indent=1)
            print(whole.table(r), flush=True)
            continue
        if w == "STATE":
            print("[STATE] per-client state of SCAFFOLD / FedDyn / FedDC on 100,000 clients",
                  file=sys.stderr, flush=True)
            run_state_memory(args.out)
            continue
        t0 = time.perf_counter()
        print(f"[{w}] {WORKLOADS[w][0].__doc__}", file=sys.stderr, flush=True)
        r = measure(w, args.quick, repeat if args.repeat or args.quick else
                    max(repeat, short.get(w, 0)))
        r.update(machine=platform.machine(), cpus=os.cpu_count(), python=platform.python_version(),
                 load_avg=os.getloadavg(), date=time.strftime("%Y-%m-%d %H:%M"),
                 bench_s=time.perf_counter() - t0)
        with open(os.path.join(args.out, f"{w}.json"), "w") as fh:
            json.dump(r, fh, indent=1)
        results.append(r)
        print(table([r]), flush=True)
    write_readme(args.out)
    print(f"\nresults: {args.out}; table: {os.path.join(HERE, 'README.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
