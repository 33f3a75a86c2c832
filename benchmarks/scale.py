"""Scale benchmarks (issue 19), each command in a fresh process, timed with its own peak memory:

W8: 100,000 clients (10 regions, 1,000 edges), 1,000 a round, 20 rounds, a 5-feature logreg,
    FedAvg and HierFAVG (tier_rounds [1, 2]): `hierfl validate`, `hierfl run` (each algorithm's
    seconds from its last progress line) and `hierfl report` of the finished run.
W9: scenarios/city_scale.yaml (1,000,000 clients, 10,000 a round, 10 rounds): the same steps.
BUILD: building and checking the topology alone (arrays, no graph) at 10^5 and 10^6 clients;
    then `hierfl validate` and the world `hierfl run` builds (topology, data, model, guards)
    of W8's system at 10^6 clients, after the same of --before's checkout if given.

    python benchmarks/scale.py [--only W8,W9,BUILD] [--rounds N] [--out DIR] [--before DIR]

Peak memory is each command's own high-water mark (wait4's ru_maxrss of that child); its CPU
seconds are given too, the steadier figure on a shared machine; `rounds` is each algorithm's
CPU seconds a round (world built once, in one more process) and HierFAVG / FedAvg. Results go
to benchmarks/results/<W>.json."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRESS = re.compile(r"\[(?P<label>[^\]]+)\] round (?P<t>\d+)/(?P<n>\d+) .* elapsed "
                      r"(?P<el>\d+)s")


def w8(rounds: int = 20, clients: int = 100_000) -> dict:
    return {"name": "w8", "seed": 0,
            "topology": {"tiers": [
                {"name": "regional", "count": 10,
                 "link": {"latency_s": 0.02, "bandwidth_Bps": 1.25e9}},
                {"name": "edge", "count": 1000,
                 "link": {"latency_s": 0.01, "bandwidth_Bps": 1.25e8}}],
                "clients": {"count": clients,
                            "compute_flops": {"dist": "lognormal", "median": 1e9, "sigma": 0.5},
                            "link": {"latency_s": {"dist": "uniform", "low": 0.01,
                                                   "high": 0.1},
                                     "bandwidth_Bps": 2.5e6}}},
            "data": {"name": "synthetic", "dim": 5, "classes": 2, "samples": 20},
            "model": {"name": "logreg"},
            # about one client per edge a round; the default (exact) edge batching trains them
            # together, as its products are small (a lone call rounds as a shared one)
            "train": {"rounds": rounds, "clients_per_round": 1000, "eval_every": rounds,
                      "local": {"steps": 5, "batch_size": 10, "lr": 0.01}},
            "algorithms": [{"name": "fedavg"}, {"name": "hierfavg", "tier_rounds": [1, 2]}]}


def measured(cmd: list[str], root: str = ROOT) -> dict:
    """Run `cmd` (a hierfl command) in a fresh process: wall seconds, its own peak RSS, and the
    last progress line's elapsed seconds per algorithm. `root`: the checkout whose hierfl runs
    (BUILD's --before compares with another)."""
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "hierfl", *cmd], cwd=root, env=env,
                                stdout=fo, stderr=fe)
        _, status, usage = os.wait4(proc.pid, 0)         # this child's own peak memory
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        fe.seek(0)
        err = fe.read()
    rss = usage.ru_maxrss / 1024
    if proc.returncode != 0:
        raise RuntimeError(f"hierfl {' '.join(cmd)} failed:\n{err[-2000:]}")
    algos = {m["label"]: int(m["el"]) for m in PROGRESS.finditer(err)
             if m["t"] == m["n"]}
    return {"seconds": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(rss, 1), "algorithms_s": algos}


def steps(scenario: str, out: str) -> dict:
    """validate, run, report of one scenario, each in its own process; then each algorithm's
    CPU seconds a round."""
    res = {"validate": measured(["validate", scenario]),
           "run": measured(["run", scenario, "--out", out, "--force"])}
    res["report"] = measured(["report", out])
    res["rounds"] = round_cpu(scenario, out + "-rounds")
    return res


