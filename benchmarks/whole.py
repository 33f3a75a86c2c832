"""What a user waits for on W1 (issue 19): whole processes, from python's start to the last file,
alternated in fresh processes: the plain batched torch loop of benchmarks/floor_w1.py (imports,
data, training, evaluation at the end, a csv) against `hierfl run` of the same scenario (FedAvg,
200 rounds, evaluated at round 0 and the end), without (`--no-report`) and with its report.

    python benchmarks/whole.py [--rounds 200] [--repeat 3]      # or run.py --only W1P

Per kind: best wall seconds, best CPU seconds (user + system of the child, from wait4) and peak
RSS; the load average before and after. On this shared machine CPU seconds are the steadier
figure."""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KINDS = ("floor", "hierfl", "hierfl_report")
OLD_KINDS = ("old_hierfl", "old_hierfl_report")     # --old DIR: the same from another tree


def scenario(rounds: int, out: str) -> dict:
    sys.path.insert(0, HERE)
    from run import w1

    doc = w1(rounds)
    doc["algorithms"] = doc["algorithms"][:1]                      # FedAvg
    doc["train"]["eval_every"] = rounds                             # round 0 and the last
    doc["train"]["executor"] = {"kind": "batched", "threads": 1}
    doc["output"] = out
    return doc


def timed(cmd: list[str], root: str = ROOT) -> dict:
    """Wall seconds, CPU seconds (user + sys) and peak RSS of one child process, with `root`'s
    hierfl."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=root)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    out = p.stdout.read() if p.stdout else b""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{out.decode()[-3000:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mb": ru.ru_maxrss / 1024.0, "log": out.decode()[-400:]}


def final_acc(path: str) -> float:
    with open(path, newline="") as fh:
        return float(list(csv.DictReader(fh))[-1]["test_acc"])


def measure(rounds: int, repeat: int, old: str | None = None) -> dict:
    import yaml

    kinds = KINDS + (OLD_KINDS if old else ())
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="hierfl-w1p-") as tmp:
        path = os.path.join(tmp, "w1.yaml")
        with open(path, "w") as fh:
            yaml.safe_dump(scenario(rounds, os.path.join(tmp, "out")), fh)
        fcsv = os.path.join(tmp, "floor.csv")
        py = sys.executable
        cmds = {"floor": [py, os.path.join(HERE, "floor_w1.py"), "--rounds", str(rounds),
                          "--out", fcsv],
                "hierfl": [py, "-m", "hierfl", "run", path, "--force", "--quiet",
                           "--no-report"],
                "hierfl_report": [py, "-m", "hierfl", "run", path, "--force", "--quiet"]}
        cmds["old_hierfl"], cmds["old_hierfl_report"] = cmds["hierfl"], cmds["hierfl_report"]
        for _ in range(repeat):                                  # alternated
            for kind in kinds:
                r = timed(cmds[kind], old if kind.startswith("old_") and old else ROOT)
                r["final_acc"] = final_acc(fcsv if kind == "floor" else
                                           os.path.join(tmp, "out", "fedavg", "metrics.csv"))
                runs[kind].append(r)
                print(f"[W1P] {kind}: wall {r['wall_s']:.2f} s cpu {r['cpu_s']:.2f} s "
                      f"acc {r['final_acc']:.3f}", file=sys.stderr, flush=True)
    load.append(os.getloadavg())
    best = {k: {"wall_s": min(r["wall_s"] for r in v), "cpu_s": min(r["cpu_s"] for r in v),
                "peak_rss_mb": min(r["peak_rss_mb"] for r in v),
                "final_acc": v[0]["final_acc"]} for k, v in runs.items()}
    f = best["floor"]
    for k in kinds[1:]:
        best[k]["vs_floor"] = best[k]["wall_s"] / f["wall_s"]
        best[k]["vs_floor_cpu"] = best[k]["cpu_s"] / f["cpu_s"]
    return {"workload": "W1P", "rounds": rounds, "repeat": repeat, "runs": runs, "old": old,
            "best": best, "load_avg": load, "doc": __doc__.splitlines()[0],
            "date": time.strftime("%Y-%m-%d %H:%M")}


def table(r: dict) -> str:
    lines = ["| W1 whole process (FedAvg, %d rounds, evaluated at the end) | wall s | CPU s | "
             "peak RSS MB | / floor wall (CPU) | final acc |" % r["rounds"],
             "|---|---|---|---|---|---|"]
    names = {"floor": "plain batched torch loop (`floor_w1.py`)",
             "hierfl": "`hierfl run --no-report`",
             "hierfl_report": "`hierfl run` (report included)",
             "old_hierfl": "before: `hierfl run --no-report`",
             "old_hierfl_report": "before: `hierfl run` (report included)"}
    for k in r["best"]:
        b = r["best"][k]
        ratio = "1" if k == "floor" else f"{b['vs_floor']:.2f} ({b['vs_floor_cpu']:.2f})"
        lines.append(f"| {names[k]} | {b['wall_s']:.2f} | {b['cpu_s']:.2f} | "
                     f"{b['peak_rss_mb']:.0f} | {ratio} | {b['final_acc']:.3f} |")
    la = r["load_avg"]
    lines.append(f"\nBest of {r['repeat']} alternated runs, {r['date']}; load average "
                 f"{la[0][0]:.1f} before, {la[-1][0]:.1f} after.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--old", help="another checkout of hierfl (e.g. the tree before a change): "
                    "its `hierfl run` is timed too, alternated")
    args = ap.parse_args(argv)
    r = measure(args.rounds, args.repeat, args.old)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "W1P.json"), "w") as fh:
        json.dump(r, fh, indent=1)
    print(table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
