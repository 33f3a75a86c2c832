"""A sweep file read and checked: the base scenario, the grid, and every point's scenario built
as self-contained YAML (topology inlined, data path absolute) and validated before anything
runs; problems name the sweep file and the grid key."""
from __future__ import annotations

import copy
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import yaml

from ..config.errors import Problem, Problems, ScenarioError
from ..config.paths import output_problem
from ..config.fields import Raw, build, is_fail, spec, unit_interval
from ..config.yamldoc import add_duplicates, read_doc
from ..data.check import for_other_kinds, for_other_sets
from ..data.registry import DATASETS, OptionsSpec
from ..scenario.load import load
from ..topology.graph import build_graph
from .grid import Grid, point_names, read_grid, set_path
from .reuse import algorithm_keys

DONE = "DONE"
POINT_FILE = "point.yaml"          # the point's self-contained scenario, in its folder
STAGING = ".staging"


@dataclass(frozen=True)
class SweepFile:
    """The keys of a sweep file."""

    base: str = spec(doc="the base scenario file (relative to the sweep file)")
    grid: Raw = spec(doc="mapping: dotted key path -> list of values")
    output: str = spec("", "output folder (relative to the sweep file); --out overrides")
    target: float | None = spec(None, "accuracy target of the summary table (default: the "
                                "base scenario's report.target_accuracy, else 0.9 x best)",
                                check=unit_interval)
    point_reports: bool = spec(False, "write each point's report.md and figures (false: only "
                               "the run files the sweep report reads: a report costs a point "
                               "~2 CPU s of figures; `hierfl sweep --point-reports` turns it on)")
    reuse: bool = spec(True, "run an algorithm once per distinct scenario it reads (a grid key "
                       "it does not read reuses its result, the same files); false: every "
                       "algorithm at every point")


@dataclass(frozen=True)
class Point:
    name: str                                  # folder name, from the grid values
    values: tuple[tuple[str, Any], ...]        # (grid key, value), in grid order
    text: str                                  # the point's scenario, self-contained YAML
    threads: int                               # torch threads the point's runs use
    algo_keys: tuple[tuple[str, str], ...] = ()  # (label, what it reads: reuse.entry_key)


@dataclass(frozen=True)
class Sweep:
    file: str
    keys: tuple[str, ...]
    points: tuple[Point, ...]
    output: str
    target: float | None
    labels: tuple[str, ...]                    # algorithm labels of the base scenario
    point_reports: bool = False                # each point writes its report.md and figures
    reuse: bool = True                         # an algorithm runs once per distinct scenario


def _read_once(path: str, what: str) -> Any:
    """A YAML file's data; a key given twice is an error (YAML keeps the last one silently,
    and the points are built from the data, so the scenario loader would never see it)."""
    doc = read_doc(path, what)
    p = Problems(path, doc.lines)
    add_duplicates(p, doc)
    p.raise_if_any()
    return doc.data


def _self_contained(raw: dict, base_file: str) -> dict:
    """The base scenario with its topology inlined and its file paths made absolute (data,
    plugins, and the files a topology names: its graph, devices trace, availability and moves
    traces, relative to the topology file), so that a point runs anywhere (another folder,
    another machine with the same paths)."""
    raw = copy.deepcopy(raw)
    base_dir = os.path.dirname(os.path.abspath(base_file))
    topo_dir = base_dir
    if isinstance(raw.get("topology"), str):
        topo_file = os.path.join(base_dir, raw["topology"])
        raw["topology"] = _read_once(topo_file, "topology file")
        topo_dir = os.path.dirname(os.path.abspath(topo_file))
    topo = raw.get("topology")
    if isinstance(topo, dict):
        _absolute(topo, "graph", topo_dir)
        for part in ("clients", "availability", "mobility"):
            if isinstance(topo.get(part), dict):
                _absolute(topo[part], "trace" if part == "clients" else "path", topo_dir)
    for entry in raw.get("algorithms") or []:     # an entry's own moves file: the scenario's
        if isinstance(entry, dict) and isinstance(entry.get("mobility"), dict):
            _absolute(entry["mobility"], "path", base_dir)
    data = raw.get("data")
    keys: tuple[str, ...] = ("path", "root")    # data files: npz, leaf (path), image sets (root)
    decl = DATASETS.declared(data.get("name")) if isinstance(data, dict) and \
        isinstance(data.get("name"), str) else None
    if decl is not None and not issubclass(decl.params, OptionsSpec):
        keys += decl.facts.more_files           # image_folder's test: tree
    for key in keys:
        if isinstance(data, dict) and isinstance(data.get(key), str):
            data[key] = os.path.normpath(os.path.join(base_dir, data[key]))
    if isinstance(raw.get("plugins"), list):  # plugin files, like data files: absolute
        raw["plugins"] = [os.path.normpath(os.path.join(base_dir, f)) if isinstance(f, str)
                          else f for f in raw["plugins"]]
    raw.pop("output", None)
    return raw


