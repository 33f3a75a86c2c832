"""The Ray executor: one round's client work split into chunks of `clients_per_task` clients,
each chunk solved by a Ray task with the batched solver, results concatenated in client order.

What travels: the training tensors x / y (which every BatchPlan references) are put in the Ray
object store once per (data set, Ray session) and passed by reference — numpy arrays, so a worker
on the same node reads them from shared memory without a copy. Per task and round only the
chunk's part of the round travels: its LocalProgram (start parameters and per-client terms), its
minibatch row indices and weights, its step budgets, and the full-data batch of its own clients
(needed for the gradient-norm checks).

Plugins: when plugin files are loaded (a model, an algorithm's terms defined in user code), a
chunk's arguments are put in the object store and passed by a reference nested in a list (Ray
does not resolve those) next to `plugins.bundle()`; the worker imports the plugins, then gets
the arguments (a plugin's class is serialised by reference to its module).

The simulator is unchanged: the result equals `BatchedExecutor`'s (each client's iterates do not
depend on which other clients share its chunk; only float summation order may differ).
Ray's workers run on the CPU: `train.executor.device` applies to the batched executor only."""
from __future__ import annotations

import os
import socket
import threading
import warnings
from collections import OrderedDict

import numpy as np
import torch

from ..allocator import keep_freed_memory
from ..learn.batches import Augment, Batch, BatchPlan
from ..learn.solver import LocalProgram, SolveResult, solve
from ..config.errors import ScenarioError
from ..plugins import bundle, ensure
from .local import concat_results

try:
    import ray
except ImportError:  # pragma: no cover - exercised only without the extra
    ray = None  # type: ignore[assignment]

INSTALL_HINT = "Ray is not installed: pip install 'hierfl[ray]'"


def require_ray(key: str = "train.executor.kind") -> None:
    if ray is None:
        raise ScenarioError.one("", key, "ray", INSTALL_HINT)


def connect(address: str = "local", num_cpus: int | None = None,
            key: str = "train.executor.address") -> None:
    """Join Ray once per process: reuse a running session; `local` starts a private one-node
    cluster (no dashboard); `auto` or `host:port` connect to an existing cluster."""
    require_ray()
    if ray.is_initialized():
        return
    if address not in ("local", "auto"):
        _reachable(address, key)
    try:
        if address == "local":         # a new instance, even beside a `ray start` cluster
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                     include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - Ray's own (AuthenticationError, ...): named
        raise ScenarioError.one("", key, address, f"cannot start or join Ray: "
                                f"{type(exc).__name__}: {exc}") from None


