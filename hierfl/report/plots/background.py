"""Saving a report's figures in forked processes while the report goes on: laying out and
writing a figure (PNG + SVG) is ~2/3 of a report's time (quickstart: ~4.8 of ~7 s), and the
figures are independent, so on several cores they are written side by side.

Inside `background_saves()`, `style.save` forks a child that inherits the finished figure, lays it
out and writes its files, and exits; the report closes its copy and draws the next one. At most
one child per core runs at once; leaving the context waits for all of
them and lists the figures that failed, with their error, so the report can say so instead of
showing them. The files are those an inline save writes, byte for byte. Inline (no fork) where
os.fork is missing, on one core, with Ray loaded in the process (gRPC's threads do not survive a
fork), in a pool's worker process, where a fork fails, or with HIERFL_REPORT_WORKERS=0. SIGINT is
held back across each fork, so a Ctrl-C reaches the report as one KeyboardInterrupt.

`ahead(fn, *args)` starts reading a large input the same way (a city-scale round's timeline),
outside the figures' limit of one child per core: its value (a dict of numpy arrays and JSON
values; no pickle: `pack`) comes back when the report asks for it, or is worked out then in the
report's process where no child ran or it failed."""
from __future__ import annotations

import contextlib
import gc
import json
import multiprocessing
import os
import signal
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np


@dataclass
class Saves:
    workers: int
    running: dict[int, tuple[str, int]] = field(default_factory=dict)   # pid -> (path, pipe)
    failed: list[tuple[str, str]] = field(default_factory=list)         # (path, error)
    ahead: list["Ahead"] = field(default_factory=list)                   # not collected yet


_ACTIVE: Saves | None = None


