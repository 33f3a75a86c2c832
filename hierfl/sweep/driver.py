"""Running a sweep: each point in a private staging folder (a process pool here, or Ray tasks
that send the folder back zipped), its report, then a DONE marker, then one rename into
OUTPUT/<point>; a killed sweep keeps its finished points and a rerun runs only the rest. A
failed point's folder is kept too, without DONE (its point.yaml, which its error names, and what
it wrote), and a rerun runs it again. One driver per output folder (a lock). At the end the
summary is written (summary.py)."""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable

from ..config.errors import ScenarioError
from ..outputs import atomic_text
from ..outputs.lock import output_lock
from ..plugins import bundle, ensure
from ..report import write_report
from ..run import run_scenario
from ..scenario.load import load
from .reuse import filler, owners, unzip_tree, zip_tree
from .spec import DONE, POINT_FILE, STAGING, Point, Sweep
from .summary import is_done, summarize


def execute_point(text: str, folder: str, report: bool = True, plugins: tuple = (),
                  borrowed: dict[str, tuple[str, str | bytes]] | None = None,
                  shown: str | None = None, name: str | None = None) -> dict:
    """Run one point into `folder` (created): its scenario, every algorithm, the report, then
    the DONE marker (atomically, last). `borrowed`: {label: (owner point, the owner's folder
    for it, or a zip of it)}: those algorithms are not rerun but copied (reuse.py). Importable by spawned
    processes and Ray workers, which first import the driver's plugins (`plugins.bundle()`:
    --plugin files and the like). `shown`: the path a ScenarioError names for the point's
    scenario (where the driver keeps it; default: folder's point.yaml, which may be gone).
    `name`: the point's folder name once committed (the report's title; default: `folder`'s)."""
    ensure(plugins)
    t0 = time.time()
    os.makedirs(folder, exist_ok=True)
    f = os.path.join(folder, POINT_FILE)
    with output_lock(folder, shown or f, "output"):     # the point's run, report and DONE
        atomic_text(f, text)
        try:
            sc = load(f, out=folder)
            run_scenario(sc, progress=False, keep_trace=False,
                         borrowed={lb: filler(src) for lb, (_, src) in (borrowed or {}).items()})
            if report:
                write_report(folder, sc.name, sc.report.target_accuracy, folder_name=name)
        except ScenarioError as exc:
            if shown is None:
                raise
            raise ScenarioError([dataclasses.replace(p, file=shown) if p.file == f else p
                                 for p in exc.problems]) from None
        info = {"wall_s": time.time() - t0, "host": os.uname().nodename, "pid": os.getpid(),
                "reused": {lb: owner for lb, (owner, _) in (borrowed or {}).items()}}
        atomic_text(os.path.join(folder, DONE), json.dumps(info) + "\n")
    return info


def ray_point(text: str, report: bool = True, plugins: tuple = (),
              borrowed: dict[str, tuple[str, str | bytes]] | None = None,
              shown: str | None = None, name: str | None = None) -> tuple[bytes, dict]:
    """A point in a Ray worker: run it in a private temporary folder and send the folder back
    (as a zip), so the cluster needs no shared file system (only the data files, if any)."""
    with tempfile.TemporaryDirectory(prefix="hierfl-point-") as tmp:
        folder = os.path.join(tmp, "point")
        info = execute_point(text, folder, report, plugins, borrowed, shown, name)
        return zip_tree(folder), info


def _commit(staging: str, final: str) -> None:
    """Move a finished point (DONE inside) into place; an unfinished leftover is replaced."""
    if not os.path.isfile(os.path.join(staging, DONE)):
        raise RuntimeError(f"point folder {staging} has no {DONE} marker")
    if os.path.lexists(final):
        shutil.rmtree(final)
    os.replace(staging, final)


def _keep_failed(sw: Sweep, pt: Point, staging: str | None) -> None:
    """A failed point's folder in OUTPUT/<point>, without DONE: its staging folder when there is
    one (what it wrote), else its point.yaml alone (a Ray worker's folder is not sent back)."""
    final = os.path.join(sw.output, pt.name)
    if os.path.lexists(final):
        shutil.rmtree(final)
    if staging is not None and os.path.isdir(staging):
        os.replace(staging, final)
    else:
        os.makedirs(final)
    if not os.path.isfile(os.path.join(final, POINT_FILE)):
        atomic_text(os.path.join(final, POINT_FILE), pt.text)