def _reachable(address: str, key: str, timeout_s: float = 10.0) -> None:
    """A host:port with nothing behind it: refused within `timeout_s` (ray.init kept retrying
    its GCS without end)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return                         # (ray://... and the like: Ray's own check)
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout_s).close()
    except OSError as exc:
        raise ScenarioError.one("", key, address, f"no Ray cluster answers there ({exc}); "
                                "start one with `ray start --head`, or give `local`") from None


def session() -> str:
    """An id of the current Ray session (object refs do not outlive it)."""
    return ray.get_runtime_context().get_job_id()


class _DataRefs:
    """Object-store references of the data tensors, one put per (tensor, session). The tensor
    itself is kept alongside its reference so that its id() cannot be reused while cached."""

    def __init__(self, size: int = 4):
        self.size = size
        self.items: OrderedDict[tuple[int, str], tuple[torch.Tensor, object]] = OrderedDict()
        self.puts = 0
        self.lock = threading.Lock()

    def ref(self, t: torch.Tensor) -> object:
        key = (id(t), session())
        with self.lock:
            hit = self.items.get(key)
            if hit is not None and hit[0] is t:
                self.items.move_to_end(key)
                return hit[1]
            r = ray.put(t.detach().contiguous().numpy())
            self.puts += 1
            self.items[key] = (t, r)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
            return r


DATA = _DataRefs()


def _as_tensor(a: np.ndarray) -> torch.Tensor:
    with warnings.catch_warnings():          # object-store arrays are read-only; we only index
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)


def solve_chunk(program: LocalProgram, rows: torch.Tensor, weights: torch.Tensor,
                x: np.ndarray, y: np.ndarray, full: Batch, budgets: torch.Tensor, lr: float,
                gamma: float | None, check_every: int, measure: bool = True,
                aug: Augment | None = None) -> SolveResult:
    """One chunk of clients, in a Ray worker: the batched solver, one torch thread (`aug`:
    the chunk's training augmentation, keyed per client as in one process)."""
    torch.set_num_threads(1)
    keep_freed_memory()
    plan = BatchPlan(rows, weights, _as_tensor(x), _as_tensor(y), aug)
    with torch.no_grad():
        return solve(program, plan, full, budgets, lr, gamma, check_every, measure)


def solve_chunk_plugins(plugins: tuple, args: list, x: np.ndarray, y: np.ndarray
                        ) -> SolveResult:
    """`solve_chunk` whose arguments reference plugin code: import the plugins, then fetch the
    arguments (`args`: [a reference to them], left unresolved by Ray)."""
    ensure(plugins)
    program, rows, weights, *rest = ray.get(args[0])
    return solve_chunk(program, rows, weights, x, y, *rest)


_REMOTE: dict[str, object] = {}


def _remote_solve(name: str = "solve"):
    if name not in _REMOTE:
        fn = solve_chunk if name == "solve" else solve_chunk_plugins
        # SPREAD: a round's chunks go to every node; the default policy packs these short
        # tasks onto the driver's node, leaving the rest of a cluster idle (seen with two
        # nodes in tests/test_ray_multinode.py). Where a chunk runs changes no number.
        _REMOTE[name] = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(fn)
    return _REMOTE[name]


class RayExecutor:
    """Executor protocol of exec/local.py, on Ray tasks of `clients_per_task` clients."""

    def __init__(self, address: str = "local", clients_per_task: int = 64,
                 num_cpus: int | None = None):
        if clients_per_task < 1:
            raise ValueError("clients_per_task must be >= 1")
        self.address = address
        self.clients_per_task = clients_per_task
        self.tasks = 0                      # Ray tasks submitted (for tests and benchmarks)
        connect(address, num_cpus)

    def chunks(self, c: int) -> list[torch.Tensor]:
        k = self.clients_per_task
        return [torch.arange(lo, min(lo + k, c)) for lo in range(0, c, k)]

    def run(self, program: LocalProgram, plan: BatchPlan, full: Batch, budgets: torch.Tensor,
            lr: float, gamma: float | None, check_every: int,
            measure: bool = True) -> SolveResult:
        c = budgets.shape[0]
        if c == 0:
            with torch.no_grad():
                return solve(program, plan, full, budgets, lr, gamma, check_every, measure)
        connect(self.address)
        x_ref, y_ref = DATA.ref(plan.x), DATA.ref(plan.y)
        plugins = bundle()
        task = _remote_solve("plugins" if plugins else "solve")
        futures = []
        for idx in self.chunks(c):
            part = plan.select(idx)
            rest = (full.rows(idx), budgets[idx], lr, gamma, check_every, measure, part.aug)
            if plugins:
                ref = ray.put((program.select(idx), part.rows, part.weights, *rest))
                futures.append(task.remote(plugins, [ref], x_ref, y_ref))
            else:
                futures.append(task.remote(program.select(idx), part.rows, part.weights,
                                           x_ref, y_ref, *rest))
        self.tasks += len(futures)
        try:
            return concat_results(ray.get(futures))
        except ScenarioError as exc:    # a user's code failing in a worker (a local training
            for f in futures:           # plugin's): its problems, without Ray's traceback;
                try:                    # every chunk's result fetched, so that Ray logs no
                    ray.get(f)          # failure of another chunk as unhandled
                except Exception:  # noqa: BLE001 - the first error is the one reported
                    pass
            raise ScenarioError(exc.problems) from None