def workers() -> int:
    """Children at once: HIERFL_REPORT_WORKERS, else the usable cores; 0 (inline) where os.fork
    is missing, with Ray loaded, inside a worker process of a pool (a sweep's points: their
    reports would each fork a child per core) or on one core. The report itself mostly waits:
    a figure takes ~0.1 s to draw and ~0.35 s to lay out and write."""
    if not hasattr(os, "fork") or "ray" in sys.modules or \
            multiprocessing.parent_process() is not None:
        return 0
    env = os.environ.get("HIERFL_REPORT_WORKERS", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
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
        with _no_interrupt():              # a second Ctrl-C waits until every child is reaped
            while saves.running:
                _reap(saves, next(iter(saves.running)))
            _drop_all(saves.ahead)          # never asked for (the report failed)


def forget(path: str) -> None:
    """Before a figure's files are removed: wait for its child and drop its failure, if any."""
    saves = _ACTIVE
    if saves is None:
        return
    for pid in [pid for pid, (p, _) in saves.running.items() if p == path]:
        _reap(saves, pid)
    saves.failed[:] = [f for f in saves.failed if f[0] != path]


def submit(path: str, write: Callable[[], None]) -> bool:
    """Run `write` (a figure's layout and files) in a child; False when not inside
    background_saves or when no child can be made (the caller writes inline)."""
    saves = _ACTIVE
    if saves is None:
        return False
    while len(saves.running) >= saves.workers:
        _reap(saves, next(iter(saves.running)))
    read, send = os.pipe()
    with _no_interrupt():                  # no Ctrl-C between the fork and the child's try
        gc.freeze()                        # the child's collector leaves the report's objects be
        try:
            pid = os.fork()
        except OSError:                    # no memory for a child: this figure inline
            gc.unfreeze()
            os.close(read)
            os.close(send)
            return False
        if pid == 0:
            _child(send, [read, *_read_ends(saves)], write)     # never returns
        gc.unfreeze()
    os.close(send)
    saves.running[pid] = (path, read)
    return True


def _read_ends(saves: Saves) -> list[int]:
    """The report's ends of every child's pipe: a new child closes its copies (one it kept
    would keep a sibling writing into a pipe the report closed from ending)."""
    return [r for _, r in saves.running.values()] + \
        [job.read for job in saves.ahead if job.read is not None]


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _child(send: int, reads: list[int], write: Callable[[], None]) -> None:
    code = 1
    try:
        _close_all(reads)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        write()
        code = 0
    except KeyboardInterrupt:
        os.write(send, b"interrupted")
    except BaseException as exc:  # noqa: BLE001 - sent to the report, which notes it
        os.write(send, f"{type(exc).__name__}: {exc}".encode()[:4000])
    finally:
        os._exit(code)


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """SIGINT held back (delivered when the block ends) where it would leave a child astray."""
    if threading.current_thread() is not threading.main_thread():
        yield                               # (signals reach the main thread only)
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _reap(saves: Saves, pid: int) -> None:
    """Wait for the child `pid`; note its figure if it failed."""
    path, read = saves.running.pop(pid)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        with os.fdopen(read, "rb") as fh:
            message = fh.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        saves.failed.append((path, message or (f"the saving process was killed by signal {-code}"
                                               if code < 0 else
                                               f"the saving process exited with {code}")))


AHEAD_AT_ONCE = 2        # children working ahead (or holding a value) per core, at most


class Ahead:
    """`fn(*args)` worked out in a forked child while the report goes on (`ahead`); `result()`
    gives its value (sent back by `pack`). Where the child cannot be made, or fails in any way,
    `result()` calls fn(*args) itself, so a value or an error is what an inline call gives."""

    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args = fn, args
        self.pid: int | None = None
        self.read: int | None = None

    def result(self):
        if self.pid is None:
            return self.fn(*self.args)
        fd, self.read = self.read, None          # (closed below whatever happens)
        data = bytearray()
        try:
            with os.fdopen(fd, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    data += chunk
        finally:
            code = self._wait()                  # (a child still writing ends on the closed pipe)
        if code == 0:
            try:
                return unpack(data)
            except Exception:  # noqa: BLE001 - a damaged transfer: worked out here instead
                pass
        return self.fn(*self.args)

    def _wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        saves = _ACTIVE
        if saves is not None and self in saves.ahead:
            saves.ahead.remove(self)
        return os.waitstatus_to_exitcode(status)


def _drop_all(jobs: list[Ahead]) -> None:
    """Jobs not asked for: every pipe closed first (a child blocked writing then ends, as no
    other process holds its pipe open), then each child waited for."""
    jobs = list(jobs)
    for job in jobs:
        if job.read is not None:
            fd, job.read = job.read, None
            os.close(fd)
    for job in jobs:
        if job.pid is not None:
            job._wait()


def ahead(fn: Callable, *args) -> Ahead:
    """Start working out fn(*args) in a child now (inside background_saves; else it is worked
    out when asked for). For reading a run's large files (a W9 round's timeline: ~1 s each)
    while the report draws its other figures: fn must only read, and return what `pack`
    takes."""
    job = Ahead(fn, args)
    saves = _ACTIVE
    if saves is None or len(saves.ahead) >= AHEAD_AT_ONCE * saves.workers:
        return job                         # (a compare of many large runs: a few at a time)
    read, send = os.pipe()
    with _no_interrupt():
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            os.close(read)
            os.close(send)
            return job
        if pid == 0:
            _worked_out(send, [read, *_read_ends(saves)], fn, args)     # never returns
        gc.unfreeze()
    os.close(send)
    job.pid, job.read = pid, read
    saves.ahead.append(job)
    return job


def _worked_out(send: int, reads: list[int], fn: Callable, args: tuple) -> None:
    code = 1
    try:
        _close_all(reads)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        data = memoryview(pack(fn(*args)))
        while data:
            data = data[os.write(send, data):]
        code = 0
    except BaseException:  # noqa: BLE001 - the report works it out itself
        pass
    finally:
        os._exit(code)


def pack(value: dict) -> bytes:
    """A dict of str keys to numeric numpy arrays and JSON values (strs, numbers, None, lists,
    dicts; NaN and infinities as json writes them) as bytes: the header's length (8 bytes),
    the header (JSON: each array's key, dtype and shape, and the other values), then the
    arrays' bytes, each padded to 8 bytes. Anything else raises (the report then works the
    value out itself)."""
    arrays = {k: np.ascontiguousarray(v) for k, v in value.items() if isinstance(v, np.ndarray)}
    if any(a.dtype.hasobject for a in arrays.values()):
        raise TypeError("object arrays are not sent")
    head = json.dumps({"arrays": [[k, a.dtype.str, list(a.shape)] for k, a in arrays.items()],
                       "rest": {k: v for k, v in value.items() if k not in arrays}}).encode()
    parts = [struct.pack("<Q", len(head) + _pad(len(head))), head + b" " * _pad(len(head))]
    for a in arrays.values():              # each starts 8-byte aligned (numpy reads it in place)
        parts += (a.tobytes(), bytes(_pad(a.nbytes)))
    return b"".join(parts)


def _pad(n: int) -> int:
    return -n % 8


def unpack(data: bytearray) -> dict:
    """`pack`'s dict back (arrays writable, on `data`'s memory)."""
    (size,) = struct.unpack_from("<Q", data)
    head = json.loads(bytes(data[8:8 + size]))
    out, at = dict(head["rest"]), 8 + size
    for key, dtype, shape in head["arrays"]:
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        out[key] = np.frombuffer(data, dt, n, at).reshape(shape)
        at += n * dt.itemsize + _pad(n * dt.itemsize)
    if at != len(data):
        raise ValueError("a transfer of the wrong length")
    return out