def _shown(sw: Sweep, pt: Point) -> str:
    return os.path.join(sw.output, pt.name, POINT_FILE)


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


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


class _Ready:
    """The points still to run, handed out once every point they borrow from is finished
    (owners come first in grid order, so the points always drain). A point whose owner failed
    fails too."""

    def __init__(self, sw: Sweep, todo: list[Point], failed: dict[str, str], pack: bool):
        self.sw, self.waiting, self.failed = sw, list(todo), failed
        self.deps = owners(sw.points) if sw.reuse else {}
        self.pack = pack        # send the owner's folder as a zip (Ray), else its path

    def _source(self, owner: str, label: str) -> str | bytes:
        folder = os.path.join(self.sw.output, owner, label)
        return zip_tree(folder) if self.pack else folder

    def take(self) -> list[tuple[Point, dict[str, tuple[str, str | bytes]]]]:
        out, keep = [], []
        for pt in self.waiting:
            deps = self.deps.get(pt.name, {})
            bad = [(lb, o) for lb, o in deps.items() if o in self.failed]
            if bad:
                self.failed[pt.name] = f"reuses {bad[0][0]} of point {bad[0][1]}, which failed"
            elif all(os.path.isfile(os.path.join(self.sw.output, o, DONE))
                     for o in deps.values()):
                out.append((pt, {lb: (o, self._source(o, lb)) for lb, o in deps.items()}))
            else:
                keep.append(pt)
        self.waiting = keep
        return out


def _watch_driver(driver: int) -> None:
    """A pool worker's watchdog: exit when the driver is gone (killed: a worker waiting for
    work would otherwise wait forever, holding both ends of its queue's pipe)."""
    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _salvage(sw: Sweep, staging: str, todo: list[Point]) -> list[Point]:
    """Points that finished in the staging folder of an interrupted or killed driver (DONE
    inside, the same point.yaml): moved into place. Returns the points still to run."""
    if not os.path.isdir(staging):
        return todo
    by_name = {pt.name: pt for pt in todo}
    kept = set()
    for entry in sorted(os.listdir(staging)):
        pt = by_name.get(entry.rpartition(".")[0])
        folder = os.path.join(staging, entry)
        if pt is None or pt.name in kept or not os.path.isfile(os.path.join(folder, DONE)):
            continue
        try:
            with open(os.path.join(folder, POINT_FILE), encoding="utf-8") as fh:
                same = fh.read() == pt.text
        except OSError:
            same = False
        if same:
            _commit(folder, os.path.join(sw.output, pt.name))
            kept.add(pt.name)
    return [pt for pt in todo if pt.name not in kept]


