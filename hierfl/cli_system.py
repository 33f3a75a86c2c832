"""The commands about a simulated system: `hierfl topology` (print and draw a topology) and
`hierfl trace convert` (published traces to hierfl's CSVs)."""
from __future__ import annotations

import argparse
import os

from .cli_checks import check_figure
from .config.errors import ScenarioError


def cmd_topology(args: argparse.Namespace) -> int:
    from .config.errors import Problems
    from .config.yamldoc import read_yaml
    from .scenario.load import load_topology
    from .config.fields import seed_range
    from .topology.describe import draw, summary
    from .topology.graph import build_topology

    path = os.path.abspath(args.file)
    if args.png:
        check_figure(args.png)
    graph = path.endswith((".graphml", ".xml"))
    doc = None if graph else read_yaml(path, "topology")
    if graph or isinstance(doc, dict) and "nodes" in doc and "links" in doc:   # a graph file
        from .config.topology import TopologySpec
        spec, seed = TopologySpec(graph=os.path.basename(path)), 0
    elif isinstance(doc, dict) and "topology" in doc and "algorithms" in doc:   # a scenario's
        from .scenario.load import load
        sc = load(path)
        spec, path, seed = sc.topology, sc.topology_file or path, sc.seed
    else:
        problems = Problems(path)
        spec, _ = load_topology(path, os.path.dirname(path), path, problems)
        problems.raise_if_any()
        seed = 0
    seed = seed if args.seed is None else args.seed
    if seed_range(seed):
        raise ScenarioError.one("", "--seed", seed, seed_range(seed))
    topo = build_topology(spec, seed, path)
    print(f"topology {args.file} (seed {seed})")
    print(summary(topo))
    if args.png:
        from .report.plots.system_scale import tree_png
        print(f"drawing: {tree_png(topo, args.png, draw)}")
    else:
        print("drawing: none written (give --png PATH to draw the tree)")
    return 0


def cmd_trace_convert(args: argparse.Namespace) -> int:
    from .outputs.files import atomic_text
    from .topology.fedscale import convert

    if args.clients is not None and args.clients < 1:
        raise ScenarioError.one("", "--clients", args.clients, "expected a count >= 1")
    if os.path.isdir(args.out):       # (the error named the temporary file beside it)
        raise ScenarioError.one("", "--out", args.out, "is a folder: give the CSV file to "
                                "write, e.g. " + os.path.join(args.out, "trace.csv"))
    lines = convert(args.kind, args.input, flops_per_sample=args.flops_per_sample,
                    horizon_s=args.horizon_s, clients=args.clients)
    atomic_text(args.out, "\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(lines) - 1} rows ({lines[0]})")
    return 0


def _trace_parser(sub: "_Sub") -> None:
    from .topology.fedscale import KINDS

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
    c.set_defaults(fn=cmd_trace_convert)
