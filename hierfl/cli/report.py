"""`hierfl report` (a finished run's report, again) and `hierfl compare` (several runs on the
same axes): both read saved outputs only, checked first (cli/checks.check_run_folder)."""
from __future__ import annotations

import argparse
import os

from ..config.errors import ScenarioError
from ..outputs.lock import output_lock
from ..report import compare_runs, write_report
from .checks import check_report_args, check_run_folder


def cmd_report(args: argparse.Namespace) -> int:
    check_report_args(args.target, args.timeline_round)
    if not os.path.isdir(args.out):
        raise ScenarioError.one("", "OUT", args.out, "no such folder")
    with output_lock(args.out, key="OUT"):   # a run still writing there: refused, named
        _report(args)
    return 0


def _report(args: argparse.Namespace) -> None:
    check_run_folder(args.out)
    try:
        path = write_report(args.out, os.path.basename(args.out.rstrip('/')), args.target,
                            timeline_round=args.timeline_round)
        print(f"report: {path}\nhtml: {os.path.join(os.path.dirname(path), 'report.html')}")
    except FileNotFoundError as exc:
        raise ScenarioError.one("", "OUT", args.out, str(exc)) from None
    except (KeyError, ValueError, IndexError) as exc:       # a saved file edited by hand
        raise ScenarioError.one("", "OUT", args.out, f"cannot read the run's files "
                                f"(corrupted?): {type(exc).__name__}: {exc}") from None


def cmd_compare(args: argparse.Namespace) -> int:
    check_report_args(args.target, args.timeline_round, args.out)
    seen: dict[str, str] = {}
    for p in args.runs:
        if not os.path.isdir(p):
            raise ScenarioError.one("", "RUN", p, "no such folder")
        check_run_folder(p)
        real = os.path.realpath(p)
        if real in seen:                    # its seeds would be pooled with themselves
            raise ScenarioError.one("", "RUN", p, f"the same folder as {seen[real]} given before")
        seen[real] = p
    out = args.out or os.path.join(os.path.dirname(os.path.normpath(args.runs[0])), "compare")
    try:
        with output_lock(out, key="--out"):
            path = compare_runs(args.runs, out, args.target, timeline_round=args.timeline_round)
    except FileNotFoundError as exc:
        raise ScenarioError.one("", "RUN", args.runs, str(exc)) from None
    print(f"report: {path}\nhtml: {os.path.join(out, 'report.html')}")
    return 0
