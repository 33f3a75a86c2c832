"""The bytes of a built-in algorithm's state (State.tensors: the model, the server's and every
client's tensors), known without torch, and the refusal of a state larger than
`train.max_state_gb`. `hierfl run` measures a state by initialising the algorithm for one and
two clients (run/world.py `state_bytes`); `hierfl validate` uses the counts below, which
tests/test_fixed_costs.py checks against that measurement for every built-in, so both refuse the
same scenarios with the same message."""
from __future__ import annotations

from typing import Any, Callable

from ..config.errors import Problem, ScenarioError
from ..config.limits import memory_limit

# name -> params -> (model-sized float32 tensors kept once, other bytes kept once,
#                    model-sized tensors per client, other bytes per client)
Counts = Callable[[Any], tuple[int, int, int, int]]


def _c(fixed: int, per_client: int = 0, fixed_b: int = 0, client_b: int = 0) -> Counts:
    return lambda p: (fixed, fixed_b, per_client, client_b)


STATE: dict[str, Counts] = {
    "fedavg": _c(1), "fedprox": _c(1), "hierfavg": _c(1),
    "fedadam": _c(3), "fedyogi": _c(3), "fedadagrad": _c(3),
    "scaffold": _c(2, 1), "feddyn": _c(2, 1), "feddc": _c(3, 2),
    "ditto": _c(1, 1), "pfedme": _c(1, 1), "pfedmac": _c(1, 1), "pfedmac_sh": _c(1, 1),
    "fedsplit": _c(1, 1), "proxskip": _c(1, 1), "feddr": _c(1, 2),
    "apfl": _c(1, 2, 0, 4),                         # + alpha (float32) per client
    "fedpd": _c(1, 2, 8, 8),                        # + a float64 counter, + last round each
    "ifca": lambda p: (1 + p.clusters, 4, 0, 4),    # k cluster models, rounds; cluster ids
}


def predicted_bytes(name: str, params: Any, n_clients: int, n_params: int) -> int | None:
    """Bytes of `name`'s state for n_clients x n_params (float32 models); None: not known
    without building the algorithm (a plugin's)."""
    counts = STATE.get(name)
    if counts is None:
        return None
    fixed, fixed_b, per_client, client_b = counts(params)
    return 4 * n_params * fixed + fixed_b + n_clients * (4 * n_params * per_client + client_b)


def state_problem(sc: Any, index: int, entry: Any, n_clients: int, n_params: int,
                  size: float | None) -> Problem | None:
    """The problem (naming the GB) when `size` bytes exceed train.max_state_gb (default: half
    of this machine's memory), else None."""
    limit_gb = sc.train.max_state_gb
    default = limit_gb is None
    if default:
        limit_gb = memory_limit() / 2 / 1e9
    gb = size / 1e9 if size is not None else 0.0
    if gb <= limit_gb:
        return None
    budget = (f"half of this machine's {2 * limit_gb:.3g} GB of memory (train."
              f"max_state_gb not set)" if default else f"train.max_state_gb = {limit_gb:g}")
    return Problem(sc.file, f"algorithms[{index}].name", entry.name,
                   f"its state (the model, server and per-client tensors) for {n_clients} "
                   f"clients x {n_params} parameters needs {gb:.3g} GB, more than {budget}: "
                   "fewer clients, a smaller model, or a larger train.max_state_gb")


def check_states(sc: Any, n_clients: int, n_params: int,
                 size_of: Callable[[Any], float | None]) -> None:
    """ScenarioError (exit 2) naming every algorithm whose state (`size_of(entry)` bytes) is
    over the budget."""
    probs = [state_problem(sc, i, e, n_clients, n_params, size_of(e))
             for i, e in enumerate(sc.algorithms)]
    if any(probs):
        raise ScenarioError([p for p in probs if p is not None])


def guard_predicted_state(sc: Any, n_clients: int, n_params: int) -> None:
    """`hierfl validate`'s state guard: every algorithm's predicted state (no torch)."""
    check_states(sc, n_clients, n_params,
                 lambda e: predicted_bytes(e.name, e.params, n_clients, n_params))
