"""The command line's side of the TensorBoard writer (tensorboard.py): the log folder checked
up front (exit 2 naming --tensorboard), and where to look afterwards."""
from __future__ import annotations

import importlib.util
import sys

from ..config.errors import ScenarioError
from ..config.paths import output_problem
from .tensorboard import write_tensorboard

EXTRA = "pip install 'hierfl[tb]'"


def check_logdir(logdir: str) -> None:
    """A folder that exists or can be created (as for --out); else exit 2."""
    why = output_problem(logdir, "TensorBoard folder")
    if why:
        raise ScenarioError.one("", "--tensorboard", logdir, why)


def tensorboard_done(logdir: str) -> None:
    """Say where the logs are and how to view them (TensorBoard itself is the tb extra; writing
    needs nothing)."""
    have = importlib.util.find_spec("tensorboard") is not None
    print(f"tensorboard: {logdir} (view: tensorboard --logdir {logdir}"
          + ("" if have else f"; TensorBoard is not installed: {EXTRA}") + ")",
          file=sys.stderr if not have else sys.stdout)


__all__ = ["check_logdir", "tensorboard_done", "write_tensorboard", "EXTRA"]
