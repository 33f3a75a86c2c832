"""The grid of a sweep: dotted key paths into a scenario ('algorithms[1].mu'), setting a value
at a path, the grid's keys and values checked against the base scenario, and point names
('mu=0.01,fraction=0.5,seed=0')."""
from __future__ import annotations

import copy
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from ..config.errors import Problems, ScenarioError

MAX_POINTS = 10_000
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def parse_path(key: str) -> list[str | int] | None:
    """'algorithms[1].mu' -> ['algorithms', 1, 'mu']; None if malformed."""
    out: list[str | int] = []
    for part in key.split("."):
        m = _TOKEN.match(part)
        if not m:
            return None
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def _show(path: list[str | int]) -> str:
    s = ""
    for t in path:
        s += f"[{t}]" if isinstance(t, int) else (f".{t}" if s else t)
    return s


def set_path(raw: dict, path: list[str | int], value: Any) -> str | None:
    """Set raw[path] = value in place. Missing mapping keys are created (their values are then
    checked by the scenario schema); lists must already hold the index. Returns a problem or
    None."""
    node: Any = raw
    for i, tok in enumerate(path):
        last = i == len(path) - 1
        here = _show(path[:i]) or "<top level>"
        if isinstance(tok, int):
            if not isinstance(node, list):
                return f"{here} is not a list in the base scenario"
            if tok >= len(node):
                return f"{here} has {len(node)} item(s) in the base scenario; no index {tok}"
            if last:
                node[tok] = copy.deepcopy(value)
                return None
            node = node[tok]
            continue
        if not isinstance(node, dict):
            return f"{here} is not a mapping in the base scenario"
        if last:
            node[tok] = copy.deepcopy(value)
            return None
        if tok not in node or node[tok] is None:
            if isinstance(path[i + 1], int):
                return f"{_show(path[:i + 1])} is not in the base scenario (cannot index it)"
            node[tok] = {}
        node = node[tok]
    return None


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return re.sub(r"[^A-Za-z0-9._-]", "-", v)[:40] or "empty"
    if v is None:
        return "null"
    return None


def point_names(keys: list[str], paths: list[list[str | int]], lists: list[list[Any]],
                combos: list[tuple[int, ...]]) -> list[str]:
    """`mu=0.01,fraction=0.5,seed=0`: the last name of each key (the whole path where two keys
    share it), each value as written (or v<index> for mappings and lists, or where two values
    would read the same)."""
    shorts = [str([t for t in p if isinstance(t, str)][-1]) for p in paths]
    shorts = [s if shorts.count(s) == 1 else re.sub(r"[\[\]]", "", k).replace(".", "-")
              for s, k in zip(shorts, keys)]
    shown = []
    for vals in lists:
        txt = [_scalar(v) for v in vals]
        if any(t is None for t in txt) or len(set(txt)) != len(txt):
            txt = [f"v{i}" for i in range(len(vals))]
        shown.append(txt)
    names = []
    for combo in combos:
        name = ",".join(f"{s}={shown[j][i]}" for j, (s, i) in enumerate(zip(shorts, combo)))
        if len(name) > 200:
            name = "p" + "-".join(str(i) for i in combo)
        names.append(name)
    return names


@dataclass(frozen=True)
class Grid:
    """The checked grid: keys as written, their parsed paths, their values (in file order)."""

    keys: list[str]
    paths: list[list[str | int]]
    lists: list[list[Any]]

    @property
    def combos(self) -> list[tuple[int, ...]]:
        """Every point as one value index per key (the last key varies fastest)."""
        return list(itertools.product(*[range(len(v)) for v in self.lists]))

    def values(self, combo: tuple[int, ...]) -> tuple[tuple[str, Any], ...]:
        return tuple((k, self.lists[j][i]) for j, (k, i) in enumerate(zip(self.keys, combo)))


def _key_problem(parsed: list[str | int] | None, vals: Any, base: dict) -> tuple[Any, str] | None:
    """What is wrong with one grid entry (the value to show, the message), or None."""
    if not isinstance(vals, list):
        return vals, "expected a list of values"
    if parsed is None:
        return vals, "not a key path (names separated by '.', list indices as [i])"
    if parsed[0] == "output":
        return vals, "the sweep chooses each point's output folder"
    if not vals:
        return vals, "give at least one value"
    same = [(type(v) is bool, v) for v in vals]    # true is not 1 (a type error, checked later)
    dup = [v for i, v in enumerate(vals) if same[i] in same[:i]]
    if dup:
        return dup[0], "value listed twice (two points would be the same run)"
    msg = set_path(copy.deepcopy(base), parsed, vals[0])
    return (vals, msg) if msg else None


def read_grid(grid: Any, base: dict, file: str, p: Problems) -> Grid:
    """The grid: mapping of key paths to lists of values, each key checked against the base
    scenario (problems collected in p, raised together); at most MAX_POINTS points."""
    if not isinstance(grid, dict) or not grid:
        raise ScenarioError.one(file, "grid", grid,
                                "expected a mapping of key paths to lists of values")
    out = Grid([], [], [])
    for key, vals in grid.items():
        parsed = parse_path(str(key))
        bad = _key_problem(parsed, vals, base)
        if bad is not None:
            p.add(f"grid.{key}", *bad)
            continue
        assert parsed is not None
        out.keys.append(str(key))
        out.paths.append(parsed)
        out.lists.append(vals)
    p.raise_if_any()
    n = math.prod(len(v) for v in out.lists)
    if n > MAX_POINTS:
        raise ScenarioError.one(file, "grid", f"{n} points",
                                f"more than {MAX_POINTS} points (resource guard)")
    return out