def round_cpu(scenario: str, out: str) -> dict:
    """Each algorithm's CPU seconds a round (process_time around run_algorithm, evaluation and
    outputs included, the world built once before), in a fresh process: the figure behind
    "a 3-tier HierFAVG round costs at most 3x a flat FedAvg round" (issue 19)."""
    code = ("import json, os, sys, time; sys.path.insert(0, %r)\n"
            "from hierfl.scenario.load import load\n"
            "from hierfl.run import build_world, run_algorithm\n"
            "sc = load(sys.argv[1], out=sys.argv[2]); world = build_world(sc); res = {}\n"
            "for e in sc.algorithms:\n"
            "    c = time.process_time()\n"
            "    run_algorithm(sc, e, world, os.path.join(sc.output, e.label), progress=False)\n"
            "    res[e.label] = round((time.process_time() - c) / sc.train.rounds, 4)\n"
            "print(json.dumps(res))\n" % ROOT)
    text = subprocess.run([sys.executable, "-c", code, scenario, out], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    res = {"cpu_s_per_round": json.loads(text.strip().splitlines()[-1])}
    per = res["cpu_s_per_round"]
    if "fedavg" in per and "hierfavg" in per:
        res["hierfavg_over_fedavg"] = round(per["hierfavg"] / per["fedavg"], 2)
    res["load"] = os.getloadavg()
    return res


def build(clients: int) -> dict:
    """Topology arrays built and checked, in a fresh process: seconds and peak RSS."""
    code = ("import time, sys; sys.path.insert(0, %r)\n"
            "from hierfl.scenario.load import load\n"
            "from hierfl.topology.graph import build_topology\n"
            "sc = load(sys.argv[1]); t, c = time.perf_counter(), time.process_time()\n"
            "topo = build_topology(sc.topology, sc.seed, sc.topology_file)\n"
            "print(time.perf_counter() - t, time.process_time() - c, topo.n_clients)\n"
            % ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.yaml")
        _write(path, w8(1, clients))
        with tempfile.TemporaryFile("w+") as fo:
            proc = subprocess.Popen([sys.executable, "-c", code, path], stdout=fo, cwd=ROOT)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            text = fo.read()
        if proc.returncode != 0:
            raise RuntimeError(f"building {clients} clients failed")
        secs, cpu, n = text.split()
        return {"clients": int(n), "seconds": round(float(secs), 2), "cpu_s": round(float(cpu), 2),
                "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


WORLD = ("import time, sys\n"
         "from hierfl.scenario.load import load\n"
         "from hierfl.run.world import build_world\n"
         "sc = load(sys.argv[1]); t, c = time.perf_counter(), time.process_time()\n"
         "w = build_world(sc)\n"
         "print(time.perf_counter() - t, time.process_time() - c, w.topo.n_clients)\n")


def world(clients: int, root: str = ROOT) -> dict:
    """What `hierfl run` builds before its first round (topology, data, model, guards) for
    W8's system at `clients` clients, and `hierfl validate` of it, each in a fresh process of
    the checkout `root`: seconds, CPU seconds (the process's, imports included) and peak RSS."""
    env = dict(os.environ, PYTHONPATH=root)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.yaml")
        _write(path, w8(1, clients))
        res = {"clients": clients, "validate": measured(["validate", path], root)}
        with tempfile.TemporaryFile("w+") as fo:
            proc = subprocess.Popen([sys.executable, "-c", WORLD, path], stdout=fo, cwd=root,
                                    env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            fo.seek(0)
            text = fo.read()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"building the world of {clients} clients failed ({root})")
        secs, cpu, _ = text.split()
        res["world"] = {"seconds": round(float(secs), 2), "cpu_s": round(float(cpu), 2),
                        "process_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}
        return res


def _write(path: str, doc: dict) -> None:
    import yaml
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="BUILD,W8,W9")
    ap.add_argument("--rounds", type=int, help="W8's rounds (default 20)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--before", help="BUILD: a checkout of the previous code, measured "
                    "alternately with this one (validate and world of 10^6 clients)")
    args = ap.parse_args()
    only = args.only.split(",")
    os.makedirs(args.out, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "BUILD" in only:
            results["BUILD"] = [build(n) for n in (100_000, 1_000_000)]
            pairs = (((args.before, "before"), (ROOT, "this checkout")) if args.before
                     else ((ROOT, "this checkout"),))      # alternated: both see the same load
            for root, label in pairs:
                results["BUILD"].append(dict(world(1_000_000, root), code=label))
        if "W8" in only:
            path = os.path.join(tmp, "w8.yaml")
            _write(path, w8(args.rounds or 20))
            results["W8"] = steps(path, os.path.join(tmp, "w8-out"))
        if "W9" in only:
            results["W9"] = steps(os.path.join(ROOT, "scenarios", "city_scale.yaml"),
                                  os.path.join(tmp, "w9-out"))
    for name, res in results.items():
        with open(os.path.join(args.out, f"{name}.json"), "w") as fh:
            json.dump(res, fh, indent=1)
        print(name, json.dumps(res))


if __name__ == "__main__":
    main()
