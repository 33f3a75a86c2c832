"""The C allocator's thresholds for a training process (glibc only).

glibc serves a block above its mmap threshold (128 KB at start, raised on the fly up to 32 MB)
with fresh pages and returns freed memory at the top of its heap to the system once more than
twice that threshold is free. A training step frees and allocates blocks of 0.1-10 MB
(activations, gradients, the round's stacked parameters), so the system hands the same pages
back again and again: on the digits CNN batched over 20 clients, ~480 page faults a step, ~1.5
ms of a ~12 ms step, and an unsteady one (benchmarks/README.md, "Real workloads"). Keeping
blocks below 32 MB on the heap and trimming it only past 128 MB free removes them. What a run
computes does not change (tensors are allocated 64-byte aligned either way), only when memory
goes back to the system: up to 128 MB more may stay resident after a peak.

`HIERFL_MALLOC=system` leaves the allocator as it is."""
from __future__ import annotations

import ctypes
import functools
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20

@functools.cache
def keep_freed_memory() -> bool:
    """Set the thresholds (once per process: cached); whether they are set."""
    if os.environ.get("HIERFL_MALLOC", "") == "system" or platform.system() != "Linux" \
            or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False
