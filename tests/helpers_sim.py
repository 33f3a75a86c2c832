"""Small builders shared by the simulator tests: write an npz + scenario into a folder and run."""
from __future__ import annotations

import os

import numpy as np
import yaml

from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load


def write_npz(path: str, xs: list, ys: list) -> str:
    arrays = {}
    for k, (x, y) in enumerate(zip(xs, ys)):
        arrays[f"x_{k}"] = np.asarray(x, float).reshape(len(x), -1)
        arrays[f"y_{k}"] = np.asarray(y, float)
    np.savez(path, **arrays)
    return path


def write_scenario(folder: str, doc: dict, name: str = "s.yaml") -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    return path


def run_one(path: str, label: str | None = None, out: str | None = None):
    """Run one algorithm entry of a scenario; returns (AlgoResult, final global params)."""
    sc = load(path, out=out)
    world = build_world(sc)
    entry = next(e for e in sc.algorithms if label is None or e.label == label)
    res = run_algorithm(sc, entry, world, os.path.join(sc.output, entry.label), progress=False)
    params = np.load(os.path.join(sc.output, entry.label, "final_params.npz"))["global"]
    return res, params
