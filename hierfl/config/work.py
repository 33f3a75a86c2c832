"""The guard on work: an estimate, made before anything runs, of how much computing a scenario
asks for, refused when it is absurd (no shipped scenario or test comes within a factor of 100
of a threshold). Memory is guarded separately (`limits.resource_problems`).

- local steps of one client in one cloud round (steps x edge rounds; epochs x batches):
  at most MAX_ROUND_STEPS;
- client-steps of the whole run (rounds x clients per round x steps per round): at most
  MAX_CLIENT_STEPS;
- FLOPs of the whole run (client-steps x batch x 3 x forward FLOPs of one sample, 2 per
  parameter of a built-in model): at most MAX_WORK_FLOPS;
- Markov availability switches (clients x simulated seconds x 2 / (mean_on_s + mean_off_s),
  the simulated time estimated from the compute and latency of the run): at most
  MAX_AVAILABILITY_EVENTS."""
from __future__ import annotations

import math
from typing import Any

MAX_ROUND_STEPS = 1e6           # one client, one cloud round
MAX_CLIENT_STEPS = 1e10         # the whole run
MAX_WORK_FLOPS = 1e17           # the whole run (about 11 days at 100 GFLOP/s)
MAX_AVAILABILITY_EVENTS = 1e8   # Markov on/off switches drawn over the run
MAX_TRANSFER_HANDOVERS = 1e5    # handovers one resumed transfer meets (sim/mobility.py)


def steps_per_round(local: Any, rows_per_client: float, schedule: int) -> tuple[float, float]:
    """(local steps of one client per cloud round, batch size) of a LocalSpec."""
    b = max(rows_per_client, 1.0) if local.batch_size == "full" else float(local.batch_size)
    if local.steps is not None:
        s = float(local.steps)
    elif local.batch_size == "full":
        s = float(local.epochs or 1)
    else:
        s = (local.epochs or 1) * math.ceil(max(rows_per_client, 1.0) / b)
    return s * schedule, min(b, max(rows_per_client, 1.0))


def _key(local: Any, label: str) -> tuple[str, Any]:
    return (f"{label}.local.steps", local.steps) if local.steps is not None else \
        (f"{label}.local.epochs", local.epochs)


def work_problems(rounds: int, clients_per_round: int, runs: list[tuple[str, Any, int]],
                  rows_per_client: float, n_params: int | None,
                  client_flops: float) -> tuple[list[tuple[str, Any, str]], float]:
    """(key, value, message) for each absurd estimate, and the simulated compute seconds of
    the run (for the availability guard). `runs`: (label, LocalSpec, edge rounds per cloud
    round) per algorithm; `n_params`: the model's size where known before building it."""
    out: list[tuple[str, Any, str]] = []
    sim_s = 0.0
    for label, local, schedule in runs:
        s, b = steps_per_round(local, rows_per_client, schedule)
        key, value = _key(local, label)
        total = rounds * clients_per_round * s
        flops = total * b * 3 * 2 * (n_params or 0)
        if n_params:
            sim_s = max(sim_s, rounds * s * b * 6 * n_params / max(client_flops, 1.0))
        what = (f"{rounds} rounds x {clients_per_round} clients x {s:.3g} steps per round"
                f"{f' (x{schedule} edge rounds)' if schedule > 1 else ''}")
        if s > MAX_ROUND_STEPS:
            out.append((key, value, f"{s:.3g} local steps per client in one cloud round, more "
                        f"than {MAX_ROUND_STEPS:g} (work guard)"))
        elif total > MAX_CLIENT_STEPS:
            out.append((key, value, f"{what} = {total:.3g} client-steps, more than "
                        f"{MAX_CLIENT_STEPS:g} (work guard)"))
        elif flops > MAX_WORK_FLOPS:
            out.append((key, value, f"{what} x batch {b:g} x 6 x {n_params} parameters = "
                        f"{flops:.3g} FLOPs, more than {MAX_WORK_FLOPS:g} (work guard)"))
    return out, sim_s


def availability_problem(avail: Any, n_clients: int, sim_s: float) -> str | None:
    """Why Markov availability would draw too many on/off switches over the run, or None."""
    if getattr(avail, "kind", "always") != "markov":
        return None
    cycle = float(avail.mean_on_s) + float(avail.mean_off_s)
    events = n_clients * 2.0 * sim_s / cycle
    if events <= MAX_AVAILABILITY_EVENTS:
        return None
    return (f"{n_clients} clients x about {sim_s:.3g} simulated s x 2 / {cycle:.3g} s per "
            f"on/off cycle = {events:.3g} availability switches, more than "
            f"{MAX_AVAILABILITY_EVENTS:g} (work guard): use longer periods")
