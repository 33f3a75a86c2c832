"""hierfl command line: run, validate, report, compare, docs, sweep, data fetch, trace convert."""
from __future__ import annotations

import argparse
import os
import sys

from .cli_checks import check_report_args, check_run_folder, check_stop_after, os_error_message
from .cli_system import _trace_parser, cmd_topology
from .config.errors import ScenarioError
from .config.paths import folder_problem

EXIT_BAD_INPUT = 2


def _print_problems(exc: ScenarioError) -> None:
    from .config.yamldoc import locate

    n = len(exc.problems)
    print(f"error: {n} problem{'s' if n != 1 else ''} in the input:", file=sys.stderr)
    for p in locate(exc.problems):
        print(f"  {p}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    """Checks what `hierfl run` would build, without torch for the stacked built-in models (the
    world is checked, not built for training: scenario/world_check.py)."""
    from .cli_summary import validated
    from .scenario.load import load
    from .scenario.world_check import check_world

    sc = load(args.scenario)
    world = check_world(sc)
    from .algorithms.state_size import guard_predicted_state

    guard_predicted_state(sc, world.topo.n_clients, world.n_params)   # as run, before building
    if sc.train.executor.device not in ("auto", "cpu"):     # cuda without CUDA: exit 2
        from .exec.device import resolve

        resolve(sc.train.executor.device, sc.file)
    print("\n".join(validated(sc, world, args.scenario)))
    return 0


def _check_out(sc, args: argparse.Namespace) -> None:
    """Refuse an output folder holding another scenario's results (run.json's hash differs, or
    results without run.json), unless --force, which clears its run outputs first."""
    from .outputs.manifest import clear_out, conflict, scenario_hash

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


def cmd_run(args: argparse.Namespace) -> int:
    from .run import run_scenario
    from .scenario.load import load

    check_stop_after(args.stop_after)
    if args.tensorboard is not None:
        from .outputs.tb_cli import check_logdir
        check_logdir(args.tensorboard)
    sc = load(args.scenario, seed=args.seed, rounds=args.rounds, out=args.out)
    if args.threads is not None and not 1 <= args.threads <= 256:
        raise ScenarioError.one("", "--threads", args.threads, "must be in 1..256")
    if args.threads:
        import dataclasses
        ex = dataclasses.replace(sc.train.executor, threads=args.threads)
        sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    if args.resume:               # refuse a changed run before saying what will run
        from .outputs.manifest import MANIFEST
        from .run.fingerprint import check_resume, run_fingerprint
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
        from .report import write_report      # matplotlib: only when a report is written

        path = write_report(sc.output, sc.name, sc.report.target_accuracy)
        print(f"report: {path}\nhtml: {os.path.join(os.path.dirname(path), 'report.html')}")
    if args.tensorboard:
        from .outputs import read_run
        from .outputs.tb_cli import tensorboard_done, write_tensorboard
        write_tensorboard(args.tensorboard, read_run(sc.output))
        tensorboard_done(args.tensorboard)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    check_report_args(args.target, args.timeline_round)
    if not os.path.isdir(args.out):
        raise ScenarioError.one("", "OUT", args.out, "no such folder")
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
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import main as sweep_main

    if args.tensorboard is not None:
        from .outputs.tb_cli import check_logdir
        check_logdir(args.tensorboard)
    return sweep_main(args.sweep, args.backend, args.address, args.workers, args.out,
                      progress=not args.quiet, tensorboard=args.tensorboard,
                      point_reports=args.point_reports)


def cmd_compare(args: argparse.Namespace) -> int:
    from .report import compare_runs

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
        path = compare_runs(args.runs, out, args.target, timeline_round=args.timeline_round)
    except FileNotFoundError as exc:
        raise ScenarioError.one("", "RUN", args.runs, str(exc)) from None
    print(f"report: {path}\nhtml: {os.path.join(out, 'report.html')}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    from .docs_gen import main as docs_main

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.path is None and not args.check and \
            not os.path.isfile(os.path.join(root, "pyproject.toml")):
        raise ScenarioError.one("", "--path", None, "hierfl is not run from its source "
                                "checkout, so there is no docs/scenario.md of its own to "
                                "update: give --path FILE")
    why = (folder_problem(os.path.dirname(os.path.abspath(args.path)))
           if args.path is not None and not args.check else None)
    if why:                     # a file where the reference's folder goes
        raise ScenarioError.one("", "--path", args.path, why)
    return docs_main(check=args.check, path=args.path)


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from .config.errors import Problem
    from .data.fetch import LEAF_HOWTO, fetch, snippet
    from .data.files import DataFileError

    if args.name == "leaf":
        print(LEAF_HOWTO, end="")
        return 0
    if not args.root:
        raise ScenarioError.one("", "--root", None, f"{args.name}: give the folder to fetch into")
    why = folder_problem(args.root)     # a file where the folder goes: not a bare EEXIST
    if why:
        raise ScenarioError.one("", "--root", args.root, why)
    try:
        fetch(args.name, args.root, offline=args.offline)
    except DataFileError as exc:
        raise ScenarioError([Problem(exc.path, "", None, exc.message)]) from None
    print(f"in a scenario (root relative to the scenario file, or absolute):\n  "
          f"{snippet(args.name, os.path.abspath(args.root))}")
    return 0


def _data_parser(sub: "_Sub") -> None:
    from .data.fetch import NAMES

    d = sub.add_parser("data", help="benchmark data sets: fetch their standard files")
    dsub = sub.add_subparsers(d, dest="data_cmd", required=True)
    f = dsub.add_parser("fetch", help="download a set's standard files, check their "
                        "checksums and print the scenario snippet (leaf: print how to "
                        "generate it)")
    f.add_argument("name", choices=NAMES)
    f.add_argument("--root", help="folder to put the files in (created if needed)")
    f.add_argument("--offline", action="store_true",
                   help="download nothing: check the files already in --root")
    f.set_defaults(fn=cmd_data_fetch)


class _Sub:
    """`add_parser` that gives every command the common options (--plugin)."""

    def __init__(self, sub: argparse._SubParsersAction, common: argparse.ArgumentParser):
        self.sub, self.common = sub, common

    def add_parser(self, *a, **kw) -> argparse.ArgumentParser:
        return self.sub.add_parser(*a, parents=[self.common], **kw)

    def add_subparsers(self, parser: argparse.ArgumentParser, **kw) -> "_Sub":
        return _Sub(parser.add_subparsers(**kw), self.common)


def _common() -> argparse.ArgumentParser:
    c = argparse.ArgumentParser(add_help=False)
    c.add_argument("--plugin", action="append", default=[], metavar="FILE",
                   help="a Python file that registers models, algorithms or data sets, "
                   "imported before the command runs (repeatable)")
    return c


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hierfl", description="Hierarchical federated learning "
                                 "simulator (simpy timing + torch training)")
    sub = _Sub(ap.add_subparsers(dest="cmd", required=True), _common())
    r = sub.add_parser("run", help="simulate every algorithm of a scenario and write a report")
    r.add_argument("scenario")
    r.add_argument("--out", help="output folder (default: the scenario's output:)")
    r.add_argument("--seed", type=int, help="override the scenario seed")
    r.add_argument("--rounds", type=int, help="override train.rounds")
    r.add_argument("--threads", type=int, help="torch intra-op threads")
    r.add_argument("--quiet", action="store_true",
                   help="print nothing but errors, warnings and the final report paths")
    r.add_argument("--no-report", action="store_true",
                   help="write the run's outputs but not the report (figures take seconds; "
                   "`hierfl report OUT` writes it later)")
    r.add_argument("--force", action="store_true",
                   help="clear an --out that holds another scenario's results (its run.json, "
                   "summary, reports, figures and algorithm folders) before running")
    r.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its checkpoints (finished algorithms "
                   "are kept, unfinished ones continue bit-for-bit)")
    r.add_argument("--tensorboard", metavar="DIR", help="also write every metric as "
                   "TensorBoard scalars, one run per algorithm (DIR/<label>/)")
    r.add_argument("--stop-after", type=int, metavar="N",
                   help="pause every algorithm after round N, leaving a checkpoint")
    r.set_defaults(fn=cmd_run)
    v = sub.add_parser("validate", help="check a scenario and its topology, print a summary")
    v.add_argument("scenario")
    v.set_defaults(fn=cmd_validate)
    rp = sub.add_parser("report", help="regenerate the report of a finished run")
    rp.add_argument("out")
    rp.add_argument("--target", type=float, help="target accuracy of the tables")
    rp.add_argument("--timeline-round", type=int, default=1,
                    help="cloud round drawn in the timeline figure (default 1)")
    rp.set_defaults(fn=cmd_report)
    cp = sub.add_parser("compare", help="several runs on the same axes; runs that differ only "
                        "by seed are pooled (mean +- std)")
    cp.add_argument("runs", nargs="+", help="output folders of finished runs")
    cp.add_argument("--out", help="where to write the comparison (default: <first run>/../compare)")
    cp.add_argument("--target", type=float, help="target accuracy of the tables")
    cp.add_argument("--timeline-round", type=int, default=1, help="cloud round of the timeline")
    cp.set_defaults(fn=cmd_compare)
    tp = sub.add_parser("topology", help="print a topology's tiers and distributions, draw it")
    tp.add_argument("file", help="a topology file, or a scenario (its topology)")
    tp.add_argument("--seed", type=int, help="seed for drawn attributes (default: the "
                    "scenario's, 0 for a topology file)")
    tp.add_argument("--png", help="draw the tree into this file (.png or .svg); without it "
                    "nothing is written")
    tp.set_defaults(fn=cmd_topology)
    dc = sub.add_parser("docs", help="generate the reference pages (docs/scenario.md, "
                        "docs/reference/topology.md, docs/reference/cli.md) from the code")
    dc.add_argument("--check", action="store_true",
                    help="exit 1 if a page on disk differs from the generated one")
    dc.add_argument("--path", default=None,
                    help="write or check only the scenario reference, in this file (default: "
                    "every page under docs/ of the source checkout hierfl runs from; required "
                    "when it is installed elsewhere)")
    dc.set_defaults(fn=cmd_docs)
    sw = sub.add_parser("sweep", help="run a base scenario over a grid of values, in parallel; "
                        "resumes an interrupted sweep")
    sw.add_argument("sweep", help="sweep file: base, grid, output")
    sw.add_argument("--backend", choices=["local", "ray"], default="local",
                    help="local: processes on this machine; ray: Ray tasks")
    sw.add_argument("--address", default="local",
                    help="ray: local (start one here), auto or HOST:PORT of a running cluster")
    sw.add_argument("--workers", type=int, help="points run at once (default: CPU cores)")
    sw.add_argument("--out", help="output folder (default: the sweep file's output:)")
    sw.add_argument("--quiet", action="store_true", help="no progress lines")
    sw.add_argument("--point-reports", action="store_true", help="every point also writes its "
                    "own report.md and figures (~2 CPU s a point; default: only the sweep's)")
    sw.add_argument("--tensorboard", metavar="DIR", help="also write every metric of every "
                    "finished point as TensorBoard scalars (DIR/<point>/<label>/)")
    sw.set_defaults(fn=cmd_sweep)
    _data_parser(sub)
    _trace_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.plugin:
            from .plugins import load_all
            load_all(args.plugin, key="--plugin")
        return args.fn(args)
    except ScenarioError as exc:
        _print_problems(exc)
        return EXIT_BAD_INPUT
    except OSError as exc:          # writing outputs: disk full, file too large, no access
        msg, code = os_error_message(exc)
        print(msg, file=sys.stderr)
        return code
    except KeyboardInterrupt:
        kept = {"run": ": metrics written so far are kept",
                "sweep": ": finished points are kept"}
        print("interrupted" + kept.get(getattr(args, "cmd", ""), ""), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