def _stop(pool: cf.ProcessPoolExecutor, futs: dict, sw: Sweep,
          done: Callable[[Point, dict], None]) -> None:
    """Ctrl-C: keep the points that have finished, stop the workers (they would go on with the
    queued points), start nothing more."""
    for fut, (pt, folder, _) in futs.items():
        if fut.done() and not fut.cancelled() and fut.exception() is None and \
                os.path.isfile(os.path.join(folder, DONE)):
            _commit(folder, os.path.join(sw.output, pt.name))
            done(pt, fut.result())
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _run_local(sw: Sweep, ready: _Ready, workers: int, staging: str,
               done: Callable[[Point, dict], None], failed: dict[str, str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    retry: list = []
    for attempt in range(2):                   # a pool broken by a killed worker: one retry
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                      initializer=_watch_driver, initargs=(os.getpid(),))
        futs: dict = {}
        broken = False

        def submit(items: list) -> None:
            for pt, borrowed in items:
                folder = os.path.join(staging, f"{pt.name}.{uuid.uuid4().hex[:8]}")
                futs[pool.submit(execute_point, pt.text, folder, sw.point_reports, bundle(),
                                 borrowed, _shown(sw, pt), pt.name)] = (pt, folder, borrowed)
        try:
            submit(retry + ready.take())
            retry = []
            while futs:
                finished, _ = cf.wait(list(futs), return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    pt, folder, borrowed = futs.pop(fut)
                    try:
                        info = fut.result()
                    except cf.process.BrokenProcessPool as exc:
                        broken = True
                        if attempt == 0:
                            retry.append((pt, borrowed))
                        else:
                            failed[pt.name] = f"worker process died: {exc}"
                            _keep_failed(sw, pt, folder)
                        continue
                    except Exception as exc:  # noqa: BLE001 - one point's failure is reported
                        failed[pt.name] = f"{type(exc).__name__}: {exc}"
                        _keep_failed(sw, pt, folder)
                        continue
                    _commit(folder, os.path.join(sw.output, pt.name))
                    done(pt, info)
                if not broken:
                    submit(ready.take())
        except BaseException:                  # Ctrl-C: do not start the queued points
            _stop(pool, futs, sw, done)
            raise
        pool.shutdown(wait=True)
        if not retry and not ready.waiting:
            return


def _run_ray(sw: Sweep, ready: _Ready, workers: int | None, address: str, staging: str,
             done: Callable[[Point, dict], None], failed: dict[str, str]) -> None:
    import ray                              # ray: the ray backend only

    from ..exec.ray_exec import connect     # ray: the ray backend only

    connect(address, workers, key="--address")
    task = ray.remote(max_retries=2)(ray_point)   # a task whose worker dies is rerun
    limit = workers or len(ready.waiting)
    queue: list = ready.take()
    pending: dict[Any, Point] = {}
    while queue or pending:
        while queue and len(pending) < limit:
            pt, borrowed = queue.pop(0)
            pending[task.options(num_cpus=pt.threads).remote(
                pt.text, sw.point_reports, bundle(), borrowed, _shown(sw, pt), pt.name)] = pt
        if not pending:
            break
        finished, _ = ray.wait(list(pending), num_returns=1)
        for ref in finished:
            pt = pending.pop(ref)
            try:
                blob, info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a failed point is reported, others go on
                failed[pt.name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1]}"
                _keep_failed(sw, pt, None)
                continue
            folder = os.path.join(staging, f"{pt.name}.{uuid.uuid4().hex[:8]}")
            unzip_tree(blob, folder)
            _commit(folder, os.path.join(sw.output, pt.name))
            done(pt, info)
        queue += ready.take()


def run_sweep(sw: Sweep, backend: str = "local", address: str = "local",
              workers: int | None = None, progress: bool = True) -> dict[str, str]:
    """Run every unfinished point; write the summary. Returns {point: error} of failed points."""
    if backend not in ("local", "ray"):
        raise ScenarioError.one(sw.file, "--backend", backend, "expected local or ray")
    if workers is not None and workers < 1:
        raise ScenarioError.one(sw.file, "--workers", workers, "must be >= 1")
    if backend == "ray":
        from ..exec.ray_exec import require_ray     # ray: the ray backend only
        require_ray("--backend")
    with output_lock(sw.output, sw.file, "output"):     # one driver per output folder
        return _sweep(sw, backend, address, workers, progress)


def _sweep(sw: Sweep, backend: str, address: str, workers: int | None,
           progress: bool) -> dict[str, str]:
    _check_resume(sw)
    staging = os.path.join(sw.output, STAGING)
    todo = _salvage(sw, staging, [pt for pt in sw.points if not is_done(sw.output, pt)])
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    n_done = len(sw.points) - len(todo)
    _log(progress, f"sweep {sw.file}: {len(sw.points)} points, {n_done} already finished, "
         f"{len(todo)} to run on {backend} -> {sw.output}")
    count = [n_done]

    def done(pt: Point, info: dict) -> None:
        count[0] += 1
        by_owner: dict[str, list[str]] = {}
        for lb, o in (info.get("reused") or {}).items():
            by_owner.setdefault(o, []).append(lb)
        _log(progress, f"[{count[0]}/{len(sw.points)}] {pt.name} done in "
             f"{info.get('wall_s', math.nan):.1f}s" + "".join(
                 f"; {', '.join(lbs)} copied from {o}" for o, lbs in by_owner.items()))

    failed: dict[str, str] = {}
    ready = _Ready(sw, todo, failed, pack=backend == "ray")
    if todo:
        if backend == "local":
            _run_local(sw, ready, min(workers or os.cpu_count() or 1, len(todo)), staging,
                       done, failed)
        else:
            _run_ray(sw, ready, workers, address, staging, done, failed)
    for pt in ready.waiting:
        failed.setdefault(pt.name, "not run (the worker pool broke twice)")
    shutil.rmtree(staging, ignore_errors=True)
    for name, err in failed.items():
        _log(True, f"point {name} failed: {err}")
    kept = [n for n in failed if os.path.isdir(os.path.join(sw.output, n))]
    if kept:
        _log(True, f"failed points keep their folder, without {DONE} ({sw.output}/<point>: "
             f"{POINT_FILE} and what it wrote); a rerun of the sweep runs them again")
    summarize(sw)
    return failed
