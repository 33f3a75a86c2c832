"""Adding a built-in algorithm is one package and nothing else: the test writes a toy algorithm
(FedAvg with a server step size) into a copy of the hierfl package, edits no other file, and
finds it in every place that lists algorithms: the registry, `hierfl validate`, the generated
reference (`hierfl docs`), the torch-free state guard (its declared size against the state a
run initialises), the declarations-are-their-classes check and a run.

The copy is made in a temporary folder; the source tree is never written."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

from conftest import make_scenario, read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DECLARATION = '''\
"""ToyAvg (a test's own): FedAvg whose server takes a step of size eta_g towards the mean,

    w^{t+1} = w^t + eta_g (sum_k n_k w_k / sum_k n_k - w^t)    (eta_g = 1: FedAvg)."""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("toyavg", code=f"{__name__}.algorithm:ToyAvg",
                   caps=Capabilities(asynchronous=False), state=StateSize(fixed=1))
@dataclass(frozen=True)
class ToyAvgParams:
    server_lr: float = spec(1.0, "eta_g: the server's step towards the mean", check=positive)
'''

CODE = '''\
"""ToyAvg: the transitions (torch)."""
from __future__ import annotations

from dataclasses import replace

from ..base import State, weighted_mean
from ..fedavg.algorithm import FedAvg


class ToyAvg(FedAvg):
    name = "toyavg"

    def server_update(self, state, clients, up, ctx):
        if len(clients) == 0:
            return state
        mean = weighted_mean(up.tensors[0], self.weights(clients))
        return replace(state, w=state.w + self.p.server_lr * (mean - state.w))
'''

CHECK = '''\
import dataclasses, sys
from hierfl.algorithms.registry import REGISTRY, predicted_bytes
assert "toyavg" in REGISTRY and "torch" not in sys.modules
decl = REGISTRY.declaration("toyavg")
assert decl.builtin and decl.facts.caps.linear_aggregate is False
from hierfl.cli import docs as docs_gen
page = docs_gen.generate()
assert "### toyavg" in page and "eta_g: the server's step towards the mean" in page, page[-800:]
assert "Page: [algorithms/toyavg.md](algorithms/toyavg.md)" in page
assert "| `toyavg` | ToyAvg (a test's own): FedAvg whose server" in docs_gen.generate_algorithm_index()
assert "torch" not in sys.modules                     # declared, documented: no torch
from hierfl.run.world import build_world, state_bytes
from hierfl.scenario.load import load
sc = load(sys.argv[1])
world = build_world(sc)
n, p = world.topo.n_clients, world.model.n_params
for entry in sc.algorithms:
    assert predicted_bytes(entry.name, entry.params, n, p) == state_bytes(sc, entry, world)
cls = REGISTRY["toyavg"]
assert cls.__module__ == "hierfl.algorithms.toyavg.algorithm"
assert (cls.Params, cls.caps) == (decl.params, decl.facts.caps)
print("ok")
'''


def test_a_new_builtin_algorithm_is_one_package(tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "hierfl"), copy / "hierfl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    pkg = copy / "hierfl" / "algorithms" / "toyavg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(DECLARATION)
    (pkg / "algorithm.py").write_text(CODE)
    f = make_scenario(tmp_path, algorithms=[{"name": "fedavg"},
                                            {"name": "toyavg", "server_lr": 1.0},
                                            {"name": "toyavg", "label": "half",
                                             "server_lr": 0.5}])
    env = {**os.environ, "PYTHONPATH": str(copy)}

    def py(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=str(copy), env=env,
                              capture_output=True, text=True, timeout=300)

    proc = py("-c", CHECK, f)
    assert proc.stdout.strip() == "ok", proc.stderr

    proc = py("-m", "hierfl", "validate", f)
    assert proc.returncode == 0, proc.stderr
    assert "toyavg ToyAvgParams(server_lr=0.5)" in proc.stdout

    bad = make_scenario(tmp_path, name="bad", algorithms=[{"name": "toyavg", "server_lr": -1}])
    proc = py("-m", "hierfl", "validate", bad)
    assert proc.returncode == 2 and "algorithms[0].server_lr" in proc.stderr
    assert "Traceback" not in proc.stderr

    proc = py("-m", "hierfl", "run", f, "--out", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = {label: [{k: v for k, v in r.items() if k not in ("algorithm", "label")}
                    for r in read_csv(str(tmp_path / "out" / label / "metrics.csv"))]
            for label in ("fedavg", "toyavg", "half")}
    assert len(rows["toyavg"]) == len(rows["fedavg"]) == 3     # rounds 0..2
    for a, b in zip(rows["toyavg"], rows["fedavg"]):    # eta_g = 1 is FedAvg: times and bytes
        assert a.keys() == b.keys()                     # to the bit, w + (mean - w) to rounding
        for k in a:
            if k in ("train_loss", "round_loss"):
                assert math.isclose(float(a[k]), float(b[k]), rel_tol=1e-7), (k, a[k], b[k])
            else:
                assert a[k] == b[k], (k, a[k], b[k])
    assert [r["test_acc"] for r in rows["half"]] != [r["test_acc"] for r in rows["fedavg"]]
