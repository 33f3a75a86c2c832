"""Crash-safe file writing: whole files atomically (temp + rename), CSV logs appended and flushed
row by row, and one background writer thread (checkpoints)."""
from __future__ import annotations

import csv
import io
import os
import tempfile
import threading
from typing import Any, Callable, IO

import numpy as np


TEMP_PREFIX = ".tmp-"      # an interrupted atomic write leaves TEMP_PREFIX<random><name>


def same_file(a: str, b: str) -> bool:
    """a and b are one file (False where either is missing or a dangling link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _umask() -> int:
    """The process's umask: from /proc (Linux, no side effect, safe beside other threads),
    else by setting it and setting it back."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str, write: Callable[[IO[Any]], None], binary: bool = False) -> None:
    """Write `path` whole or not at all: a temp file in its folder, fsynced, then renamed
    over it. The file gets the mode open() would give a new file (0666 less the umask), not
    mkstemp's 0600, so it reads like the files appended beside it."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=TEMP_PREFIX, suffix=os.path.basename(path))
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_text(path: str, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text))


def atomic_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    def write(fh: IO[bytes]) -> None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        fh.write(buf.getvalue())
    atomic_write(path, write, binary=True)


class Background:
    """Runs one job at a time in a thread while the caller goes on (writing a checkpoint:
    serialising, writing and fsyncing megabytes of state releases the GIL, so the simulation
    keeps its core). `submit` first waits for the previous job; `wait` joins the job and
    re-raises its error in the caller, so nothing fails silently. Jobs must own their data
    (copies), never views of state the caller goes on changing."""

    def __init__(self, name: str = "hierfl-writer"):
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, job: Callable[[], None]) -> None:
        self.wait()

        def run() -> None:
            try:
                job()
            except BaseException as exc:      # handed to the caller by wait()
                self._error = exc

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc


class CsvLog:
    """A CSV file appended row by row and flushed after each row."""

    def __init__(self, path: str, header: list[str], append: bool = False):
        exists = append and os.path.exists(path) and os.path.getsize(path) > 0
        self.fh = open(path, "a" if exists else "w", newline="")
        self.w = csv.writer(self.fh)
        self.header = header
        if not exists:
            self.w.writerow(header)
            self.fh.flush()

    def row(self, values: dict[str, Any]) -> None:
        self.w.writerow([fmt(values.get(k, "")) for k in self.header])
        self.fh.flush()

    def rows(self, values: list[dict[str, Any]]) -> None:
        """Several rows, flushed once."""
        self.w.writerows([fmt(v.get(k, "")) for k in self.header] for v in values)
        self.fh.flush()

    def write(self, text: str) -> None:
        """Rows already formatted as csv.writer would (one flush)."""
        self.fh.write(text)
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def fmt(v: Any) -> str:
    t = type(v)
    if t is float:                            # the common cases first
        return repr(v) if v == v else ""
    if t is int or t is str:
        return str(v)
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if v != v:
            return ""
        return repr(v)
    return str(v)
