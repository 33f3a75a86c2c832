"""Resource limits: input sizes the readers accept and the memory guard that refuses a scenario
this machine could not hold (an estimate made before anything is allocated)."""
from __future__ import annotations

import math
import os

from .errors import Problem, ScenarioError
from .schema import LocalSpec, ModelSpec, Scenario

MAX_BYTES = 10_000_000      # largest scenario / topology / graph file read
MAX_ALIASES = 200           # YAML aliases in one file
MAX_DEPTH = 64              # nesting depth of one YAML document
MAX_NODES = 1_000_000       # YAML nodes after alias expansion

# simulated-system bounds: beyond them simulated times become astronomically long or infinite
MAX_LATENCY_S = 1e6         # one-way link latency (11.6 days)
MIN_BANDWIDTH_BPS = 1.0     # bytes per second
MIN_FLOPS = 1.0             # device speed, FLOP/s
MAX_POWER_W = 1e5           # a device or radio power, W (a larger figure is likely in mW)

ROUND_COPIES = 6        # (C, P) tensors of one round (start, iterate, gradient, anchors, ...)
# (an algorithm's state between rounds, per client, is the state guard's: algorithms/state_size,
#  with train.max_state_gb; here the global model alone)
GRAPH_BYTES = 2_000     # networkx node + two link attribute dicts, per node


def memory_limit() -> int:
    """This machine's physical memory (64 GiB where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 64 << 30


BUILTIN_MODELS = ("logreg", "linear", "mlp")     # sized from the spec; others once built


def model_params(model: ModelSpec, dim: int, out_dim: int) -> int | None:
    """Parameters of a built-in model from its spec; None for the others (a CNN's count needs
    the input's shape: the guard sizes it from the built module, `guard_resources(n_params=)`)."""
    if model.name not in BUILTIN_MODELS:
        return None
    hidden = model.hidden if model.hidden is not None else [200, 200]
    bias = model.bias is not False
    widths = [dim, *hidden, out_dim] if model.name == "mlp" else [dim, out_dim]
    return sum(a * b + (b if bias else 0) for a, b in zip(widths[:-1], widths[1:]))


def resource_problems(model: ModelSpec, n_clients: int, n_nodes: int, clients_per_round: int,
                      rows_per_client: float, dim: int, out_dim: int,
                      locals_: list[LocalSpec], max_rows: float,
                      n_params: int | None = None) -> list[tuple[str, float, str]]:
    """(key, value, message) for a scenario that would not fit in this machine's memory: an
    estimate of clients x parameters (state), of one round's batches and of the data. The
    model's size: `n_params`, else from the spec (unknown before it is built: not counted)."""
    p = n_params if n_params is not None else (model_params(model, dim, out_dim) or 0)
    c = clients_per_round
    parts = {
        "model": 4.0 * p,
        "one round": 4.0 * p * c * ROUND_COPIES,
        "data": 4.0 * n_clients * rows_per_client * (dim + 1),
        "topology graph": float(GRAPH_BYTES) * (n_clients + n_nodes + 1),
    }
    plan, plan_key, plan_value = 0.0, "train.local", None
    hidden = model.hidden if model.hidden is not None else [200, 200]
    width = max(hidden) if model.name == "mlp" and hidden else 0
    for loc in locals_:
        b = max_rows if loc.batch_size == "full" else float(loc.batch_size)
        if loc.steps is not None:
            s = float(loc.steps)
        elif loc.batch_size == "full":
            s = 1.0
        else:
            s = (loc.epochs or 1) * math.ceil(max(rows_per_client, 1) / b)
        size = 12.0 * c * s * b + 8.0 * c * b * (width + dim + out_dim)
        if size > plan:
            plan = size
            plan_key, plan_value = (("train.local.batch_size", loc.batch_size) if b >= s else
                                    ("train.local.steps", loc.steps) if loc.steps is not None
                                    else ("train.local.epochs", loc.epochs))
    parts["minibatch plan"] = plan
    total, limit = sum(parts.values()), memory_limit()
    if total <= limit:
        return []
    worst = max(parts, key=lambda k: parts[k])
    detail = ", ".join(f"{k} {v / 2**30:.3g} GiB" for k, v in parts.items() if v >= 2**30 / 10)
    msg = (f"needs about {total / 2**30:.3g} GiB ({detail}; {n_clients} clients x {p} "
           f"parameters), more than this machine's {limit / 2**30:.3g} GiB (resource guard)")
    one_client = 4.0 * p * (1 + ROUND_COPIES) > limit      # the model itself is too large
    key, value = {"model": ("model", f"{p} parameters"),
                  "one round": ("model", f"{p} parameters") if one_client else
                  ("train.clients_per_round", c),
                  "data": ("data", f"{n_clients * rows_per_client:.3g} rows x {dim}"),
                  "topology graph": ("topology.clients.count", n_clients),
                  "minibatch plan": (plan_key, plan_value)
                  }[worst]
    return [(key, value, msg)]


def guard_resources(sc: Scenario, n_clients: int, n_nodes: int, dim: int, out_dim: int,
                    rows: int, n_params: int | None = None) -> None:
    """The resource guard once the data is built (npz sets are only sized then); `n_params`:
    the built model's size (needed for models that are not sized from their spec)."""
    cpr = sc.train.clients_per_round
    c = n_clients if cpr == "all" else min(int(cpr), n_clients)
    probs = resource_problems(sc.model, n_clients, n_nodes, c, rows / max(n_clients, 1), dim,
                              out_dim, [e.local for e in sc.algorithms] or [sc.train.local],
                              float(rows), n_params)
    if probs:
        raise ScenarioError([Problem(sc.file, k, v, m) for k, v, m in probs])
