"""Instability of a run that has not diverged: the training loss of the global model rising for a
sustained stretch. metrics.csv's `unstable` column, and the report's note, follow one rule,
judged every round on metrics.csv's `round_loss` (the training loss of the global model: on
every training row where the round is evaluated, as `train_loss`, else on a fixed sample of
them, learn/evaluate.sample_loss), so a run evaluated every 5 rounds is flagged 3 rounds into a
rise, not 15:

    a round is *high* when its training loss exceeds RISE_FACTOR x the lowest training loss of
    every round so far (round 0 included) by more than MIN_RISE; the run is unstable from the
    RISE_ROUNDS-th consecutive high round on, until a round that is not high. A round without
    a loss (a file written before round_loss: only evaluated rounds have one) keeps the flag.

With eval_every: 1 every round_loss is the evaluation's train_loss: the flags are those of the
rule judged on evaluations only, as before.

The run is not stopped (divergence, a non-finite value or a norm above the bound, still is)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

RISE_FACTOR = 2.0       # a loss above twice its running minimum ...
RISE_ROUNDS = 3         # ... in this many rounds in a row
MIN_RISE = 1e-3         # and above it by more than this (losses near zero are not flagged)


@dataclass
class Stability:
    """The rule, one metrics row at a time."""

    low: float = math.inf       # lowest training loss so far
    high_run: int = 0           # consecutive high rounds up to now
    flag: int = 0

    def update(self, loss: float) -> int:
        """The `unstable` value of a row whose training loss is `loss` (nan: none)."""
        if not math.isfinite(loss):
            return self.flag
        self.low = min(self.low, loss)
        high = loss > RISE_FACTOR * self.low and loss - self.low > MIN_RISE
        self.high_run = self.high_run + 1 if high else 0
        self.flag = int(self.high_run >= RISE_ROUNDS)
        return self.flag

    @classmethod
    def replay(cls, losses: Iterable[float]) -> "Stability":
        """The state after rows of these losses (a resumed run continues from its metrics.csv:
        see row_loss)."""
        s = cls()
        for v in losses:
            s.update(v)
        return s


def row_loss(row: dict) -> float:
    """A metrics row's loss for the rule: round_loss, else (a file written before it)
    train_loss."""
    v = row.get("round_loss", math.nan)
    return v if isinstance(v, float) and math.isfinite(v) else row.get("train_loss", math.nan)


def unstable_flags(losses: Iterable[float]) -> list[int]:
    """The `unstable` column of rows with these training losses."""
    s = Stability()
    return [s.update(v) for v in losses]


def unstable_stretches(rounds: list[float], flags: list[float]) -> list[tuple[int, int]]:
    """(first, last) round of every stretch flagged unstable."""
    out: list[tuple[int, int]] = []
    start = None
    for t, f in zip(rounds, flags):
        if f == 1 and start is None:
            start = int(t)
        elif f != 1 and start is not None:
            out.append((start, prev))
            start = None
        prev = int(t)
    if start is not None:
        out.append((start, prev))
    return out
