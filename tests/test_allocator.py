"""hierfl/allocator.py: with the thresholds set, a step that frees a few MB at the top of the
heap and allocates them again gets its pages back without faulting; with HIERFL_MALLOC=system
(glibc's own thresholds) the same step faults on every page. Each case in a fresh process (the
thresholds are process-wide)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = """
import resource
import numpy as np
from hierfl.allocator import keep_freed_memory
set_ = keep_freed_memory()
def step():   # three 2 MB blocks freed together: 6 MB free at the top of the heap
    a = np.ones(1 << 18); b = np.ones(1 << 18); c = np.ones(1 << 18); del a, b, c
for _ in range(3):
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(set_, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 20)
"""


def _probe(**env: str) -> tuple[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT, **env}).stdout.split()
    return out[0], float(out[1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt thresholds are glibc's")
def test_freed_memory_is_kept_without_page_faults():
    kept, faults = _probe(HIERFL_MALLOC="")
    system, faults_system = _probe(HIERFL_MALLOC="system")
    assert (kept, system) == ("True", "False")
    assert faults_system > 1000          # 6 MB of 4 KB pages handed back and faulted again
    assert faults < 20
