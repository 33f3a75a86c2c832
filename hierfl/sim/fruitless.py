"""Jobs that end without an update, one after another (an asynchronous cloud's or edge's): every
job crashed, was lost to an outage or dropped, each freeing its slot for the next at once while
the clock barely moves. After `limit` of them in a row (1,000, or 10 per client) no job starts
until things may change (an outage ends, a client may come back: Failures.next_recovery); where
nothing will change, or after PAUSES such waits in a row, the caller ends (the run, the edge's
period) instead of starting such jobs for ever."""
from __future__ import annotations

from typing import Any, Callable

PAUSES = 10      # waits for things to change that may fail again before the end


class FruitlessJobs:
    """The count of jobs in a row without an update, and the wait it may have started."""

    def __init__(self, n_clients: int) -> None:
        self.limit = max(1000, 10 * n_clients)
        self.count = 0                      # jobs ended in a row without an update
        self.pauses = 0                     # waits since the last update
        self.resume_at: float | None = None  # no job starts before it

    @property
    def paused(self) -> bool:
        return self.resume_at is not None

    def updated(self) -> None:
        self.count = self.pauses = 0

    def failed(self, env: Any, failures: Any, resume: Callable[[], None]) -> str | None:
        """One more job without an update. None: go on (perhaps waiting: `resume` is called
        when the wait ends); else why the caller should end."""
        self.count += 1
        if self.count < self.limit:
            return None
        self.count, self.pauses = 0, self.pauses + 1
        nxt = failures.next_recovery(env.now)
        if nxt is None:
            return "nothing will change"
        if self.pauses > PAUSES:
            return "waiting did not help"
        self.wait_until(env, nxt, resume)
        return None

    def wait_until(self, env: Any, at: float, resume: Callable[[], None]) -> None:
        self.resume_at = at

        def go(_):
            self.resume_at = None
            resume()
        env.timeout(at - env.now).callbacks.append(go)

    def state(self) -> dict:
        """For a checkpoint (sim/async_drain.py)."""
        return {"fruitless": self.count, "pauses": self.pauses, "resume_at": self.resume_at}

    def restore(self, meta: dict, env: Any, resume: Callable[[], None]) -> None:
        self.count, self.pauses = int(meta.get("fruitless", 0)), int(meta.get("pauses", 0))
        at = meta.get("resume_at")
        if at is not None and at > env.now:
            self.wait_until(env, float(at), resume)
