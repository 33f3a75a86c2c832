"""Running a sweep: each point in a private staging folder (a process pool here, or Ray tasks
that send the folder back zipped), its report, then a DONE marker, then one rename into
OUTPUT/<point>; a killed sweep keeps its finished points and a rerun runs only the rest. One
driver per output folder (a lock). At the end the summary is written (summary.py)."""
from __future__ import annotations

import concurrent.futures as cf
import io
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import uuid
import zipfile
from typing import Any, Callable

from ..config.errors import ScenarioError
from ..outputs import atomic_text
from ..plugins import bundle
from .spec import DONE, POINT_FILE, STAGING, Point, Sweep
from .summary import is_done, summarize


def execute_point(text: str, folder: str, report: bool = True, plugins: tuple = ()) -> dict:
    """Run one point into `folder` (created): its scenario, every algorithm, the report, then
    the DONE marker (atomically, last). Importable by spawned processes and Ray workers, which
    first import the driver's plugins (`plugins.bundle()`: --plugin files and the like)."""
    from ..plugins import ensure
    from ..report import write_report
    from ..run import run_scenario
    from ..scenario.load import load

    ensure(plugins)
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


def ray_point(text: str, report: bool = True, plugins: tuple = ()) -> tuple[bytes, dict]:
    """A point in a Ray worker: run it in a private temporary folder and send the folder back
    (as a zip), so the cluster needs no shared file system (only the data files, if any)."""
    with tempfile.TemporaryDirectory(prefix="hierfl-point-") as tmp:
        folder = os.path.join(tmp, "point")
        info = execute_point(text, folder, report, plugins)
        return zip_folder(folder), info


def _unzip(blob: bytes, folder: str) -> None:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        for member in z.namelist():
            dest = os.path.normpath(os.path.join(folder, member))
            if not dest.startswith(os.path.normpath(folder) + os.sep):
                raise ValueError(f"unsafe path in a point archive: {member}")
        z.extractall(folder)


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
                fut = pool.submit(execute_point, pt.text, folder, sw.point_reports, bundle())
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

    from ..exec.ray_exec import connect

    connect(address, workers, key="--address")
    task = ray.remote(max_retries=2)(ray_point)   # a task whose worker dies is rerun
    limit = workers or len(todo)
    queue = list(todo)
    pending: dict[Any, Point] = {}
    while queue or pending:
        while queue and len(pending) < limit:
            pt = queue.pop(0)
            pending[task.options(num_cpus=pt.threads).remote(pt.text, sw.point_reports,
                                                             bundle())] = pt
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
        from ..exec.ray_exec import require_ray
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
