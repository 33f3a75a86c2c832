"""Sweeps: one base scenario times a grid of values, every grid point a full scenario run.

A sweep file (YAML):

    base: scenarios/fedprox.yaml          # relative to the sweep file
    grid:                                 # dotted key paths into the base scenario, list indices
      algorithms[1].mu: [0, 0.01, 1]      # in brackets; every combination is one point
      stragglers.fraction: [0, 0.5]
      seed: [0, 1, 2]
    output: ../reports/fedprox-sweep      # relative to the sweep file (--out overrides)
    target: 0.8                           # optional accuracy target of the summary table
    point_reports: true                   # each point's report.md and figures (false: faster)

Every point's scenario is built and validated before anything runs (errors name the sweep file
and the grid key). Points run in parallel on a process pool (`local`) or as Ray tasks (`ray`);
each one runs in a private staging folder, writes its report, then a `DONE` marker, and only then
is moved into `OUTPUT/<point>` (an atomic rename), so a killed sweep leaves only finished points
behind and a rerun skips them. At the end: OUTPUT/sweep.csv, sweep.md, points.csv and
sweep_accuracy.png (test accuracy vs round, mean +- std over seeds per grid point)."""
from __future__ import annotations

import concurrent.futures as cf
import copy
import csv
import io
import itertools
import json
import math
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import yaml

from .io_util import atomic_text, fmt
from .config.errors import Problem, Problems, ScenarioError
from .config.fields import Raw, build, is_fail, spec, unit_interval

DONE = "DONE"
POINT_FILE = "point.yaml"          # the point's self-contained scenario, in its folder
STAGING = ".staging"
MAX_POINTS = 10_000
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


@dataclass(frozen=True)
class SweepFile:
    """The keys of a sweep file."""

    base: str = spec(doc="the base scenario file (relative to the sweep file)")
    grid: Raw = spec(doc="mapping: dotted key path -> list of values")
    output: str = spec("", "output folder (relative to the sweep file); --out overrides")
    target: float | None = spec(None, "accuracy target of the summary table (default: the "
                                "base scenario's report.target_accuracy, else 0.9 x best)",
                                check=unit_interval)
    point_reports: bool = spec(True, "write each point's report.md and figures (false: only "
                               "the metrics the summary needs; faster for small points)")


@dataclass(frozen=True)
class Point:
    name: str                                  # folder name, from the grid values
    values: tuple[tuple[str, Any], ...]        # (grid key, value), in grid order
    text: str                                  # the point's scenario, self-contained YAML
    threads: int                               # torch threads the point's runs use


@dataclass(frozen=True)
class Sweep:
    file: str
    keys: tuple[str, ...]
    points: tuple[Point, ...]
    output: str
    target: float | None
    labels: tuple[str, ...]                    # algorithm labels of the base scenario
    point_reports: bool = True                 # each point writes its report.md and figures


# ------------------------------------------------------------------------------ key paths
def parse_path(key: str) -> list[str | int] | None:
    """'algorithms[1].mu' -> ['algorithms', 1, 'mu']; None if malformed."""
    out: list[str | int] = []
    for part in key.split("."):
        m = _TOKEN.match(part)
        if not m:
            return None
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def _show(path: list[str | int]) -> str:
    s = ""
    for t in path:
        s += f"[{t}]" if isinstance(t, int) else (f".{t}" if s else t)
    return s


def set_path(raw: dict, path: list[str | int], value: Any) -> str | None:
    """Set raw[path] = value in place. Missing mapping keys are created (their values are then
    checked by the scenario schema); lists must already hold the index. Returns a problem or
    None."""
    node: Any = raw
    for i, tok in enumerate(path):
        last = i == len(path) - 1
        here = _show(path[:i]) or "<top level>"
        if isinstance(tok, int):
            if not isinstance(node, list):
                return f"{here} is not a list in the base scenario"
            if tok >= len(node):
                return f"{here} has {len(node)} item(s) in the base scenario; no index {tok}"
            if last:
                node[tok] = copy.deepcopy(value)
                return None
            node = node[tok]
            continue
        if not isinstance(node, dict):
            return f"{here} is not a mapping in the base scenario"
        if last:
            node[tok] = copy.deepcopy(value)
            return None
        if tok not in node or node[tok] is None:
            if isinstance(path[i + 1], int):
                return f"{_show(path[:i + 1])} is not in the base scenario (cannot index it)"
            node[tok] = {}
        node = node[tok]
    return None


