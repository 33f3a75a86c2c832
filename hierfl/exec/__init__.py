"""The round runner (the only bridge between timing and learning) and the executors."""
from .factory import executor_for, make_executor
from .local import BatchedExecutor, Executor, SequentialExecutor
from .round import RoundRunner

__all__ = ["BatchedExecutor", "Executor", "RoundRunner", "SequentialExecutor", "executor_for",
           "make_executor"]
