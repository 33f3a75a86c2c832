"""Checks of command-line arguments and of a saved run before `hierfl report` reads it; each
problem is a ScenarioError (exit 2) naming the option or file, the value and why."""
from __future__ import annotations

import csv
import errno
import math
import os

from .config.errors import Problem, ScenarioError
from .config.paths import figure_problem, output_problem

# an OSError with one of these is about the destination the user named (exit 2); any other
# (disk full, file too large, I/O error) is the machine's (exit 1)
USER_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR,
               errno.ENOENT, errno.EEXIST, errno.ENAMETOOLONG}


def check_stop_after(value: int | None) -> None:
    if value is not None and value < 1:
        raise ScenarioError.one("", "--stop-after", value, "must be >= 1 (the round after "
                                "which to pause)")


def check_report_args(target: float | None, timeline_round: int | None,
                      out: str | None = None) -> None:
    probs = []
    if target is not None and not math.isfinite(target):
        probs.append(Problem("", "--target", target, "expected a finite number"))
    if timeline_round is not None and timeline_round < 1:
        probs.append(Problem("", "--timeline-round", timeline_round, "rounds count from 1"))
    why = output_problem(out) if out is not None else None
    if why:
        probs.append(Problem("", "--out", out, str(why)))
    if probs:
        raise ScenarioError(probs)


def check_figure(path: str, key: str = "--png") -> None:
    msg = figure_problem(path)
    if msg:
        raise ScenarioError.one("", key, path, msg)


def check_run_folder(out: str) -> None:
    """Every OUT/<label>/metrics.csv has a header with `round` and numeric rounds."""
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name, "metrics.csv")
        if not os.path.isfile(path):
            continue
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.reader(fh)
                header = next(reader, None)
                if not header or "round" not in header:
                    raise ScenarioError.one(path, "header", header, "a metrics.csv starts with a "
                                            "header holding round (corrupted file?)", 1)
                col = header.index("round")
                for line, row in enumerate(reader, 2):
                    try:
                        float(row[col])
                    except (IndexError, ValueError):
                        raise ScenarioError.one(path, "round", row[col] if col < len(row)
                                                else None, "expected a round number "
                                                "(corrupted file?)", line) from None
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ScenarioError.one(path, "", None, f"cannot read: {exc}") from None


def os_error_message(exc: OSError) -> tuple[str, int]:
    """(the message, the exit status) of an OSError that escaped a command."""
    what = exc.strerror or str(exc)
    where = exc.filename if exc.filename is not None else (_file_of(exc) or "a file")
    code = 2 if exc.errno in USER_ERRNOS else 1
    return f"error: cannot read or write {where}: {what}", code


def _file_of(exc: BaseException) -> str | None:
    """The file an OSError without a file name was about (`fh.write` raises without one):
    the innermost frame of its traceback that holds an open file object, else a path."""
    found, tb = None, exc.__traceback__
    while tb is not None:
        names = tb.tb_frame.f_locals
        for v in names.values():
            if hasattr(v, "write") and isinstance(getattr(v, "name", None), str):
                found = v.name
        if found is None:
            for key in ("path", "tmp", "dst", "file"):
                if isinstance(names.get(key), str):
                    found = names[key]
        tb = tb.tb_next
    return found
