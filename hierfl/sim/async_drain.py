"""Quiescent points of an asynchronous run (`train.round.drain_every`), where a checkpoint can
capture it exactly. A mixin of sim.engine.Simulation (through AsyncRounds).

An asynchronous server always has senders at work, so it is never quiescent by itself. With
`drain_every: N`, after every N-th server version the server starts no job until every job in
flight has arrived (and been mixed in or buffered) and no message or computation is left; at
that instant the run's state is the algorithm's state, the clock, the ledger, the trace count,
and the server's bookkeeping (the job counter, FedBuff's buffer, the records waiting for the
next version): the recorder's `quiescent` hook writes the checkpoint there (or pauses), and
dispatching resumes. Draining changes the schedule, so it happens only when asked; without it
asynchronous runs write no checkpoint (`--resume` reruns them)."""
from __future__ import annotations

import dataclasses
import math

from .work import ClientRecord


class AsyncDrain:
    """Draining and restoring the asynchronous cloud (uses AsyncRounds' state `_a`)."""

    def _drained(self) -> None:
        """Nothing of the server's is in flight: wait until nothing at all is, then stop."""
        a = self._a
        if not a.quieting:
            a.quieting = True
            self.env.process(self._quiesce())

    def _quiesce(self):
        a = self._a
        while self.inflight > 0:            # a late client or relay still moving
            nxt = self.env.peek()
            if not math.isfinite(nxt):      # nothing scheduled: the count leaked, never wait
                raise RuntimeError(f"drain: {self.inflight} transfers in flight but no event "
                                   "scheduled")
            yield self.env.timeout(max(nxt - self.env.now, 0.0))
        a.quieting = a.draining = False
        hook = getattr(a.on_round, "quiescent", None)
        if hook is not None and not hook(a.version, self):
            self._async_end()               # paused: the checkpoint is written
            return
        self._dispatch()

    def async_state(self) -> tuple[dict, list]:
        """The server's bookkeeping at a quiescent point (plain values) and FedBuff's buffered
        (model, start) handles, for a checkpoint."""
        a = self._a
        meta = {"jobs": a.jobs, "reported": a.info.reported, "failed": a.info.failed,
                "clients": [dataclasses.asdict(r) for r in a.info.clients],
                "buffer": [[n, s] for (_x, n), _start, s in a.buffer], **a.fruitless.state()}
        return meta, [(x, start) for (x, _n), start, _s in a.buffer]

    def _async_restore(self) -> bool:
        """A resumed run: the bookkeeping its checkpoint held (False: a fresh run)."""
        saved = getattr(self, "async_resume", None)
        if saved is None:
            return False
        meta, handles = saved
        a = self._a
        a.jobs = int(meta["jobs"])
        a.info.reported, a.info.failed = int(meta["reported"]), int(meta["failed"])
        a.info.clients = [ClientRecord(**d) for d in meta["clients"]]
        a.buffer = [((x, n), start, s) for (x, start), (n, s) in zip(handles, meta["buffer"])]
        a.fruitless.restore(meta, self.env, self._dispatch)     # (sim/fruitless.py)
        self.round = a.version + 1
        return True