def _absolute(d: dict, key: str, folder: str) -> None:
    if isinstance(d.get(key), str):
        d[key] = os.path.normpath(os.path.join(folder, d[key]))


def point_raw(base_raw: dict, base_file: str, values: tuple[tuple[str, Any], ...],
              paths: list[list[str | int]], data_names: list | None = None,
              partition_kinds: list | None = None) -> dict:
    """The base scenario with a point's values: a value for `topology` itself (another file,
    relative to the base scenario, or a mapping) is set before the topology is inlined, every
    other value after, so that `topology.clients.count` works on a topology file too.
    `data_names`: the values of a grid's data.name; a base data: key that the point's set does
    not read but another of them does is left out (check.for_other_sets); `partition_kinds`,
    the values of data.partition.kind: the same for the base's partition keys
    (check.for_other_kinds)."""
    raw = copy.deepcopy(base_raw)
    for (_, v), pth in zip(values, paths):
        if pth == ["topology"]:
            set_path(raw, pth, v)
    raw = _self_contained(raw, base_file)
    for (_, v), pth in zip(values, paths):
        if pth != ["topology"]:
            set_path(raw, pth, v)
    data = raw.get("data")
    if data_names and isinstance(data, dict):
        _leave_out(data, for_other_sets(data.get("name"), data, data_names), paths, ["data"])
    part = data.get("partition") if isinstance(data, dict) else None
    if partition_kinds and isinstance(part, dict):
        _leave_out(part, for_other_kinds(data.get("name"), part, partition_kinds), paths,
                   ["data", "partition"])
    return _self_contained(raw, base_file)       # a data.path value, relative to the base too


def _leave_out(mapping: dict, keys: list[str], paths: list[list[str | int]],
               at: list[str]) -> None:
    """Delete `keys` from `mapping` (the raw mapping at path `at`) but those the grid sets:
    a grid's own value is meant for its point."""
    gridded = {pth[len(at)] for pth in paths if len(pth) > len(at) and pth[:len(at)] == at}
    for key in keys:
        if key not in gridded:
            del mapping[key]


def _grid_key_of(problem_key: str, keys: list[str]) -> str | None:
    for k in keys:
        if problem_key == k or problem_key.startswith(k + ".") or problem_key.startswith(k + "[") \
                or k.startswith(problem_key + ".") or k.startswith(problem_key + "["):
            return k
    return None


def _read_files(path: str, p: Problems) -> tuple[SweepFile, str, dict]:
    """The sweep file's keys, the base scenario's path and its raw mapping."""
    doc = read_doc(path, "sweep file")
    raw, p.lines = doc.data, doc.lines
    if not isinstance(raw, dict):
        raise ScenarioError.one(path, "", raw, "a sweep must be a mapping with base: and grid:")
    add_duplicates(p, doc)      # raised with the grid's problems (YAML keeps the last one)
    sf = build(SweepFile, raw, p)
    if is_fail(sf):
        p.raise_if_any()
    assert isinstance(sf, SweepFile)
    base_file = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), sf.base))
    if not os.path.isfile(base_file):
        raise ScenarioError.one(path, "base", sf.base, "base scenario file not found")
    base_raw = _read_once(base_file, "scenario file")
    if not isinstance(base_raw, dict):
        raise ScenarioError.one(base_file, "", base_raw, "a scenario must be a mapping of keys")
    return sf, base_file, base_raw


