"""The command line's surface and dispatch: every command's options, then `main`, which imports
the room of the command given (validate.py, run.py, report.py, topology.py, inputs.py,
docs.py), runs it, and turns what escapes it into an exit status (2: bad input, 1: the
machine's error, 130: interrupted)."""
from __future__ import annotations

import argparse
import errno
import importlib
import sys

from ..config.errors import ScenarioError
from ..data.fetch import NAMES
from ..plugins import load_all
from ..topology.fedscale import KINDS

EXIT_BAD_INPUT = 2

# an OSError with one of these is about the destination the user named (exit 2); any other
# (disk full, file too large, I/O error) is the machine's (exit 1)
USER_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR,
               errno.ENOENT, errno.EEXIST, errno.ENAMETOOLONG}


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


def _command(p: argparse.ArgumentParser, room: str, fn: str) -> None:
    """The command is function `fn` of module `room` of this package, imported when run."""
    p.set_defaults(room=room, fn=fn)


def _run_parsers(sub: _Sub) -> None:
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
    _command(r, "run", "cmd_run")
    v = sub.add_parser("validate", help="check a scenario and its topology, print a summary")
    v.add_argument("scenario")
    _command(v, "validate", "cmd_validate")


def _report_parsers(sub: _Sub) -> None:
    rp = sub.add_parser("report", help="regenerate the report of a finished run")
    rp.add_argument("out")
    rp.add_argument("--target", type=float, help="target accuracy of the tables")
    rp.add_argument("--timeline-round", type=int, default=1,
                    help="cloud round drawn in the timeline figure (default 1)")
    _command(rp, "report", "cmd_report")
    cp = sub.add_parser("compare", help="several runs on the same axes; runs that differ only "
                        "by seed are pooled (mean +- std)")
    cp.add_argument("runs", nargs="+", help="output folders of finished runs")
    cp.add_argument("--out", help="where to write the comparison (default: <first run>/../compare)")
    cp.add_argument("--target", type=float, help="target accuracy of the tables")
    cp.add_argument("--timeline-round", type=int, default=1, help="cloud round of the timeline")
    _command(cp, "report", "cmd_compare")


def _topology_parser(sub: _Sub) -> None:
    tp = sub.add_parser("topology", help="print a topology's tiers and distributions, draw it")
    tp.add_argument("file", help="a topology file, or a scenario (its topology)")
    tp.add_argument("--seed", type=int, help="seed for drawn attributes (default: the "
                    "scenario's, 0 for a topology file)")
    tp.add_argument("--png", help="draw the tree into this file (.png or .svg); without it "
                    "nothing is written")
    _command(tp, "topology", "cmd_topology")


def _docs_parser(sub: _Sub) -> None:
    dc = sub.add_parser("docs", help="generate the reference pages (docs/scenario.md, "
                        "docs/reference/topology.md, docs/reference/cli.md) from the code")
    dc.add_argument("--check", action="store_true",
                    help="exit 1 if a page on disk differs from the generated one")
    dc.add_argument("--path", default=None,
                    help="write or check only the scenario reference, in this file (default: "
                    "every page under docs/ of the source checkout hierfl runs from; required "
                    "when it is installed elsewhere)")
    _command(dc, "docs", "cmd_docs")


def _sweep_parser(sub: _Sub) -> None:
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
    _command(sw, "run", "cmd_sweep")


def _inputs_parsers(sub: _Sub) -> None:
    d = sub.add_parser("data", help="benchmark data sets: fetch their standard files")
    dsub = sub.add_subparsers(d, dest="data_cmd", required=True)
    f = dsub.add_parser("fetch", help="download a set's standard files, check their "
                        "checksums and print the scenario snippet (leaf: print how to "
                        "generate it)")
    f.add_argument("name", choices=NAMES)
    f.add_argument("--root", help="folder to put the files in (created if needed)")
    f.add_argument("--offline", action="store_true",
                   help="download nothing: check the files already in --root")
    _command(f, "inputs", "cmd_data_fetch")
    t = sub.add_parser("trace", help="measured traces: convert published formats to hierfl's CSVs")
    tsub = sub.add_subparsers(t, dest="trace_cmd", required=True)
    c = tsub.add_parser("convert", help="FedScale's device capacity / behaviour traces (exported "
                        "from their pickles to JSON) to devices / availability CSVs")
    c.add_argument("kind", choices=KINDS)
    c.add_argument("input", help="the JSON export of FedScale's trace")
    c.add_argument("--out", required=True, help="the CSV to write")
    c.add_argument("--flops-per-sample", type=float,
                   help="fedscale-capacity: training FLOPs of one sample of your model")
    c.add_argument("--horizon-s", type=float,
                   help="fedscale-behave: simulated seconds the intervals must cover")
    c.add_argument("--clients", type=int, help="keep the first N clients (by FedScale id)")
    _command(c, "inputs", "cmd_trace_convert")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hierfl", description="Hierarchical federated learning "
                                 "simulator (simpy timing + torch training)")
    sub = _Sub(ap.add_subparsers(dest="cmd", required=True), _common())
    _run_parsers(sub)
    _report_parsers(sub)
    _topology_parser(sub)
    _docs_parser(sub)
    _sweep_parser(sub)
    _inputs_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.plugin:
            load_all(args.plugin, key="--plugin")
        # each command imports its own room only: torch, matplotlib, networkx stay out of the rest
        room = importlib.import_module(f"{__package__}.{args.room}")
        return getattr(room, args.fn)(args)
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


def _print_problems(exc: ScenarioError) -> None:
    from ..config.yamldoc import locate     # yaml (~50 ms): --help, docs read no YAML

    n = len(exc.problems)
    print(f"error: {n} problem{'s' if n != 1 else ''} in the input:", file=sys.stderr)
    for p in locate(exc.problems):
        print(f"  {p}", file=sys.stderr)


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
