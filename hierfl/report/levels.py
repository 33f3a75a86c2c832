"""Bytes per link level in the report: on a tree deeper than client -> edge -> cloud, the table's
two byte columns (client-edge, edge-cloud: the edge-cloud one a sum over every level above the
edges) become one column per level, and the two per-tier figures become per-level ones. On a
two-level tree the levels are the legacy tiers and nothing changes."""
from __future__ import annotations

import os
from typing import Callable

from ..outputs import Run
from .model import Figure, Section
from .plots import background
from .plots.levels import level_accuracy_figure, level_bytes_figure, pretty
from .stats import Group
from .tables import pm, size

LEGACY = ["client_edge", "edge_cloud"]
TIER_FIGURES = {"accuracy_vs_bytes_tier.png": "accuracy_vs_bytes_level.png",
                "bytes_per_tier.png": "bytes_per_level.png"}


def levels_of(runs: list[Run]) -> list[str]:
    """The link levels, bottom up, of the runs' topologies (summary.json; else the levels
    found in metrics.csv's columns), in order of first appearance."""
    out: list[str] = []
    for r in runs:
        got = ((r.summary or {}).get("topology") or {}).get("levels")
        if not got:
            keys = [k[len("bytes_up_"):] for s in r.series[:1] for k in (s.rows[:1] or [{}])[0]
                    if k.startswith("bytes_up_") and k[len("bytes_up_"):] not in LEGACY]
            got = (["client_edge"] if keys and not keys[0].startswith("client_") else []) + keys
        out += [lv for lv in got or LEGACY if lv not in out]
    return out


def deeper(levels: list[str]) -> bool:
    return levels != LEGACY


def level_columns(head: list[str], rows: list[list[str]], owners: list[Group],
                  levels: list[str]) -> tuple[list[str], list[list[str]]]:
    """The table with its client-edge and edge-cloud byte columns replaced by one per level
    (both directions, last round; mean ± std over seeds); `owners`: each row's group (a
    personalised algorithm has two rows)."""
    if not deeper(levels) or "bytes edge-cloud" not in head or "bytes client-edge" not in head:
        return head, rows
    i, j = head.index("bytes client-edge"), head.index("bytes edge-cloud")
    new_head = [f"bytes {pretty(lv, '-')}" for lv in levels]

    def cells(g: Group) -> list[str]:
        return [pm([s.last(f"bytes_up_{lv}") + s.last(f"bytes_down_{lv}") for s in g.members],
                   size) for lv in levels]
    keep = [k for k in range(len(head)) if k not in (i, j)]
    at = min(i, j)

    def splice(row: list[str], new: list[str]) -> list[str]:
        kept = [row[k] for k in keep]
        return kept[:at] + new + kept[at:]
    return splice(head, new_head), [splice(r, cells(g)) for r, g in zip(rows, owners)]


def level_figures(sec: Section, groups: list[Group], colours: dict[str, str],
                  levels: list[str], p: Callable[[str], str], notes: list[str],
                  safe: Callable) -> None:
    """On a deeper tree, the per-tier figures of the curves section become per-level ones (in
    their place; the per-tier files are removed)."""
    if not deeper(levels):
        return
    draw = {"accuracy_vs_bytes_level.png": (
                lambda path: level_accuracy_figure(groups, colours, levels, path),
                "Test accuracy vs bytes per link level"),
            "bytes_per_level.png": (
                lambda path: level_bytes_figure(groups, colours, levels, path),
                "Bytes over the run, per link level and direction")}
    figures = []
    for f in sec.figures:
        name = TIER_FIGURES.get(os.path.basename(f.path))
        if name is None:
            figures.append(f)
            continue
        background.forget(f.path)        # its files may still be being written
        for old in (f.path, os.path.splitext(f.path)[0] + ".svg"):
            if os.path.isfile(old):
                os.unlink(old)
        fn, caption = draw[name]
        path = safe(notes, name[:-4].replace("_", " "), fn, p(name))
        if path:
            figures.append(Figure(path, caption))
    sec.figures = figures