def _point_problems(exc: ScenarioError, f: str, path: str, base_file: str, keys: list[str],
                    values: tuple[tuple[str, Any], ...], name: str) -> list[Problem]:
    """A point's problems, named after the grid key that caused them (else the base file)."""
    vals = dict(values)
    out = []
    for pr in exc.problems:
        gk = _grid_key_of(pr.key, keys)
        if pr.file not in (f, ""):
            out.append(pr)                     # names its own file (a topology file)
        elif gk is not None:
            out.append(Problem(path, f"grid.{gk}", vals[gk],
                               f"{pr.message} (point {name}, scenario key "
                               f"{pr.key or '<top level>'})"))
        else:
            out.append(Problem(base_file, pr.key, pr.value, pr.message))
    return out


def _check_order(grid: Grid) -> list[int]:
    """Indices of the combos in the order they are validated: first one point per value of
    every key (the others at their first value; keys with fewer values first), so a bad value
    is met within the first sum(len(values)) points; then the rest, in grid order."""
    combos = grid.combos
    index = {c: i for i, c in enumerate(combos)}
    first: list[int] = []
    for j in sorted(range(len(grid.lists)), key=lambda j: len(grid.lists[j])):
        for i in range(len(grid.lists[j])):
            c = tuple(i if jj == j else 0 for jj in range(len(grid.lists)))
            if index[c] not in first:
                first.append(index[c])
    seen = set(first)
    return first + [i for i in range(len(combos)) if i not in seen]


def _grid_values(grid: Grid, path: list[str]) -> list:
    """The values the grid gives the key at `path` ([] when it does not sweep it)."""
    return [v for pth, vs in zip(grid.paths, grid.lists) if pth == path for v in vs]


def _points(path: str, base_file: str, base_raw: dict, grid: Grid, tmp: str
            ) -> tuple[list[Point], list[Problem], Any]:
    """Every point built and validated, stopping at the first bad point: (points in grid
    order, that point's problems (each naming its grid coordinates), the first point's
    scenario or None)."""
    found: dict[int, Point] = {}
    first = None
    combos = grid.combos
    names = point_names(grid.keys, grid.paths, grid.lists, combos)
    f = os.path.join(tmp, POINT_FILE)
    data_sets = _grid_values(grid, ["data", "name"])                # a sweep over data sets
    kinds = _grid_values(grid, ["data", "partition", "kind"])       # over partition kinds
    for i in _check_order(grid):
        name, values = names[i], grid.values(combos[i])
        try:
            text = yaml.safe_dump(point_raw(base_raw, base_file, values, grid.paths, data_sets,
                                            kinds), sort_keys=False, default_flow_style=None)
            with open(f, "w", encoding="utf-8") as fh:
                fh.write(text)
            sc = load(f, out=tmp)
            build_graph(sc.topology, sc.seed, f)
        except ScenarioError as exc:
            where = f"{name}: point {i + 1} of {len(combos)}, grid index {list(combos[i])}"
            return [], _point_problems(exc, f, path, base_file, grid.keys, values, where), None
        if i == 0:
            first = sc
        found[i] = Point(name, values, text, sc.train.executor.threads, algorithm_keys(sc))
    return [found[i] for i in range(len(combos))], [], first


def load_sweep(path: str, out: str | None = None) -> Sweep:
    """Read a sweep file, build every point's scenario and validate it (scenario schema and
    topology). Validation stops at the first bad point (each value is tried early) and
    reports its problems with the point's grid coordinates."""
    p = Problems(path)
    sf, base_file, base_raw = _read_files(path, p)
    where = out if out is not None else (os.path.join(os.path.dirname(os.path.abspath(path)),
                                                      sf.output) if sf.output else None)
    if where is not None and output_problem(where):
        raise ScenarioError.one("" if out is not None else path,
                                "--out" if out is not None else "output", where,
                                str(output_problem(where)))
    grid = read_grid(sf.grid, _self_contained(base_raw, base_file), path, p)
    with tempfile.TemporaryDirectory(prefix="hierfl-sweep-") as tmp:
        points, problems, first = _points(path, base_file, base_raw, grid, tmp)
    if problems:
        raise ScenarioError(problems)
    labels = tuple(e.label for e in first.algorithms) if first else ()
    target = sf.target
    if target is None and first is not None:
        target = first.report.target_accuracy
    output = out if out is not None else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(path)), sf.output or os.path.join(
            "reports", "sweeps", os.path.splitext(os.path.basename(path))[0])))
    return Sweep(path, tuple(grid.keys), tuple(points), output, target, labels, sf.point_reports,
                 sf.reuse)
