"""One progress line per algorithm on stderr."""
from __future__ import annotations

import sys
import time


class Progress:
    """One line per algorithm on stderr: rounds done, simulated time, accuracy, ETA."""

    def __init__(self, label: str, rounds: int, enabled: bool):
        self.label, self.rounds, self.enabled = label, rounds, enabled
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def update(self, t: int, row: dict, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        el = now - self.t0
        eta = el / max(t, 1) * (self.rounds - t)
        acc = row.get("test_acc", float("nan"))
        msg = (f"[{self.label}] round {t}/{self.rounds}  sim {row['sim_time_s']:.1f}s  "
               f"acc {acc:.3f}  elapsed {el:.0f}s  ETA {eta:.0f}s")
        end = "\n" if (final or not self.tty) else ""
        print(("\r" if self.tty else "") + msg, end=end, file=sys.stderr, flush=True)
