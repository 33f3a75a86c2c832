"""The engine's workers (hierfl/sim/tasks.py) against simpy's processes: the same order of
everything that happens, ties included, with the start and end events they leave out."""
from __future__ import annotations

import pytest
import simpy

from hierfl.sim import tasks


class Counter:
    def __init__(self, env):
        self.env, self.inflight = env, 0


def _world(spawn, timeout=simpy.Environment.timeout, run=simpy.Environment.run):
    """A parent spawning children in a row at 0 and at 1 (one of them spawning its own child
    at once), beside a bystander process: every step ties with another at the same instant.
    `spawn(env, gens)` starts the children, `timeout(env, d)` makes the children's waits,
    `run(env)` runs it all; returns the log of (time, who, what)."""
    env = simpy.Environment()
    log = []

    def child(name, delays, sub=None):
        log.append((env.now, name, "start"))
        if sub is not None:
            spawn(env, [child(sub, (0.5,))])
        for d in delays:
            yield timeout(env, d)
            log.append((env.now, name, f"after {d}"))
        return name

    def bystander():
        for d in (0.0, 0.5, 0.5, 0.0, 1.0):
            log.append((env.now, "bystander", "tick"))
            yield env.timeout(d)

    def parent():
        log.append((env.now, "parent", "spawn"))
        spawn(env, [child("a", (0.5, 0.5)), child("b", (0.0, 1.0), sub="b1"),
                    child("c", (1.0,))])
        yield env.timeout(1.0)
        log.append((env.now, "parent", "spawn"))
        spawn(env, [child("d", (0.0, 0.5)), child("e", (0.5,))])
        yield env.timeout(0.0)
        log.append((env.now, "parent", "done"))

    env.process(bystander())
    env.process(parent())
    run(env)
    return log


def _processes(env, gens):
    for g in gens:
        env.process(g)


def test_workers_run_in_the_order_of_simpy_processes():
    counters = {}

    def workers(env, gens):
        c = counters.setdefault(id(env), Counter(env))
        tasks.start(c, gens)

    want = _world(_processes)
    got = _world(workers)
    assert got == want
    assert len(got) > 20 and [c.inflight for c in counters.values()] == [0]


def test_after_and_drain_keep_the_order_of_timeouts_and_run():
    """tasks.after queues a timeout as Timeout does (time, priority, creation number) and
    tasks.drain processes the queue as env.run() does: the same log, ties included."""
    counters = {}

    def workers(env, gens):
        tasks.start(counters.setdefault(id(env), Counter(env)), gens)

    want = _world(_processes)
    assert _world(workers, tasks.after, tasks.drain) == want
    assert _world(_processes, tasks.after) == want
    assert [c.inflight for c in counters.values()] == [0]


def test_drain_raises_a_failure_nobody_handled_and_leaves_the_clock_there():
    def world(run):
        env = simpy.Environment()
        bad = env.event()
        env.timeout(1.5).callbacks.append(lambda _: bad.fail(KeyError("nobody")))
        env.timeout(3.0)                       # never reached: the run stops at the failure
        with pytest.raises(KeyError) as err:
            run(env)
        return env.now, type(err.value.__cause__), len(env._queue)

    assert world(tasks.drain) == world(simpy.Environment.run) == (1.5, KeyError, 1)


def test_the_count_of_workers_alive():
    env = simpy.Environment()
    c = Counter(env)

    def w(d):
        yield env.timeout(d)

    tasks.start(c, [w(1.0), w(2.0), w(3.0)])
    assert c.inflight == 3
    env.run(until=1.5)
    assert c.inflight == 2
    env.run(until=2.5)
    assert c.inflight == 1
    env.run()
    assert c.inflight == 0 and env.now == 3.0


def test_a_processed_event_resumes_at_once_with_its_value():
    env = simpy.Environment()
    c = Counter(env)
    done = env.event()
    done.succeed("v")
    seen = []

    def late():
        yield env.timeout(1.0)          # `done` was processed at 0
        seen.append((env.now, (yield done)))

    tasks.start(c, [late()])
    env.run()
    assert seen == [(1.0, "v")] and c.inflight == 0


def test_an_error_in_a_worker_stops_the_run():
    env = simpy.Environment()
    c = Counter(env)

    def bad():
        yield env.timeout(1.0)
        raise ValueError("broken worker")

    tasks.start(c, [bad()])
    with pytest.raises(ValueError, match="broken worker"):
        env.run()
    assert c.inflight == 0 and env.now == 1.0


def test_a_failed_event_is_raised_inside_the_worker():
    env = simpy.Environment()
    c = Counter(env)
    ev = env.event()
    caught = []

    def waits():
        try:
            yield ev
        except RuntimeError as e:
            caught.append(str(e))

    tasks.start(c, [waits()])
    env.timeout(2.0).callbacks.append(lambda _: ev.fail(RuntimeError("lost")))
    env.run()
    assert caught == ["lost"] and c.inflight == 0
