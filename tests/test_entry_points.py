"""Installed plugins: a distribution that declares `[project.entry-points."hierfl.plugins"]` is
seen by `validate`, `run`, `docs` and a sweep's workers with no `plugins:` line. The
distributions here are made by the test, with no network and no pip: a package folder and a
`*.dist-info` folder (METADATA, entry_points.txt) on PYTHONPATH is what importlib.metadata reads.

Each command runs in a fresh process (the entry points are read once per process)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import yaml

from conftest import make_scenario, outputs_of, scenario_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLUGIN = '''\
"""An installed plugin: FedAvg written again, and a linear model."""
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import hierfl
from hierfl.algorithms.base import Capabilities, stack_start
from hierfl.learn.solver import TermsProgram


@dataclass(frozen=True)
class CopyParams:
    pass


@hierfl.register_algorithm
class InstalledAvg(hierfl.Algorithm):
    """FedAvg, from an installed distribution."""
    name = "installed_avg"
    Params = CopyParams
    caps = Capabilities(linear_aggregate=True, drops_stragglers=True)

    def local(self, state, clients, start, ctx):
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))


class FlatLinear(nn.Module):
    """Its class pickles by reference to this installed module (a Ray worker imports it)."""

    def __init__(self, d, k):
        super().__init__()
        self.out = nn.Linear(d, k)

    def forward(self, x):
        return self.out(torch.flatten(x, 1))


@hierfl.register_model("installed_linear")
def installed_linear(input_shape, num_classes):
    """A linear layer on the flattened input."""
    return FlatLinear(int(np.prod(input_shape)), num_classes)
'''

TOPO = {"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.0e8}},
        "clients": {"count": 6, "compute_flops": 1.0e9,
                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2.0e6}}}
TRAIN = {"rounds": 3, "clients_per_round": 4, "local": {"steps": 4, "batch_size": 5, "lr": 0.1}}


def distribution(site, dist: str, module: str, source: str, entry: str | None = None) -> None:
    """An installed distribution `dist` 0.1 whose module `module` holds `source`, declaring the
    entry point `<dist> = <entry or module>` of the group hierfl.plugins."""
    pkg = site / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(source)
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[hierfl.plugins]\n{dist} = {entry or module}\n")


def hierfl(site, *args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), ROOT])}
    return subprocess.run([sys.executable, "-m", "hierfl", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def scenario(tmp_path, name: str, **overrides) -> str:
    doc = scenario_doc(name=name, seed=2, topology=TOPO, train=TRAIN,
                       data={"name": "synthetic", "dim": 5, "classes": 3, "samples": 30})
    return make_scenario(tmp_path, scenario_doc(doc, **overrides), name=name)


def test_an_installed_plugin_is_seen_by_validate_run_docs_and_a_sweep(tmp_path):
    site = tmp_path / "site"
    distribution(site, "hierfl_extra", "hierfl_extra", PLUGIN)
    f = scenario(tmp_path, "s", model={"name": "installed_linear", "init": "zeros"},
                 algorithms=[{"name": "fedavg"}, {"name": "installed_avg"}])
    assert "plugins" not in yaml.safe_load(open(f))

    proc = hierfl(site, "validate", f)
    assert proc.returncode == 0, proc.stderr
    assert "algorithm installed_avg: installed_avg CopyParams()" in proc.stdout
    assert "model: installed_linear, 18 parameters" in proc.stdout

    out = tmp_path / "out"
    proc = hierfl(site, "run", f, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    o = outputs_of(str(out), ["fedavg", "installed_avg"])
    for key, value in o.params["fedavg"].items():           # FedAvg again, bit for bit
        assert np.array_equal(value, o.params["installed_avg"][key])
    assert [r["train_loss"] for r in o.metrics["fedavg"]] == \
        [r["train_loss"] for r in o.metrics["installed_avg"]]

    page = tmp_path / "ref.md"
    proc = hierfl(site, "docs", "--path", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert "### installed_avg" in text and "FedAvg, from an installed distribution." in text
    assert "### model `installed_linear`" in text and "hierfl_extra" in text
    proc = hierfl(site, "docs", "--check")      # hierfl's own pages: built-ins, whatever is
    assert proc.returncode == 0, proc.stderr    # installed

    grid = tmp_path / "grid.yaml"          # a sweep's workers (processes of their own) too
    grid.write_text(yaml.safe_dump({"base": os.path.basename(f), "grid": {"seed": [2, 3]}}))
    proc = hierfl(site, "sweep", str(grid), "--out", str(tmp_path / "sw"), "--workers", "2",
                  "--quiet")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    found = sorted(dp for dp, _, fs in os.walk(tmp_path / "sw")
                   if "metrics.csv" in fs and dp.endswith("installed_avg"))
    assert len(found) == 2, found                   # one per seed
    for dp in found:
        assert len(open(os.path.join(dp, "metrics.csv")).readlines()) == 5   # header, 0..3


def test_a_broken_installed_plugin_is_named_and_stops_nothing_unrelated(tmp_path):
    site = tmp_path / "site"
    distribution(site, "broken_extra", "broken_extra", "import no_such_module_here\n")
    distribution(site, "hierfl_extra", "hierfl_extra", PLUGIN)

    builtin = scenario(tmp_path, "plain")                   # built-ins only: never imported
    proc = hierfl(site, "validate", builtin)
    assert proc.returncode == 0, proc.stderr

    mine = scenario(tmp_path, "mine", algorithms=[{"name": "installed_avg"}])
    proc = hierfl(site, "validate", mine)                   # the working one still loads
    assert proc.returncode == 0, proc.stderr

    typo = scenario(tmp_path, "typo", algorithms=[{"name": "instaled_avg"}])
    proc = hierfl(site, "validate", typo)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "did you mean 'installed_avg'?" in proc.stderr
    assert "distribution broken_extra 0.1" in proc.stderr
    assert "ModuleNotFoundError" in proc.stderr and "no_such_module_here" in proc.stderr

    proc = hierfl(site, "docs", "--path", str(tmp_path / "ref.md"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "distribution broken_extra 0.1" in proc.stderr


def test_an_entry_point_may_name_a_function_that_registers(tmp_path):
    """`name = "module:function"`: importing the module is what registers (pytest11's way);
    the attribute is only looked up."""
    site = tmp_path / "site"
    source = PLUGIN.replace("@hierfl.register_algorithm\n", "") + textwrap.dedent('''
        def setup():
            hierfl.register_algorithm(InstalledAvg)
        setup()
        ''')
    distribution(site, "hierfl_extra", "hierfl_extra", source, entry="hierfl_extra:setup")
    f = scenario(tmp_path, "s", algorithms=[{"name": "installed_avg"}])
    proc = hierfl(site, "validate", f)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.ray
def test_ray_workers_import_an_installed_plugin(tmp_path):
    """The ray executor on a one-node cluster the run starts: its workers unpickle the plugin's
    nn.Module class from the installed module; the result equals the batched executor's."""
    pytest.importorskip("ray")
    site = tmp_path / "site"
    distribution(site, "hierfl_extra", "hierfl_extra", PLUGIN)
    algs = [{"name": "installed_avg"}]
    model = {"name": "installed_linear"}
    runs = {"ray": scenario(tmp_path, "r", model=model, algorithms=algs, **{
        "train.executor": {"kind": "ray", "address": "local", "clients_per_task": 2}}),
        "batched": scenario(tmp_path, "b", model=model, algorithms=algs)}
    for name, f in runs.items():
        proc = hierfl(site, "run", f, "--out", str(tmp_path / name), "--quiet")
        assert proc.returncode == 0, proc.stderr
    a = outputs_of(str(tmp_path / "ray"), ["installed_avg"]).params["installed_avg"]
    b = outputs_of(str(tmp_path / "batched"), ["installed_avg"]).params["installed_avg"]
    for key in b:
        np.testing.assert_allclose(a[key], b[key], atol=1e-5, rtol=0)
    assert float(np.abs(b["global"]).sum()) > 0
