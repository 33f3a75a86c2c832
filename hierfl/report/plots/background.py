"""Saving a report's figures in forked processes while the report goes on: laying out and
writing a figure (PNG + SVG) is ~2/3 of a report's time (quickstart: ~4.8 of ~7 s), and the
figures are independent, so on several cores they are written side by side.

Inside `background_saves()`, `style.save` forks a child that inherits the finished figure, lays it
out and writes its files, and exits; the report closes its copy and draws the next one. At most
one child per core runs at once; leaving the context waits for all of
them and lists the figures that failed, with their error, so the report can say so instead of
showing them. The files are those an inline save writes, byte for byte. Inline (no fork) where
os.fork is missing, on one core, with Ray loaded in the process (gRPC's threads do not survive a
fork), or with HIERFL_REPORT_WORKERS=0."""
from __future__ import annotations

import contextlib
import gc
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator


@dataclass
class Saves:
    workers: int
    running: dict[int, tuple[str, int]] = field(default_factory=dict)   # pid -> (path, pipe)
    failed: list[tuple[str, str]] = field(default_factory=list)         # (path, error)


_ACTIVE: Saves | None = None


def workers() -> int:
    """Children at once: HIERFL_REPORT_WORKERS, else the usable cores (0: inline). The report
    itself mostly waits: a figure takes ~0.1 s to draw and ~0.35 s to lay out and write."""
    env = os.environ.get("HIERFL_REPORT_WORKERS", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    if not hasattr(os, "fork") or "ray" in sys.modules:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    return cores if cores > 1 else 0


@contextlib.contextmanager
def background_saves() -> Iterator[list[tuple[str, str]]]:
    """Within it, figures are saved in children (see the module); on leaving, the list it gave
    holds (path, error) of every figure whose save failed."""
    global _ACTIVE
    n = workers()
    if _ACTIVE is not None or not n:
        yield []                           # nested, or inline: save() saves as it always did
        return
    _ACTIVE = saves = Saves(n)
    try:
        yield saves.failed
    finally:
        _ACTIVE = None
        while saves.running:
            _reap(saves)


def submit(path: str, write: Callable[[], None]) -> bool:
    """Run `write` (a figure's layout and files) in a child; False when not inside
    background_saves (the caller writes inline)."""
    saves = _ACTIVE
    if saves is None:
        return False
    while len(saves.running) >= saves.workers:
        _reap(saves)
    read, send = os.pipe()
    gc.freeze()                      # the child's collector leaves the report's objects be
    try:
        pid = os.fork()
    finally:
        gc.unfreeze()
    if pid == 0:                                                 # the child
        os.close(read)
        code = 0
        try:
            write()
        except BaseException as exc:  # noqa: BLE001 - sent to the report, which notes it
            os.write(send, f"{type(exc).__name__}: {exc}".encode()[:4000])
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            os._exit(code)
    os.close(send)
    saves.running[pid] = (path, read)
    return True


def _reap(saves: Saves) -> None:
    """Wait for the oldest child; note its figure if it failed."""
    pid = next(iter(saves.running))
    path, read = saves.running.pop(pid)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as fh:
        message = fh.read().decode(errors="replace")
    if status != 0:
        saves.failed.append((path, message or f"the saving process ended with status {status}"))
