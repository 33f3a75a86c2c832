"""Guards on work and memory (issue 20): Markov availability keeps a bounded window of switch
times yet answers exactly as the full history would; the work estimate is refused before
running with the estimate in the message; output folders are confined."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hierfl import seeding
from hierfl.config.paths import figure_problem, output_problem
from hierfl.config.schema import LocalSpec
from hierfl.config.topology import AvailabilitySpec, FailureSpec
from hierfl.config.work import availability_problem, steps_per_round, work_problems
from hierfl.sim.failures import MARKOV_KEEP, Failures


def _reference_up(seed: int, k: int, on: float, off: float, now: float) -> bool:
    """The on/off state at `now` from the full history (the definition)."""
    g = seeding.rng(seed, "markov", k)
    start_on = bool(g.random() < on / (on + off))
    t, periods = 0.0, 0
    while True:
        on_now = start_on ^ (periods % 2 == 1)
        nxt = t + g.exponential(on if on_now else off)
        if nxt > now:
            return on_now
        t, periods = nxt, periods + 1


def test_markov_memory_is_bounded_and_exact():
    spec = SimpleNamespace(availability=AvailabilitySpec(kind="markov", mean_on_s=0.3,
                                                         mean_off_s=0.1),
                           failures=FailureSpec())
    f = Failures.from_spec(spec, seed=5)
    times = list(np.linspace(0.0, 2000.0, 97)) + [3.0, 1999.0, 0.0, 500.5, 1.0]  # and back
    for k in (0, 3):
        got = [f.client_up(k, t) for t in times]
        want = [_reference_up(5, k, 0.3, 0.1, t) for t in times]
        assert got == want
        assert len(f._switch[k]) <= MARKOV_KEEP      # ~10,000 switches drawn, few kept


def test_steps_per_round_counts_epochs_and_edge_rounds():
    assert steps_per_round(LocalSpec(steps=20), 100.0, 2) == (40.0, 10.0)
    # 2 epochs of ceil(95 / 10) = 10 batches, 3 edge rounds
    assert steps_per_round(LocalSpec(epochs=2), 95.0, 3) == (60.0, 10.0)
    assert steps_per_round(LocalSpec(batch_size="full"), 40.0, 1) == (1.0, 40.0)


def test_work_guard_estimates():
    ok, sim_s = work_problems(100, 10, [("a", LocalSpec(steps=20), 1)], 100.0, 610, 1e9)
    assert ok == []
    # 100 rounds x 20 steps x batch 10 x 6 x 610 parameters / 1e9 FLOP/s
    assert sim_s == pytest.approx(100 * 20 * 10 * 6 * 610 / 1e9)
    (p,), _ = work_problems(20, 10, [("algorithms[0]", LocalSpec(steps=10_000_000), 1)],
                            100.0, 610, 1e9)
    assert p[:2] == ("algorithms[0].local.steps", 10_000_000)
    assert "1e+07 local steps per client in one cloud round" in p[2] and "work guard" in p[2]
    # 1e5 rounds x 1000 clients x 2e5 steps = 2e13 client-steps
    (p,), _ = work_problems(100_000, 1000, [("a", LocalSpec(steps=200_000), 1)], 100.0, None,
                            1e9)
    assert "= 2e+13 client-steps, more than 1e+10" in p[2]
    # 1000 x 100 x 1000 = 1e8 client-steps x batch 10 x 6 x 1e8 parameters = 6e17 FLOPs
    (p,), _ = work_problems(1000, 100, [("a", LocalSpec(steps=1000), 1)], 100.0, 10**8, 1e9)
    assert "= 6e+17 FLOPs, more than 1e+17" in p[2]


def test_availability_guard():
    fast = AvailabilitySpec(kind="markov", mean_on_s=1e-9, mean_off_s=1e-9)
    msg = availability_problem(fast, 12, 0.5)
    # 12 clients x 0.5 s x 2 / 2e-9 s = 6e9 switches
    assert msg is not None and "= 6e+09 availability switches" in msg
    assert availability_problem(AvailabilitySpec(kind="markov"), 1000, 1e5) is None
    assert availability_problem(AvailabilitySpec(), 12, 1e9) is None


def test_output_folders(tmp_path):
    assert output_problem(str(tmp_path / "out")) is None
    assert output_problem(str(tmp_path / "a" / "b")) is None
    assert "empty" in output_problem("")
    assert "system folder" in output_problem("/etc/hierfl")
    assert "system folder" in output_problem("/proc/self/x")
    assert "system folder" in output_problem("/")
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert "exists and is not a folder" in output_problem(str(f))
    assert "is a file, so" in output_problem(str(f / "sub"))
    assert "ends in .png" in figure_problem(str(tmp_path / "x.txt"))
    assert "no such folder" in figure_problem(str(tmp_path / "nowhere" / "x.png"))
    assert figure_problem(str(tmp_path / "x.png")) is None


def test_sweep_stops_at_the_first_bad_point(tmp_path):
    """9,999 points, one bad value: reported at once with its grid coordinates (validating
    every point first took minutes)."""
    import time

    from hierfl.config.errors import ScenarioError
    from hierfl.sweep import load_sweep

    (tmp_path / "base.yaml").write_text(
        "name: b\ntopology: {edges: {count: 2}, clients: {count: 6}}\n"
        "data: {name: synthetic, dim: 5, classes: 3, samples: 20}\nmodel: {name: logreg}\n"
        "train: {rounds: 2, clients_per_round: 3, local: {steps: 2}}\n"
        "algorithms: [{name: fedavg}]\n")
    seeds = list(range(1111))
    (tmp_path / "sw.yaml").write_text(
        f"base: base.yaml\ngrid:\n  seed: {seeds}\n"
        "  train.local.lr: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, -1]\n")
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as exc:
        load_sweep(str(tmp_path / "sw.yaml"), out=str(tmp_path / "out"))
    assert time.perf_counter() - t0 < 30
    (p,) = exc.value.problems
    assert p.key == "grid.train.local.lr" and p.value == -1
    # the first point holding lr = -1: seed 0, lr index 8 -> point 9 of 9999
    assert "must be > 0" in p.message
    assert "seed=0,lr=-1: point 9 of 9999, grid index [0, 8]" in p.message
