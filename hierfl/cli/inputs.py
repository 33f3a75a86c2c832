"""The commands that bring outside material in, as the files a scenario names: `hierfl data
fetch` (a benchmark data set's standard files) and `hierfl trace convert` (published device
traces to hierfl's CSVs)."""
from __future__ import annotations

import argparse
import os

from ..config.errors import Problem, ScenarioError
from ..config.paths import folder_problem
from ..data.fetch import LEAF_HOWTO, fetch, snippet
from ..data.files import DataFileError
from ..outputs.files import atomic_text
from ..topology.fedscale import convert
from .checks import check_trace_args


def cmd_data_fetch(args: argparse.Namespace) -> int:
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


def cmd_trace_convert(args: argparse.Namespace) -> int:
    check_trace_args(args.clients, args.out)
    lines = convert(args.kind, args.input, flops_per_sample=args.flops_per_sample,
                    horizon_s=args.horizon_s, clients=args.clients)
    atomic_text(args.out, "\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(lines) - 1} rows ({lines[0]})")
    return 0
