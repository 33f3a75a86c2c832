"""Sweeps: one base scenario times a grid of values, every grid point a full scenario run.

A sweep file (YAML):

    base: scenarios/fedprox.yaml          # relative to the sweep file
    grid:                                 # dotted key paths into the base scenario, list indices
      algorithms[1].mu: [0, 0.01, 1]      # in brackets; every combination is one point
      stragglers.fraction: [0, 0.5]
      seed: [0, 1, 2]
    output: ../reports/fedprox-sweep      # relative to the sweep file (--out overrides)
    target: 0.8                           # optional accuracy target of the summary table
    point_reports: true                   # each point's report.md and figures (false: faster)

Every point's scenario is built and validated before anything runs (errors name the sweep file
and the grid key). Points run in parallel on a process pool (`local`) or as Ray tasks (`ray`);
each one runs in a private staging folder, writes its report, then a `DONE` marker, and only then
is moved into `OUTPUT/<point>` (an atomic rename), so a killed sweep leaves only finished points
behind and a rerun skips them. At the end: OUTPUT/sweep.csv, sweep.md, points.csv and
sweep_accuracy.png (test accuracy vs round, mean +- std over seeds per grid point).

Modules: grid (key paths, the grid, point names), spec (the sweep file read and every point
validated), driver (running points: process pool or Ray, staging, resume), summary (the tables
and the figure, with the report's statistics)."""
from __future__ import annotations

import os

from .driver import execute_point, ray_point, run_sweep
from .grid import parse_path, point_names, set_path
from .spec import DONE, POINT_FILE, Point, Sweep, SweepFile, load_sweep
from .summary import is_done, summarize


def main(path: str, backend: str = "local", address: str = "local", workers: int | None = None,
         out: str | None = None, progress: bool = True) -> int:
    """The `hierfl sweep` command: 0 when every point finished, 1 when some failed."""
    sw = load_sweep(path, out)
    failed = run_sweep(sw, backend, address, workers, progress)
    print(f"sweep summary: {os.path.join(sw.output, 'sweep.md')}")
    return 1 if failed else 0


__all__ = ["SweepFile", "Point", "Sweep", "load_sweep", "run_sweep", "summarize",
           "execute_point", "ray_point", "is_done", "parse_path", "set_path", "point_names",
           "DONE", "POINT_FILE", "main"]
