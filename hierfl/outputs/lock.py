"""One writer per output folder: an exclusive lock held for the whole of a run (or a report, a
sweep, a sweep point), so a second `hierfl run` / `--resume` / `report` on the same folder is
refused (exit 2, naming the holder) instead of interleaving its rows with the first's.

The lock is `flock(LOCK_EX | LOCK_NB)` on the hidden file OUT/.hierfl-lock. The kernel drops a
flock when its holder dies, however it dies (kill -9 included), so a lock is never stale: a
crashed run's folder is free at once. The file holds the holder's pid, start time and command,
which the refusal quotes; the holder removes it when it lets go (a waiter that had opened the
removed file sees that the path is no longer its file and tries again). Within one process the
lock is reentrant (the CLI's `run` holds it around the run and the report, `run_scenario` takes
it again). Readers (a report's figures read by `compare`, `hierfl validate`) take no lock."""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..config.errors import ScenarioError

LOCK = ".hierfl-lock"

_guard = threading.Lock()
_held: dict[str, list] = {}          # real path of the folder -> [fd, depth, created folder]


def holder(folder: str) -> dict | None:
    """What the lock file of `folder` says about its holder (None: no file, or unreadable)."""
    try:
        with open(os.path.join(folder, LOCK), encoding="utf-8") as fh:
            info = json.loads(fh.read() or "null")
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _describe(folder: str) -> str:
    info = None
    for _ in range(20):             # the holder writes its details just after it locks
        info = holder(folder)
        if info is not None:
            break
        time.sleep(0.01)
    if info is None:
        return "another process holds it (it has not said which yet)"
    pid, host = info.get("pid"), info.get("host")
    gone = ""
    if isinstance(pid, int) and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:      # a child it started (and that kept the file) holds it
            gone = "; that process has ended, a process it started still holds the lock"
        except PermissionError:
            pass
    return (f"process {pid} on {host}, started {info.get('started')}, is writing to it "
            f"(command: {info.get('command')}){gone}")


def _command() -> str:
    """This process's command line, as typed (`python -m hierfl run ...` shows as `hierfl`)."""
    argv = list(sys.argv) or ["python"]
    name = os.path.basename(argv[0])
    if name == "__main__.py":
        name = os.path.basename(os.path.dirname(argv[0])) or "python"
    return shlex.join([name or "python"] + argv[1:])


def _acquire(folder: str, file: str, key: str, wait: bool) -> None:
    real = os.path.realpath(folder)
    with _guard:
        if real in _held:
            _held[real][1] += 1
            return
        created = not os.path.isdir(real)
        os.makedirs(real, exist_ok=True)
        path = os.path.join(real, LOCK)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise ScenarioError.one(file, key, folder, "this output folder is in use: "
                                        f"{_describe(real)}; wait for it to end (or stop it), "
                                        "or choose another folder") from None
            try:
                same = os.path.samestat(os.stat(path), os.fstat(fd))
            except FileNotFoundError:
                same = False
            if same:                # else the holder removed it as it let go: lock the new one
                break
            os.close(fd)
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": _command()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        _held[real] = [fd, 1, created]


def _release(folder: str) -> None:
    real = os.path.realpath(folder)
    with _guard:
        entry = _held.get(real)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[real]
        fd, _, created = entry
        try:
            os.unlink(os.path.join(real, LOCK))      # still ours: we hold the lock
        except OSError:
            pass
        os.close(fd)
        if created:              # a folder made only to be locked (the run was refused)
            try:
                os.rmdir(real)
            except OSError:
                pass


@contextmanager
def output_lock(folder: str, file: str = "", key: str = "--out",
                wait: bool = False) -> Iterator[None]:
    """Hold `folder` (created if missing) for writing; a ScenarioError naming `file`, `key` and
    the holder (pid, host, start, command) when another process holds it. `wait`: wait for the
    holder instead (a write of a moment: TensorBoard's event files)."""
    _acquire(folder, file, key, wait)
    try:
        yield
    finally:
        _release(folder)


def holds(folder: str) -> bool:
    """This process holds `folder`'s lock."""
    with _guard:
        return os.path.realpath(folder) in _held
