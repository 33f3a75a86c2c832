"""`hierfl run` (one scenario: every algorithm, then the report) and `hierfl sweep` (a grid of
runs), with the output folder's checks: another scenario's results, --resume, --force."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from ..config.errors import ScenarioError
from ..outputs import read_run
from ..outputs.lock import output_lock
from ..outputs.manifest import MANIFEST, clear_out, conflict, scenario_hash
from ..outputs.tb_cli import check_logdir, tensorboard_done, write_tensorboard
from ..run import run_scenario
from ..run.fingerprint import check_resume, run_fingerprint
from ..scenario.load import load
from .checks import check_stop_after, check_threads


def cmd_run(args: argparse.Namespace) -> int:
    check_stop_after(args.stop_after)
    if args.tensorboard is not None:
        check_logdir(args.tensorboard)
    sc = load(args.scenario, seed=args.seed, rounds=args.rounds, out=args.out)
    check_threads(args.threads)
    if args.threads:
        ex = dataclasses.replace(sc.train.executor, threads=args.threads)
        sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    with output_lock(sc.output, sc.file):   # one writer: the checks, the run, its report
        return _run(sc, args)


def _run(sc, args: argparse.Namespace) -> int:
    if args.resume:               # refuse a changed run before saying what will run
        check_resume(sc, run_fingerprint(sc))
        if not os.path.isfile(os.path.join(sc.output, MANIFEST)) and not args.quiet:
            print(f"--resume: no earlier run in {sc.output}; running from the start",
                  file=sys.stderr)
    _check_out(sc, args)
    if not args.quiet:
        print(f"running {sc.name}: {len(sc.algorithms)} algorithm(s), {sc.train.rounds} rounds "
              f"-> {sc.output}", file=sys.stderr)
    res = run_scenario(sc, progress=not args.quiet, resume=args.resume,
                       stop_after=args.stop_after, keep_trace=False)
    if any(r.paused_at is not None for r in res.values()):
        same = "".join(f" {flag} {v}" for flag, v in (("--out", args.out), ("--seed", args.seed),
                                                      ("--rounds", args.rounds)) if v is not None)
        print(f"paused after round {args.stop_after}; continue with: hierfl run "
              f"{args.scenario} --resume{same}")
        return 0
    if args.no_report:
        print(f"outputs: {sc.output} (no report: `hierfl report {sc.output}` writes it)")
    else:
        from ..report import write_report      # matplotlib: only when a report is written

        path = write_report(sc.output, sc.name, sc.report.target_accuracy)
        print(f"report: {path}\nhtml: {os.path.join(os.path.dirname(path), 'report.html')}")
    if args.tensorboard:
        write_tensorboard(args.tensorboard, read_run(sc.output))
        tensorboard_done(args.tensorboard)
    return 0


def _check_out(sc, args: argparse.Namespace) -> None:
    """Refuse an output folder holding another scenario's results (run.json's hash differs, or
    results without run.json), unless --force, which clears its run outputs first."""
    if args.resume:             # --resume has checked the run's fingerprint, which names what
        return                  # changed and lets number-neutral settings (threads...) differ
    why = conflict(sc.output, scenario_hash(sc))
    if why is None:
        return
    if args.force:
        gone = clear_out(sc.output, keep=(sc.file, sc.topology_file))
        if not args.quiet:
            print(f"--force: cleared {len(gone)} run output(s) from {sc.output}",
                  file=sys.stderr)
        return
    raise ScenarioError.one(sc.file, "--out", sc.output,
                            f"{why}; scenario {sc.name!r} ({args.scenario}) would mix with "
                            "them: choose another --out, or --force to clear it first")


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..sweep import main as sweep_main     # matplotlib: run --no-report draws nothing

    if args.tensorboard is not None:
        check_logdir(args.tensorboard)
    return sweep_main(args.sweep, args.backend, args.address, args.workers, args.out,
                      progress=not args.quiet, tensorboard=args.tensorboard,
                      point_reports=args.point_reports)
