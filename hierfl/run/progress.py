"""One progress line per algorithm on stderr."""
from __future__ import annotations

import math
import sys
import time


class Progress:
    """One line per algorithm on stderr: rounds done, simulated time, accuracy, ETA. A run
    capped by train.duration_s (`duration_s`) ends at whichever of the rounds and the duration
    comes first: its line shows the simulated time against the duration and the rounds as a
    bound, its ETA follows the cap nearer to its end, and its last line says it ended."""

    def __init__(self, label: str, rounds: int, enabled: bool, duration_s: float | None = None):
        self.label, self.rounds, self.enabled = label, rounds, enabled
        self.duration_s = duration_s
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()
        self.last_score: tuple[str, float, int] | None = None

    def score(self, now: int) -> str:
        """'acc 0.812' (regression: 'mse ...'): the last evaluated value, with '(round k)' when
        it was evaluated at an earlier round k (eval_every > 1); 'acc -' before any."""
        if self.last_score is None:
            return "acc -"
        name, v, t = self.last_score
        return f"{name} {v:.3f}" + (f" (round {t})" if t != now else "")

    def update(self, t: int, row: dict, final: bool = False) -> None:
        for key, name in (("test_acc", "acc"), ("test_mse", "mse")):
            v = row.get(key, math.nan)
            if v == v:                      # between evaluations: keep the last evaluated value
                self.last_score = (name, v, t)
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        el = now - self.t0
        if self.duration_s is None:
            eta = el / max(t, 1) * (self.rounds - t)
            msg = (f"[{self.label}] round {t}/{self.rounds}  sim {row['sim_time_s']:.1f}s  "
                   f"{self.score(t)}  elapsed {el:.0f}s  ETA {eta:.0f}s")
        else:
            msg = self._capped(t, row["sim_time_s"], el, final)
        end = "\n" if (final or not self.tty) else ""
        print(("\r" if self.tty else "") + msg, end=end, file=sys.stderr, flush=True)

    def _capped(self, t: int, sim: float, el: float, final: bool) -> str:
        """The line of a run capped by duration_s: 'round 42 (of at most 400)  sim 87.3s/100s
        ... ETA 3s', or '... ended' on its last line."""
        assert self.duration_s is not None
        done = max(t / max(self.rounds, 1), sim / self.duration_s if self.duration_s > 0 else 1)
        tail = "ended" if final else \
            f"ETA {el / done * (1 - min(done, 1.0)):.0f}s" if done > 0 else "ETA -"
        return (f"[{self.label}] round {t} (of at most {self.rounds})  sim {sim:.1f}s/"
                f"{self.duration_s:g}s  {self.score(t)}  elapsed {el:.0f}s  {tail}")
