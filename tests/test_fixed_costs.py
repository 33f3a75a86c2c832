"""Fixed costs (issue 19): the commands that do not train import no torch, the algorithm
registry's torch-free facts agree with the classes, the data loaders hand numpy arrays that
`load_data` wraps without a copy, and the report of a run costs the same for 30 or 200,000
clients."""
from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# runs `python -m hierfl ARGS` and prints whether torch was imported when the command ended
PROBE = """
import runpy, sys
sys.argv = ["hierfl", *sys.argv[1:]]
try:
    runpy.run_module("hierfl", run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\ntorch-imported:", "torch" in sys.modules, "exit:", code)
"""


def _probe(*args: str, cwd: str = ROOT) -> tuple[bool, str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    last = proc.stdout.strip().splitlines()[-1]
    assert last.endswith("exit: 0"), proc.stdout + proc.stderr
    return last.startswith("torch-imported: True"), proc.stdout


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A finished 2-round run of a small scenario (in this process)."""
    from conftest import make_scenario, run_outputs

    folder = tmp_path_factory.mktemp("run")
    path = make_scenario(folder, output=str(folder / "out"))
    run_outputs(path)
    from hierfl.report import write_report

    write_report(str(folder / "out"))
    return str(folder / "out")


@pytest.mark.parametrize("args", [
    ("--help",),
    ("validate", "scenarios/quickstart.yaml"),
    ("topology", "topologies/mobile_edge.yaml"),
    ("data", "fetch", "--help"),
])
def test_commands_that_do_not_train_import_no_torch(args):
    torch_imported, out = _probe(*args)
    assert not torch_imported, f"hierfl {' '.join(args)} imported torch:\n{out}"


def test_validate_prints_the_model_size_without_torch():
    torch_imported, out = _probe("validate", "scenarios/quickstart.yaml")
    # logreg on 60 features and 10 classes: 60 * 10 weights + 10 biases
    assert "model: logreg, 610 parameters" in out and not torch_imported


def test_report_and_compare_import_no_torch(small_run, tmp_path):
    assert not _probe("report", small_run)[0]
    assert not _probe("compare", small_run, small_run, "--out", str(tmp_path / "cmp"))[0]


# ------------------------------------------------------------------- the algorithm registry
def test_builtin_facts_agree_with_the_classes():
    """The loader reads Params and flags from BUILTIN without importing the algorithm: they
    must be the class's own, and every algorithm module of the package must be listed."""
    from hierfl.algorithms import base
    from hierfl.algorithms.registry import BUILTIN, REGISTRY

    found = {}
    pkg = importlib.import_module("hierfl.algorithms")
    for m in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"hierfl.algorithms.{m.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, base.Algorithm) and \
                    obj.__dict__.get("name") and obj.__module__ == module.__name__:
                found[obj.name] = obj
    assert sorted(found) == sorted(BUILTIN)
    for name, cls in found.items():
        info = REGISTRY.info(name)
        assert REGISTRY[name] is cls
        assert (info.Params, info.hierarchical, info.supports_gamma) == \
            (cls.Params, cls.hierarchical, cls.supports_gamma), name
        assert dataclasses.is_dataclass(info.Params)


def test_a_lookup_imports_only_what_it_names():
    code = ("import sys; from hierfl.algorithms.registry import REGISTRY; "
            "assert 'fedprox' in REGISTRY and 'nope' not in REGISTRY; "
            "REGISTRY.info('scaffold'); assert 'torch' not in sys.modules; "
            "assert REGISTRY['fedprox'].name == 'fedprox'; assert 'torch' in sys.modules; "
            "assert 'hierfl.algorithms.scaffold' not in sys.modules; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr


# ----------------------------------------------------------------------------- data arrays
def test_loaders_give_arrays_and_load_data_wraps_them_without_a_copy():
    import torch

    from hierfl.data.synthetic import generate
    from hierfl.config.schema import DataSpec

    d = generate(DataSpec(name="synthetic", dim=5, classes=3, samples=20), 4, 0)
    assert isinstance(d.x, np.ndarray) and isinstance(d.y_test, np.ndarray)
    t = d.as_tensors()
    assert isinstance(t.x, torch.Tensor) and t.x.dtype == torch.float32
    assert t.y.dtype == torch.int64 and t.out_dim == d.out_dim == 3
    assert t.x.data_ptr() == d.x.__array_interface__["data"][0]     # the same memory
    assert t.as_tensors() is t