# ------------------------------------------------------------------------------ point names
def _scalar(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return re.sub(r"[^A-Za-z0-9._-]", "-", v)[:40] or "empty"
    if v is None:
        return "null"
    return None


def point_names(keys: list[str], paths: list[list[str | int]], lists: list[list[Any]],
                combos: list[tuple[int, ...]]) -> list[str]:
    """`mu=0.01,fraction=0.5,seed=0`: the last name of each key (the whole path where two keys
    share it), each value as written (or v<index> for mappings and lists, or where two values
    would read the same)."""
    shorts = [str([t for t in p if isinstance(t, str)][-1]) for p in paths]
    shorts = [s if shorts.count(s) == 1 else re.sub(r"[\[\]]", "", k).replace(".", "-")
              for s, k in zip(shorts, keys)]
    shown = []
    for vals in lists:
        txt = [_scalar(v) for v in vals]
        if any(t is None for t in txt) or len(set(txt)) != len(txt):
            txt = [f"v{i}" for i in range(len(vals))]
        shown.append(txt)
    names = []
    for combo in combos:
        name = ",".join(f"{s}={shown[j][i]}" for j, (s, i) in enumerate(zip(shorts, combo)))
        if len(name) > 200:
            name = "p" + "-".join(str(i) for i in combo)
        names.append(name)
    return names


# ------------------------------------------------------------------------------ loading
def _self_contained(raw: dict, base_file: str) -> dict:
    """The base scenario with its topology inlined and its data path made absolute, so that a
    point runs anywhere (another folder, another machine with the same data path)."""
    from .config.yamldoc import read_yaml

    raw = copy.deepcopy(raw)
    base_dir = os.path.dirname(os.path.abspath(base_file))
    if isinstance(raw.get("topology"), str):
        raw["topology"] = read_yaml(os.path.join(base_dir, raw["topology"]), "topology file")
    data = raw.get("data")
    for key in ("path", "root"):            # data files: npz, leaf (path), image sets (root)
        if isinstance(data, dict) and isinstance(data.get(key), str):
            data[key] = os.path.normpath(os.path.join(base_dir, data[key]))
    raw.pop("output", None)
    return raw


def point_raw(base_raw: dict, base_file: str, values: tuple[tuple[str, Any], ...],
              paths: list[list[str | int]]) -> dict:
    """The base scenario with a point's values: a value for `topology` itself (another file,
    relative to the base scenario, or a mapping) is set before the topology is inlined, every
    other value after, so that `topology.clients.count` works on a topology file too."""
    raw = copy.deepcopy(base_raw)
    for (_, v), pth in zip(values, paths):
        if pth == ["topology"]:
            set_path(raw, pth, v)
    raw = _self_contained(raw, base_file)
    for (_, v), pth in zip(values, paths):
        if pth != ["topology"]:
            set_path(raw, pth, v)
    return _self_contained(raw, base_file)       # a data.path value, relative to the base too


def _grid_key_of(problem_key: str, keys: list[str]) -> str | None:
    for k in keys:
        if problem_key == k or problem_key.startswith(k + ".") or problem_key.startswith(k + "[") \
                or k.startswith(problem_key + ".") or k.startswith(problem_key + "["):
            return k
    return None


def load_sweep(path: str, out: str | None = None) -> Sweep:
    """Read a sweep file, build every point's scenario and validate it (scenario schema and
    topology). Every problem of every point is reported at once."""
    from .config.yamldoc import read_yaml
    from .scenario.load import load
    from .topology.graph import build_graph

    raw = read_yaml(path, "sweep file")
    p = Problems(path)
    if not isinstance(raw, dict):
        raise ScenarioError.one(path, "", raw, "a sweep must be a mapping with base: and grid:")
    sf = build(SweepFile, raw, p)
    if is_fail(sf):
        p.raise_if_any()
    assert isinstance(sf, SweepFile)
    sweep_dir = os.path.dirname(os.path.abspath(path))
    base_file = os.path.normpath(os.path.join(sweep_dir, sf.base))
    if not os.path.isfile(base_file):
        raise ScenarioError.one(path, "base", sf.base, "base scenario file not found")
    base_raw = read_yaml(base_file, "scenario file")
    if not isinstance(base_raw, dict):
        raise ScenarioError.one(base_file, "", base_raw, "a scenario must be a mapping of keys")
    base = _self_contained(base_raw, base_file)
    # ---- grid keys and values
    keys, paths, lists = [], [], []
    if not isinstance(sf.grid, dict) or not sf.grid:
        raise ScenarioError.one(path, "grid", sf.grid,
                                "expected a mapping of key paths to lists of values")
    for key, vals in sf.grid.items():
        gk = f"grid.{key}"
        if not isinstance(vals, list):
            p.add(gk, vals, "expected a list of values")
            continue
        parsed = parse_path(str(key))
        if parsed is None:
            p.add(gk, vals, "not a key path (names separated by '.', list indices as [i])")
            continue
        if parsed[0] == "output":
            p.add(gk, vals, "the sweep chooses each point's output folder")
            continue
        if not vals:
            p.add(gk, vals, "give at least one value")
            continue
        dup = [v for i, v in enumerate(vals) if v in vals[:i]]
        if dup:
            p.add(gk, dup[0], "value listed twice (two points would be the same run)")
            continue
        msg = set_path(copy.deepcopy(base), parsed, vals[0])
        if msg:
            p.add(gk, vals, msg)
            continue
        keys.append(str(key))
        paths.append(parsed)
        lists.append(vals)
    p.raise_if_any()
    combos = list(itertools.product(*[range(len(v)) for v in lists]))
    if len(combos) > MAX_POINTS:
        raise ScenarioError.one(path, "grid", f"{len(combos)} points",
                                f"more than {MAX_POINTS} points (resource guard)")
    names = point_names(keys, paths, lists, combos)
    # ---- build and validate every point
    points: list[Point] = []
    seen: set[tuple[str, str, str]] = set()
    problems: list[Problem] = []
    labels: tuple[str, ...] = ()
    target = sf.target
    with tempfile.TemporaryDirectory(prefix="hierfl-sweep-") as tmp:
        for name, combo in zip(names, combos):
            values = tuple((k, lists[j][i]) for j, (k, i) in enumerate(zip(keys, combo)))
            f = os.path.join(tmp, POINT_FILE)
            try:
                raw_pt = point_raw(base_raw, base_file, values, paths)
                text = yaml.safe_dump(raw_pt, sort_keys=False, default_flow_style=None)
                with open(f, "w", encoding="utf-8") as fh:
                    fh.write(text)
                sc = load(f, out=tmp)
                build_graph(sc.topology, sc.seed, f)
            except ScenarioError as exc:
                vals = dict(values)
                for pr in exc.problems:
                    gk = _grid_key_of(pr.key, keys)
                    if pr.file not in (f, ""):
                        item = pr                      # names its own file (a topology file)
                    elif gk is not None:
                        item = Problem(path, f"grid.{gk}", vals[gk],
                                       f"{pr.message} (point {name}, scenario key "
                                       f"{pr.key or '<top level>'})")
                    else:
                        item = Problem(base_file, pr.key, pr.value, pr.message)
                    sig = (item.file, item.key, str(item.value) + item.message.split(" (point")[0])
                    if sig not in seen:
                        seen.add(sig)
                        problems.append(item)
                continue
            if not labels:
                labels = tuple(e.label for e in sc.algorithms)
                if target is None:
                    target = sc.report.target_accuracy
            points.append(Point(name, values, text, sc.train.executor.threads))
    if problems:
        raise ScenarioError(problems)
    output = out if out is not None else os.path.normpath(os.path.join(
        sweep_dir, sf.output or os.path.join("reports", "sweeps",
                                             os.path.splitext(os.path.basename(path))[0])))
    return Sweep(path, tuple(keys), tuple(points), output, target, labels, sf.point_reports)


# ------------------------------------------------------------------------------ one point
def execute_point(text: str, folder: str, report: bool = True) -> dict:
    """Run one point into `folder` (created): its scenario, every algorithm, the report, then
    the DONE marker (atomically, last). Importable by spawned processes and Ray workers."""
    from .report.markdown import write_report
    from .run import run_scenario
    from .scenario.load import load

    t0 = time.time()
    os.makedirs(folder, exist_ok=True)
    f = os.path.join(folder, POINT_FILE)
    atomic_text(f, text)
    sc = load(f, out=folder)
    run_scenario(sc, progress=False, keep_trace=False)
    if report:
        write_report(folder, sc.name, sc.report.target_accuracy)
    info = {"wall_s": time.time() - t0, "host": os.uname().nodename, "pid": os.getpid()}
    atomic_text(os.path.join(folder, DONE), json.dumps(info) + "\n")
    return info


def zip_folder(folder: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for root, _, files in os.walk(folder):
            for name in sorted(files):
                full = os.path.join(root, name)
                z.write(full, os.path.relpath(full, folder))
    return buf.getvalue()


def ray_point(text: str, report: bool = True) -> tuple[bytes, dict]:
    """A point in a Ray worker: run it in a private temporary folder and send the folder back
    (as a zip), so the cluster needs no shared file system (only the data files, if any)."""
    with tempfile.TemporaryDirectory(prefix="hierfl-point-") as tmp:
        folder = os.path.join(tmp, "point")
        info = execute_point(text, folder, report)
        return zip_folder(folder), info


def _unzip(blob: bytes, folder: str) -> None:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        for member in z.namelist():
            dest = os.path.normpath(os.path.join(folder, member))
            if not dest.startswith(os.path.normpath(folder) + os.sep):
                raise ValueError(f"unsafe path in a point archive: {member}")
        z.extractall(folder)


# ------------------------------------------------------------------------------ the driver
def is_done(out: str, pt: Point) -> bool:
    return os.path.isfile(os.path.join(out, pt.name, DONE))


def _commit(staging: str, final: str) -> None:
    """Move a finished point (DONE inside) into place; an unfinished leftover is replaced."""
    if not os.path.isfile(os.path.join(staging, DONE)):
        raise RuntimeError(f"point folder {staging} has no {DONE} marker")
    if os.path.lexists(final):
        shutil.rmtree(final)
    os.replace(staging, final)


def _check_resume(sw: Sweep) -> None:
    """Finished points of an earlier run must be the same scenarios."""
    stale = []
    for pt in sw.points:
        if is_done(sw.output, pt):
            try:
                with open(os.path.join(sw.output, pt.name, POINT_FILE), encoding="utf-8") as fh:
                    same = fh.read() == pt.text
            except OSError:
                same = False
            if not same:
                stale.append(pt.name)
    if stale:
        raise ScenarioError.one(sw.file, "output", sw.output,
                                f"holds finished point(s) of a different scenario ({stale[0]}"
                                f"{' and more' if len(stale) > 1 else ''}): the base or the "
                                "grid changed; choose another output or delete those folders")


class _Lock:
    """One sweep driver per output folder (the lock dies with the process)."""

    def __init__(self, out: str, file: str):
        import fcntl
        self.fh = open(os.path.join(out, ".lock"), "w")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.close()
            raise ScenarioError.one(file, "output", out,
                                    "another sweep is running on this folder") from None

    def close(self) -> None:
        self.fh.close()


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _run_local(sw: Sweep, todo: list[Point], workers: int, staging: str,
               done: Callable[[Point, dict], None], failed: dict[str, str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = list(todo)
    for attempt in range(2):                   # a pool broken by a killed worker: one retry
        if not queue:
            return
        again: list[Point] = []
        pool = cf.ProcessPoolExecutor(max_workers=min(workers, len(queue)), mp_context=ctx)
        try:
            futs = {}
            for pt in queue:
                folder = os.path.join(staging, f"{pt.name}.{uuid.uuid4().hex[:8]}")
                fut = pool.submit(execute_point, pt.text, folder, sw.point_reports)
                futs[fut] = (pt, folder)
            for fut in cf.as_completed(futs):
                pt, folder = futs[fut]
                try:
                    info = fut.result()
                except cf.process.BrokenProcessPool as exc:
                    if attempt == 0:
                        again.append(pt)
                    else:
                        failed[pt.name] = f"worker process died: {exc}"
                    continue
                except Exception as exc:  # noqa: BLE001 - one point's failure is reported
                    failed[pt.name] = f"{type(exc).__name__}: {exc}"
                    continue
                _commit(folder, os.path.join(sw.output, pt.name))
                done(pt, info)
        except BaseException:                  # Ctrl-C: do not start the queued points
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        queue = again


def _run_ray(sw: Sweep, todo: list[Point], workers: int | None, address: str, staging: str,
             done: Callable[[Point, dict], None], failed: dict[str, str]) -> None:
    import ray

    from .exec.ray_exec import connect

    connect(address, workers, key="--address")
    task = ray.remote(max_retries=2)(ray_point)   # a task whose worker dies is rerun
    limit = workers or len(todo)
    queue = list(todo)
    pending: dict[Any, Point] = {}
    while queue or pending:
        while queue and len(pending) < limit:
            pt = queue.pop(0)
            pending[task.options(num_cpus=pt.threads).remote(pt.text, sw.point_reports)] = pt
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            pt = pending.pop(ref)
            try:
                blob, info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a failed point is reported, others go on
                failed[pt.name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1]}"
                continue
            folder = os.path.join(staging, f"{pt.name}.{uuid.uuid4().hex[:8]}")
            _unzip(blob, folder)
            _commit(folder, os.path.join(sw.output, pt.name))
            done(pt, info)


def run_sweep(sw: Sweep, backend: str = "local", address: str = "local",
              workers: int | None = None, progress: bool = True) -> dict[str, str]:
    """Run every unfinished point; write the summary. Returns {point: error} of failed points."""
    if backend not in ("local", "ray"):
        raise ScenarioError.one(sw.file, "--backend", backend, "expected local or ray")
    if workers is not None and workers < 1:
        raise ScenarioError.one(sw.file, "--workers", workers, "must be >= 1")
    if backend == "ray":
        from .exec.ray_exec import require_ray
        require_ray("--backend")
    os.makedirs(sw.output, exist_ok=True)
    lock = _Lock(sw.output, sw.file)
    try:
        _check_resume(sw)
        staging = os.path.join(sw.output, STAGING)
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        todo = [pt for pt in sw.points if not is_done(sw.output, pt)]
        n_done = len(sw.points) - len(todo)
        _log(progress, f"sweep {sw.file}: {len(sw.points)} points, {n_done} already finished, "
             f"{len(todo)} to run on {backend} -> {sw.output}")
        count = [n_done]

        def done(pt: Point, info: dict) -> None:
            count[0] += 1
            _log(progress, f"[{count[0]}/{len(sw.points)}] {pt.name} done in "
                 f"{info.get('wall_s', math.nan):.1f}s")

        failed: dict[str, str] = {}
        if todo:
            if backend == "local":
                _run_local(sw, todo, workers or min(len(todo), os.cpu_count() or 1), staging,
                           done, failed)
            else:
                _run_ray(sw, todo, workers, address, staging, done, failed)
        shutil.rmtree(staging, ignore_errors=True)
        for name, err in failed.items():
            _log(True, f"point {name} failed: {err}")
        summarize(sw)
        return failed
    finally:
        lock.close()


# ------------------------------------------------------------------------------ summary
def _stats(vals: list[float]) -> tuple[float, float]:
    v = [x for x in vals if math.isfinite(x)]
    if not v:
        return math.nan, math.nan
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else math.nan


def _pm(mean: float, std: float, spec_: str, show_std: bool) -> str:
    if not math.isfinite(mean):
        return "—"
    if not show_std:
        return format(mean, spec_)
    return f"{format(mean, spec_)} ± {format(std, spec_) if math.isfinite(std) else '—'}"


def point_rows(sw: Sweep) -> tuple[list[dict], dict[tuple[str, str], Any], float]:
    """Per (finished point, algorithm): final accuracy and time/bytes/rounds to target."""
    from .report.records import read_run

    series = {}
    for pt in sw.points:
        if is_done(sw.output, pt):
            for s in read_run(os.path.join(sw.output, pt.name)):
                series[pt.name, s.label] = s
    target = sw.target
    if target is None:
        finals = [s.final_acc for s in series.values() if math.isfinite(s.final_acc)]
        target = 0.9 * max(finals) if finals else math.nan
    rows = []
    for pt in sw.points:
        labels = [lb for (n, lb) in series if n == pt.name]
        labels = [lb for lb in sw.labels if lb in labels] + sorted(
            lb for lb in labels if lb not in sw.labels)
        for lb in labels:
            s = series[pt.name, lb]
            hit = s.first_reaching(target) if math.isfinite(target) else None
            last = s.rows[-1] if s.rows else {}
            rows.append({"point": pt.name, **{k: v for k, v in pt.values}, "algorithm": lb,
                         "final_acc": s.final_acc,
                         "rounds": last.get("round", math.nan),
                         "sim_time_s": last.get("sim_time_s", math.nan),
                         "bytes_total": last.get("bytes_up", math.nan)
                         + last.get("bytes_down", math.nan),
                         "time_to_target_s": hit["sim_time_s"] if hit else math.nan,
                         "bytes_to_target": hit["bytes_up"] + hit["bytes_down"] if hit
                         else math.nan,
                         "rounds_to_target": hit["round"] if hit else math.nan,
                         "diverged_at": s.diverged_at if s.diverged_at is not None else ""})
    return rows, series, target


def _group_key(values: tuple[tuple[str, Any], ...]) -> tuple:
    return tuple((k, json.dumps(v, sort_keys=True)) for k, v in values if k != "seed")


def summarize(sw: Sweep) -> str:
    """sweep.csv (the grid, mean and std over seeds), points.csv (one row per point and
    algorithm), sweep.md (the table and the figure) and sweep_accuracy.png."""
    rows, series, target = point_rows(sw)
    keys = list(sw.keys)
    other = [k for k in keys if k != "seed"]
    seeds_in = "seed" in keys
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = ["point", *keys, "algorithm", "final_acc", "rounds", "sim_time_s", "bytes_total",
            "time_to_target_s", "bytes_to_target", "rounds_to_target", "diverged_at"]
    w.writerow(cols)
    for r in rows:
        w.writerow([fmt(r[c]) if not isinstance(r[c], (list, dict)) else json.dumps(r[c])
                    for c in cols])
    atomic_text(os.path.join(sw.output, "points.csv"), buf.getvalue())
    # ---- groups: the grid without the seed, per algorithm
    groups: dict[tuple, list[dict]] = {}
    order: list[tuple] = []
    by_point = {pt.name: pt for pt in sw.points}
    for r in rows:
        g = (_group_key(by_point[r["point"]].values), r["algorithm"])
        if g not in groups:
            groups[g] = []
            order.append(g)
        groups[g].append(r)
    buf = io.StringIO()
    w = csv.writer(buf)
    metrics = [("final_acc", ".3f"), ("time_to_target_s", ".1f"), ("bytes_to_target", ".4g"),
               ("rounds_to_target", ".1f")]
    w.writerow([*other, "algorithm", "seeds", "reached"] +
               [f"{m}_{s}" for m, _ in metrics for s in ("mean", "std")] + ["target_accuracy"])
    head = "| " + " | ".join(other + ["algorithm", "seeds" if seeds_in else "runs",
                                      "final acc", "time to target (s)", "bytes to target",
                                      "rounds to target", "reached"]) + " |"
    lines = [head, "|" + "---|" * (len(other) + 7)]
    for g in order:
        rs = groups[g]
        first = dict(by_point[rs[0]["point"]].values)
        stats = {m: _stats([r[m] for r in rs]) for m, _ in metrics}
        reached = sum(math.isfinite(r["time_to_target_s"]) for r in rs)
        w.writerow([fmt(first[k]) if not isinstance(first[k], (list, dict))
                    else json.dumps(first[k]) for k in other] + [g[1], len(rs), reached] +
                   [fmt(x) for m, _ in metrics for x in stats[m]] + [fmt(target)])
        cells = [str(first[k]) for k in other] + [g[1], str(len(rs))]
        cells += [_pm(*stats[m], sp, seeds_in) for m, sp in metrics]
        cells.append(f"{reached}/{len(rs)}")
        lines.append("| " + " | ".join(cells) + " |")
    atomic_text(os.path.join(sw.output, "sweep.csv"), buf.getvalue())
    fig = plot_accuracy(sw, series, order, groups)
    missing = [pt.name for pt in sw.points if not is_done(sw.output, pt)]
    parts = [f"# hierfl sweep: {os.path.basename(sw.file)}", "",
             f"{len(sw.points)} points over {', '.join(keys)}; "
             f"{len(sw.points) - len(missing)} finished. Target accuracy: "
             f"{'—' if not math.isfinite(target) else format(target, '.3f')}"
             f" ({'given' if sw.target is not None else '0.9 x best final accuracy'}).", ""]
    if seeds_in:
        parts += ["Cells are mean ± std over seeds (sample std, n-1); time, bytes and rounds to "
                  "target average the seeds that reached it (column reached).", ""]
    parts += ["## Grid", "", *lines, "", "## Test accuracy vs round", "",
              f"![test accuracy vs round]({os.path.basename(fig)})", "",
              "One point per folder: `" + "`, `".join(pt.name for pt in sw.points[:5]) + "`"
              + (" ..." if len(sw.points) > 5 else "") + "; per-point numbers in points.csv."]
    if missing:
        parts += ["", "## Not finished", "", *[f"- {n}" for n in missing]]
    path = os.path.join(sw.output, "sweep.md")
    atomic_text(path, "\n".join(parts) + "\n")
    return path


def plot_accuracy(sw: Sweep, series: dict, order: list[tuple], groups: dict) -> str:
    """Test accuracy vs round: mean over seeds with a +- std band, one line per grid point and
    algorithm."""
    from .report.plots import colour, plt

    fig, ax = plt.subplots(figsize=(7.2, 4.6), dpi=120)
    styles = ["-", "--", ":", "-."]
    for i, g in enumerate(order):
        runs = [series[r["point"], r["algorithm"]] for r in groups[g]]
        acc: dict[float, list[float]] = {}
        for s in runs:
            for r in s.rows:
                a = r.get("test_acc", math.nan)
                if math.isfinite(a):
                    acc.setdefault(r["round"], []).append(a)
        if not acc:
            continue
        xs = sorted(acc)
        mean = np.array([np.mean(acc[x]) for x in xs])
        std = np.array([np.std(acc[x], ddof=1) if len(acc[x]) > 1 else 0.0 for x in xs])
        label = ", ".join(f"{k.split('.')[-1]}={json.loads(v)}" for k, v in g[0])
        label = f"{g[1]}" + (f" ({label})" if label else "")
        c = colour(i)
        ax.plot(xs, mean, styles[(i // 10) % 4], color=c, linewidth=1.5, label=label)
        if len(runs) > 1:
            ax.fill_between(xs, mean - std, mean + std, color=c, alpha=0.18, linewidth=0)
    ax.set_xlabel("cloud round")
    ax.set_ylabel("test accuracy (mean ± std over seeds)")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7, ncol=1 if len(ax.lines) <= 12 else 2)
    fig.tight_layout()
    path = os.path.join(sw.output, "sweep_accuracy.png")
    fig.savefig(path)
    plt.close(fig)
    return path


def main(path: str, backend: str = "local", address: str = "local", workers: int | None = None,
         out: str | None = None, progress: bool = True) -> int:
    """The `hierfl sweep` command: 0 when every point finished, 1 when some failed."""
    sw = load_sweep(path, out)
    failed = run_sweep(sw, backend, address, workers, progress)
    print(f"sweep summary: {os.path.join(sw.output, 'sweep.md')}")
    return 1 if failed else 0


__all__ = ["SweepFile", "Point", "Sweep", "load_sweep", "run_sweep", "summarize",
           "execute_point", "parse_path", "set_path", "main"]
