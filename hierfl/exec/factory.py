"""Executors by name, and the one a scenario asks for (`train.executor`)."""
from __future__ import annotations

from ..config.schema import ExecutorSpec
from .device import resolve
from .local import BatchedExecutor, Executor, SequentialExecutor


def make_executor(kind: str, **kw) -> Executor:
    """`device` applies to the batched executor; the sequential reference and Ray's workers
    run on the CPU."""
    device = kw.pop("device", "cpu")
    if kind == "sequential":
        return SequentialExecutor()
    if kind == "ray":
        from .ray_exec import RayExecutor    # ray (~0.4 s): only a Ray executor imports it
        return RayExecutor(**kw)
    return BatchedExecutor(device)


def executor_for(spec: ExecutorSpec, file: str = "") -> Executor:
    """The executor of `train.executor` (Ray's with its address and chunk size; the batched
    one on its resolved `device`)."""
    if spec.kind == "ray":
        return make_executor(spec.kind, address=spec.address,
                             clients_per_task=spec.clients_per_task)
    return make_executor(spec.kind, device=resolve(spec.device, file))
