"""The command line's own checks: of its arguments (the scenario's keys are checked by
scenario/checks.py) and of a saved run before `hierfl report` reads it; each problem is a
ScenarioError (exit 2) naming the option or file, the value and why."""
from __future__ import annotations

import csv
import math
import os

from ..config.errors import Problem, ScenarioError
from ..config.paths import figure_problem, output_problem


def check_stop_after(value: int | None) -> None:
    if value is not None and value < 1:
        raise ScenarioError.one("", "--stop-after", value, "must be >= 1 (the round after "
                                "which to pause)")


def check_threads(value: int | None) -> None:
    if value is not None and not 1 <= value <= 256:
        raise ScenarioError.one("", "--threads", value, "must be in 1..256")


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


def check_trace_args(clients: int | None, out: str) -> None:
    if clients is not None and clients < 1:
        raise ScenarioError.one("", "--clients", clients, "expected a count >= 1")
    if os.path.isdir(out):       # (the error named the temporary file beside it)
        raise ScenarioError.one("", "--out", out, "is a folder: give the CSV file to "
                                "write, e.g. " + os.path.join(out, "trace.csv"))


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
