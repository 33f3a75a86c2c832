"""`hierfl topology`: a topology's tiers and distributions printed, its tree drawn with --png;
from a topology file, a graph file (node-link JSON or GraphML) or a scenario (its topology,
with its seed)."""
from __future__ import annotations

import argparse
import os

from ..config.errors import Problems, ScenarioError
from ..config.fields import seed_range
from ..config.topology import TopologySpec
from ..config.yamldoc import read_yaml
from ..scenario.load import load, load_topology
from ..topology.describe import draw, summary
from ..topology.graph import build_topology
from .checks import check_figure


def cmd_topology(args: argparse.Namespace) -> int:
    path = os.path.abspath(args.file)
    if args.png:
        check_figure(args.png)
    graph = path.endswith((".graphml", ".xml"))
    doc = None if graph else read_yaml(path, "topology")
    if graph or isinstance(doc, dict) and "nodes" in doc and "links" in doc:   # a graph file
        spec, seed = TopologySpec(graph=os.path.basename(path)), 0
    elif isinstance(doc, dict) and "topology" in doc and "algorithms" in doc:   # a scenario's
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
        from ..report.plots.system_scale import tree_png    # matplotlib: only --png draws
        print(f"drawing: {tree_png(topo, args.png, draw)}")
    else:
        print("drawing: none written (give --png PATH to draw the tree)")
    return 0
