"""One intra-op thread for the computations whose result must not depend on --threads.

torch's CPU kernels split work between threads at places that depend on the thread count, and
the split can change the last bits: a matrix product over many rows (BLAS uses another kernel
for a block's tail), a softmax along a strided dimension (vector or scalar exp per column).
Local training runs on small per-client batches and was measured identical for 1-3 threads;
the full-data passes (evaluation, the achieved-gamma gradients) were not. Those run on one
thread, so every --threads gives the numbers of --threads 1 (tests/test_threads.py)."""
from __future__ import annotations

from contextlib import ContextDecorator

import torch


class one_thread(ContextDecorator):
    """`with one_thread():` or `@one_thread()`: torch's intra-op threads set to 1 inside,
    restored after (nestable; cheap, ~0.2 us a switch)."""

    def __enter__(self) -> "one_thread":
        self._saved = torch.get_num_threads()
        if self._saved != 1:
            torch.set_num_threads(1)
        return self

    def __exit__(self, *exc) -> bool:
        if self._saved != 1:
            torch.set_num_threads(self._saved)
        return False
