"""The report's notes on instability short of divergence: a training loss that rose for a
sustained stretch (outputs/stability.py states the rule; runs written before metrics.csv had
the `unstable` column are judged from their train_loss column by the same rule)."""
from __future__ import annotations

import math

from ..outputs import Series
from ..outputs.stability import RISE_FACTOR, RISE_ROUNDS, row_loss, unstable_flags, \
    unstable_stretches
from .stats import Group
from .tables import num


def _flags(s: Series) -> list[float]:
    if any("unstable" in r for r in s.rows):
        return [r.get("unstable", math.nan) for r in s.rows]
    return [float(f) for f in unstable_flags(row_loss(r) for r in s.rows)]


def series_note(s: Series, who: str) -> str | None:
    stretches = unstable_stretches(s.col("round"), _flags(s))
    if not stretches:
        return None
    last = int(s.rows[-1]["round"])
    where = ", ".join(f"rounds {a}–{b}" if b > a else f"round {a}" for a, b in stretches)
    if stretches[-1][1] == last:
        where += " (still at the end)"
    losses = [(r.get("train_loss", math.nan), int(r["round"])) for r in s.rows
              if math.isfinite(r.get("train_loss", math.nan))]
    low, at = min(losses)
    return (f"{who}: unstable: the training loss stayed above {RISE_FACTOR:g}× its lowest value "
            f"so far for {RISE_ROUNDS} or more rounds in a row ({where}); lowest "
            f"{num(low, '.4g')} at round {at}, last {num(losses[-1][0], '.4g')}. The run was "
            "not stopped.")


def instability_notes(groups: list[Group]) -> list[str]:
    return [n for g in groups for s in g.members
            if (n := series_note(s, s.label if g.n == 1 else f"{s.label} (seed {s.seed})"))]
