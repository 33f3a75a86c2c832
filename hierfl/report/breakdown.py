"""What the report adds for issue 17 (points 3, 5, 6), in one call once the other sections are
filled: bytes per link level (table columns and figures, levels.py), the breakdown by device
and link class (classes.py), and the notes on sustained rising training loss
(instability.py)."""
from __future__ import annotations

from typing import Any, Callable

from ..outputs import Run
from .classes import fill_classes
from .instability import instability_notes
from .levels import level_columns, level_figures, levels_of
from .model import Section
from .stats import Group


def add_breakdowns(sec: dict[str, Section], groups: list[Group], runs: list[Run],
                   colours: dict[str, str], p: Callable[[str], str], notes: list[str],
                   safe: Callable[..., Any]) -> None:
    levels = levels_of(runs)
    table = sec["table"]
    table.head, table.rows = level_columns(table.head, table.rows, table.owners, levels)
    level_figures(sec["curves"], groups, colours, levels, p, notes, safe)
    if "classes" in sec:
        fill_classes(sec["classes"], groups)
    notes += instability_notes(groups)
