"""Executors by name, and the one a scenario asks for (`train.executor`)."""
from __future__ import annotations

from ..config.schema import ExecutorSpec
from .local import BatchedExecutor, Executor, SequentialExecutor


def make_executor(kind: str, **kw) -> Executor:
    if kind == "sequential":
        return SequentialExecutor()
    if kind == "ray":
        from .ray_exec import RayExecutor
        return RayExecutor(**kw)
    return BatchedExecutor()


def executor_for(spec: ExecutorSpec) -> Executor:
    """The executor of `train.executor` (Ray's with its address and chunk size)."""
    if spec.kind == "ray":
        return make_executor(spec.kind, address=spec.address,
                             clients_per_task=spec.clients_per_task)
    return make_executor(spec.kind)
