"""Sweeps: one base scenario times a grid of values, every grid point a full scenario run.

A sweep file (YAML):

    base: scenarios/fedprox.yaml          # relative to the sweep file
    grid:                                 # dotted key paths into the base scenario, list indices
      algorithms[1].mu: [0, 0.01, 1]      # in brackets; every combination is one point
      stragglers.fraction: [0, 0.5]
      seed: [0, 1, 2]
    output: ../reports/fedprox-sweep      # relative to the sweep file (--out overrides)
    target: 0.8                           # optional accuracy target of the summary table
    point_reports: true                   # each point's report.md and figures (default false)
    reuse: true                           # run an algorithm once per distinct scenario it reads

Every point's scenario is built and validated before anything runs (errors name the sweep file
and the grid key). Points run in parallel on a process pool (`local`) or as Ray tasks (`ray`);
each one runs in a private staging folder, writes its report (only with `point_reports: true` or
`--point-reports`: the sweep report covers every point), then a `DONE` marker, and only then
is moved into `OUTPUT/<point>` (an atomic rename), so a killed sweep leaves only finished points
behind and a rerun skips them. An algorithm that does not read a grid key runs once per
distinct scenario it reads and is copied to the other points (reuse.py; `reuse: false` turns
this off). At the end: OUTPUT/sweep.md and the self-contained sweep.html (the run report's
look), sweep.csv, points.csv, metrics_all.csv and the figures sweep_<score>.png,
sweep_train_loss.png (colour = algorithm, line style = grid point; x = round, simulated time,
bytes) and sweep_to_target.png.

Modules: grid (key paths, the grid, point names), spec (the sweep file read and every point
validated), reuse (what each algorithm reads; copying its run), driver (running points: process
pool or Ray, staging, resume), summary (the tables, with the report's statistics), figures and
page (sweep.md, sweep.html)."""
from __future__ import annotations

import dataclasses
import os

from ..outputs.tb_cli import tensorboard_done, write_tensorboard
from .driver import execute_point, ray_point, run_sweep
from .grid import parse_path, point_names, set_path
from .spec import DONE, POINT_FILE, Point, Sweep, SweepFile, load_sweep
from .summary import is_done, read_points, summarize


def main(path: str, backend: str = "local", address: str = "local", workers: int | None = None,
         out: str | None = None, progress: bool = True, tensorboard: str | None = None,
         point_reports: bool = False) -> int:
    """The `hierfl sweep` command: 0 when every point finished, 1 when some failed.
    `tensorboard`: a folder for every finished point's metrics as TensorBoard scalars;
    `point_reports`: every point also writes its own report (as `point_reports: true`)."""
    sw = load_sweep(path, out)
    if point_reports:
        sw = dataclasses.replace(sw, point_reports=True)
    failed = run_sweep(sw, backend, address, workers, progress)
    print(f"sweep summary: {os.path.join(sw.output, 'sweep.md')}\n"
          f"html: {os.path.join(sw.output, 'sweep.html')}")
    if tensorboard:
        for (point, _), s in read_points(sw).items():
            write_tensorboard(tensorboard, [s], point)
        tensorboard_done(tensorboard)
    return 1 if failed else 0


__all__ = ["SweepFile", "Point", "Sweep", "load_sweep", "run_sweep", "summarize",
           "execute_point", "ray_point", "is_done", "parse_path", "set_path", "point_names",
           "DONE", "POINT_FILE", "main"]
