"""The engine's workers (a client's download, compute and upload; a relay's forwarding): each a
generator driven by simpy events, as `simpy.Process` drives one, without the Process's events.

Workers start as simpy starts processes, at an URGENT event of the current instant, so they run
in the order simpy would run them: after their creator, before anything else then pending. The
workers one creator spawns in a row (nothing scheduled between them) share one start event:
their processes' start events would have had consecutive creation numbers, so nothing could run
between them, and one event calling each in turn runs them in that order.

Nobody waits for a worker to end, so it has no end event: simpy schedules one for every process
(one heap push and one step each, doing nothing), and `_tracked` ran every resume through one
more generator frame to count the workers alive; here the driver counts them. Events that
nothing waits for leave the order of all others as it was: simpy orders events by (time,
priority, creation number), and only the relative order of the numbers counts.

An exception in a worker propagates out of `env.run` (a simpy process's would, one step later,
from its end event), and it leaves the callbacks after it on the event that woke the worker
uncalled: siblings sharing a start event are then never started and stay counted. simpy would
run them; a run that raised is over here (nothing catches a worker's error and goes on), so
this is only a difference for code that would. A yielded non-event raises AttributeError, not
simpy's "Invalid yield value"."""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Generator, Iterable

from simpy.events import NORMAL, URGENT, Event, Timeout


class Worker:
    """One generator, resumed by the events it yields; `counter.inflight` counts it while alive."""

    __slots__ = ("gen", "counter")

    def __init__(self, counter, gen: Generator):
        self.gen, self.counter = gen, counter

    def resume(self, event: Event) -> None:
        gen = self.gen
        try:
            while True:
                if event._ok:
                    event = gen.send(event._value)
                else:                         # a failed event: raised inside the worker
                    event._defused = True
                    event = gen.throw(event._value)
                callbacks = event.callbacks
                if callbacks is not None:     # pending: resume when it is processed (a bound
                    callbacks.append(self.resume)   # method per event: no cycle is kept)
                    return
        except StopIteration:
            self.counter.inflight -= 1
        except BaseException:
            self.counter.inflight -= 1
            raise


def start(counter, gens: Iterable[Generator]) -> None:
    """Start workers now, in order, at one URGENT event (counted in `counter.inflight`)."""
    env = counter.env
    ev = Event(env)
    ev._ok, ev._value = True, None
    ev.callbacks = [Worker(counter, g).resume for g in gens]
    counter.inflight += len(ev.callbacks)
    env.schedule(ev, URGENT)


_new = object.__new__


def after(env, delay: float) -> Timeout:
    """`Timeout(env, delay)` (delay >= 0) in one frame: its fields set and the event queued
    as `Environment.schedule` queues it (the time now + delay, NORMAL, the next creation
    number); Timeout.__init__ and schedule are two Python frames per message and computation."""
    ev = _new(Timeout)
    ev.env, ev.callbacks, ev._value, ev._delay, ev._ok = env, [], None, delay, True
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), ev))
    return ev


def drain(env) -> None:
    """`env.run()` (no `until`): `Environment.step` until nothing is scheduled, its body
    inline (one Python frame per event less). The same order, callbacks and failures; the
    StopSimulation handling of step is for `until`, which this does not take."""
    queue = env._queue
    while queue:
        env._now, _, _, event = heappop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc
