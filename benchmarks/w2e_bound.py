"""How close W2E can come to its floor without changing a number (issue 19's "W2 training gap").

W2E (W2 evaluated only at round 0 and the last) in one process, on one thread, alternating
four measurements, each the best of --repeat:

- floor: `floor.run_floor`, with its training loop (`train_round`) and batch draws timed inside;
- hierfl: `run_algorithm` as `hierfl run` runs it, with `executor.run` timed inside;
- bound: the same run with the three largest bookkeeping parts made free: trace.csv (no event
  formatted or written), clients.csv (no row) and the run fingerprint. Everything else
  (closed-form timing, selection, batch plan, aggregation, energy, metrics.csv) still runs.

The bound is what any rewrite of those three parts could reach at best, however fast. If it is
above 1.0x, the goal "hierfl <= 1.0x the floor" cannot be met by bookkeeping work alone: the
rest is training (torch's kernels, whose results the shipped scenarios' fingerprints fix bit
for bit) and the simulator's other per-round work.

    python benchmarks/w2e_bound.py [--algo 0|1] [--rounds 100] [--repeat 5]

CPU seconds (time.process_time). Nothing is written to benchmarks/results."""
from __future__ import annotations

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from phases import timed, w2e_run  # noqa: E402


class Free:
    """trace.csv, clients.csv and the run fingerprint as no-ops while active."""

    def __init__(self):
        from hierfl.run import recorder, runner
        from hierfl.sim import trace
        self.saved = [(trace.Trace, "flush_to", trace.Trace.flush_to),
                      (recorder, "client_lines", recorder.client_lines),
                      (runner, "run_fingerprint", runner.run_fingerprint)]
        self.on = False

    def __enter__(self):
        from hierfl.run import recorder, runner
        from hierfl.sim import trace

        def no_trace(tr, fh):                  # the events dropped as a flush drops them
            tr._written += len(tr.events)
            tr.events.clear()
        trace.Trace.flush_to = no_trace
        recorder.client_lines = lambda *a, **k: ""
        runner.run_fingerprint = lambda *a, **k: "free"
        return self

    def __exit__(self, *exc):
        for owner, name, fn in self.saved:
            setattr(owner, name, fn)


def main() -> None:
    args, world_in = w2e_run(__doc__, 5)
    import floor
    import run as bench
    from hierfl.exec import local
    from hierfl.run import run_algorithm

    acc: dict[str, float] = {}
    timed(floor, "train_round", acc, "train")
    timed(floor, "draw_batches", acc, "draws")
    timed(local.BatchedExecutor, "run", acc, "executor")
    best: dict[str, dict[str, float]] = {}

    def keep(what: str, whole: float) -> None:
        row = dict(acc, whole=whole)
        if what not in best or whole < best[what]["whole"]:
            best[what] = row

    with tempfile.TemporaryDirectory() as tmp:
        sc, world, entry = world_in(tmp)
        fa = bench.floor_args(sc, entry, world)
        for i in range(args.repeat + 1):            # the first pass warms up, untimed
            for what in ("floor", "hierfl", "bound"):
                acc.clear()
                c = time.process_time()
                if what == "floor":
                    floor.run_floor(**fa)
                else:
                    folder = os.path.join(tmp, f"{what}{i}")
                    if what == "bound":
                        with Free():
                            run_algorithm(sc, entry, world, folder, progress=False,
                                          keep_trace=False)
                    else:
                        run_algorithm(sc, entry, world, folder, progress=False,
                                      keep_trace=False)
                if i:
                    keep(what, time.process_time() - c)
    f, h, b = best["floor"], best["hierfl"], best["bound"]
    print(f"W2E {entry.label}, {args.rounds} rounds, CPU s, best of {args.repeat} "
          f"(load {os.getloadavg()[0]:.2f}):")
    print(f"  floor   {f['whole']:.3f}  (training loop {f.get('train', 0):.3f}, "
          f"batch draws {f.get('draws', 0):.3f})")
    print(f"  hierfl  {h['whole']:.3f}  (executor.run {h.get('executor', 0):.3f})  "
          f"{h['whole'] / f['whole']:.2f}x the floor")
    print(f"  bound   {b['whole']:.3f}  (executor.run {b.get('executor', 0):.3f})  "
          f"{b['whole'] / f['whole']:.2f}x the floor: trace.csv, clients.csv and the "
          "fingerprint free")


if __name__ == "__main__":
    main()
