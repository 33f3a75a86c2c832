"""The refusal of an algorithm state larger than `train.max_state_gb`. `hierfl run` measures a
state by initialising the algorithm for one and two clients (run/world.py `state_bytes`);
`hierfl validate` uses each algorithm's declared StateSize (registry.py), which
tests/test_fixed_costs.py checks against that measurement for every built-in, so both refuse the
same scenarios with the same message."""
from __future__ import annotations

from typing import Any, Callable

from ..config.errors import Problem, ScenarioError
from ..config.limits import memory_limit
from .registry import predicted_bytes

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
                   f"its state (the model, server and per-client tensors, kept optimizer "
                   f"state) for {n_clients} "
                   f"clients x {n_params} parameters needs {gb:.3g} GB, more than {budget}: "
                   "fewer clients, a smaller model, or a larger train.max_state_gb")


def kept_optimizer_bytes(entry: Any, n_clients: int, n_params: int) -> int:
    """The client tables of train.local.optimizer.state: keep (exec/carry.py): per client a
    step count (8 bytes) and one float32 P-vector per momentum buffer / moment (sgd with
    momentum 1, adam / adamw 2, with amsgrad 3); 0 without keep."""
    opt = getattr(entry.local, "optimizer", None)
    if opt is None or opt.state != "keep" or opt.plain:
        return 0
    if opt.name == "sgd":
        vectors = 1 if opt.value("momentum") else 0
    else:
        vectors = 3 if opt.value("amsgrad") else 2
    return n_clients * ((8 if vectors else 0) + 4 * n_params * vectors)


def check_states(sc: Any, n_clients: int, n_params: int,
                 size_of: Callable[[Any], float | None]) -> None:
    """ScenarioError (exit 2) naming every algorithm whose state (`size_of(entry)` bytes, plus
    its kept optimizer state) is over the budget."""
    def total(e: Any) -> float | None:
        size = size_of(e)
        return None if size is None else size + kept_optimizer_bytes(e, n_clients, n_params)
    probs = [state_problem(sc, i, e, n_clients, n_params, total(e))
             for i, e in enumerate(sc.algorithms)]
    if any(probs):
        raise ScenarioError([p for p in probs if p is not None])


def guard_predicted_state(sc: Any, n_clients: int, n_params: int) -> None:
    """`hierfl validate`'s state guard: every algorithm's predicted state (no torch)."""
    check_states(sc, n_clients, n_params,
                 lambda e: predicted_bytes(e.name, e.params, n_clients, n_params))
