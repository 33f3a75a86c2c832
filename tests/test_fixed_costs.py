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
import warnings

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
print("\\nheavy:", sorted(m for m in ("torch._dynamo", "sklearn", "scipy") if m in sys.modules))
print("networkx-imported:", "networkx" in sys.modules)
print("torch-imported:", "torch" in sys.modules, "exit:", code)
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
    ("docs", "--check"),
])
def test_commands_that_do_not_train_import_no_torch(args):
    torch_imported, out = _probe(*args)
    assert not torch_imported, f"hierfl {' '.join(args)} imported torch:\n{out}"


def test_validate_prints_the_model_size_without_torch():
    torch_imported, out = _probe("validate", "scenarios/quickstart.yaml")
    # logreg on 60 features and 10 classes: 60 * 10 weights + 10 biases
    assert "model: logreg, 610 parameters" in out and not torch_imported


@pytest.mark.parametrize("scenario", ["scenarios/digits_cnn.yaml",
                                      "scenarios/personalized_digits.yaml"])
def test_validating_a_digits_scenario_imports_neither_sklearn_nor_dynamo(scenario):
    """The digits are read from scikit-learn's bundled file without importing scikit-learn
    (~2.8 s with scipy), and a CNN's FLOPs are counted without importing torch._dynamo (~2 s,
    which torch's dispatch-mode wrapper imports at its first call)."""
    _, out = _probe("validate", scenario)
    import re
    assert "heavy: []" in out, out
    rows = re.search(r"data: digits, (\d+) training rows .*, (\d+) test rows", out)
    assert rows and int(rows[1]) + int(rows[2]) == 1797, out       # every digit was read


def test_flops_are_counted_as_flop_counter_mode_counts_them_and_torch_is_left_as_it_was():
    from torch.utils.flop_counter import FlopCounterMode
    import torch
    from hierfl.models.cnn.net import cnn
    from hierfl.models.flops import measure
    from hierfl.models.char_lstm.net import char_lstm

    for module, shape, dtype in ((cnn((64,), 10, channels=[8, 16], dense=32), (64,),
                                  torch.float32),
                                 (cnn((3, 32, 32), 10), (3, 32, 32), torch.float32),
                                 (char_lstm((80,), 80), (80,), torch.long)):
        flops, acts, out = measure(module, shape, next(module.parameters()))
        x = torch.zeros(1, *shape, dtype=dtype)
        with warnings.catch_warnings(), torch.no_grad(), \
                torch.backends.mkldnn.flags(enabled=False), \
                FlopCounterMode(display=False) as plain:
            warnings.simplefilter("ignore")           # mkldnn.flags' note on Intel GPUs
            module(x)
        assert flops == plain.get_total_flops() > 0 and out == module(x).shape


# counts a CNN's FLOPs in a fresh process, then says whether torch._dynamo was imported and
# whether the flop counter's dispatch function still carries the value set for the count
FLOPS_PROBE = """
import sys
import torch
from torch.utils.flop_counter import _FlopCounterMode
from hierfl.models.cnn.net import cnn
from hierfl.models.flops import measure
m = cnn((64,), 10, channels=[8, 16], dense=32)
flops = measure(m, (64,), next(m.parameters()))[0]
raw = _FlopCounterMode.__dict__["__torch_dispatch__"].__wrapped__
print(flops, "torch._dynamo" in sys.modules, hasattr(raw, "__dynamo_disable"))
"""


def test_flops_are_counted_without_dynamo_and_the_counter_is_left_as_torch_made_it():
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", FLOPS_PROBE], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    flops, dynamo, left = out.split()
    assert float(flops) > 0 and dynamo == "False" and left == "False", out


def test_digits_read_without_sklearn_are_load_digits_arrays(monkeypatch):
    """The bundled file parsed here, and load_digits itself (where the file is not found),
    give sklearn's arrays exactly."""
    import importlib.util

    from sklearn.datasets import load_digits

    from hierfl.data.real import digits_arrays
    want = load_digits()
    for found in (True, False):
        if not found:
            monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
        x, y = digits_arrays()
        assert x.dtype == want.data.dtype and np.array_equal(x, want.data), found
        assert np.array_equal(y, want.target) and y.shape == (1797,), found


def test_report_and_compare_import_no_torch(small_run, tmp_path):
    import shutil

    torch_imported, out = _probe("report", small_run)
    assert not torch_imported
    assert "networkx-imported: False" in out, out      # (reading a summary builds no graph)
    other = str(tmp_path / "other")             # (compare refuses one folder given twice)
    shutil.copytree(small_run, other)
    assert not _probe("compare", small_run, other, "--out", str(tmp_path / "cmp"))[0]


# ------------------------------------------------------------------- the algorithm registry
def test_builtin_declarations_are_their_classes():
    """Every Algorithm class of the package is declared once, in its package's torch-free
    __init__.py, and takes its Params and caps from that declaration."""
    from hierfl.algorithms import base
    from hierfl.algorithms.registry import REGISTRY

    found = {}
    pkg = importlib.import_module("hierfl.algorithms")
    for m in pkgutil.walk_packages(pkg.__path__, "hierfl.algorithms."):
        module = importlib.import_module(m.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, base.Algorithm) and \
                    obj.__dict__.get("name") and obj.__module__ == module.__name__:
                found[obj.name] = obj
    assert sorted(found) == sorted(REGISTRY) and len(found) >= 19
    for name, cls in found.items():
        decl = REGISTRY.declaration(name)
        assert REGISTRY[name] is cls
        assert decl.builtin and decl.origin == cls.__module__.rsplit(".", 1)[0], name
        assert (cls.Params, cls.caps) == (decl.params, decl.facts.caps), name
        assert cls.hierarchical == decl.facts.caps.hierarchical
        assert dataclasses.is_dataclass(decl.params)


def test_a_lookup_imports_only_what_it_names():
    code = ("import sys; from hierfl.algorithms.registry import REGISTRY; "
            "assert 'fedprox' in REGISTRY and 'nope' not in REGISTRY; "
            "REGISTRY.info('scaffold'); assert 'torch' not in sys.modules; "
            "assert REGISTRY['fedprox'].name == 'fedprox'; assert 'torch' in sys.modules; "
            "assert 'hierfl.algorithms.scaffold.algorithm' not in sys.modules; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr


# ------------------------------------------------------------------- the state guard
def test_predicted_state_bytes_equal_the_measured_ones(tmp_path):
    """validate's torch-free state sizes (algorithms/state_size.py) are exactly what run
    measures by initialising each built-in (and IFCA with 3 clusters)."""
    from conftest import make_scenario

    from hierfl.algorithms.registry import REGISTRY, predicted_bytes
    from hierfl.run.world import build_world, state_bytes
    from hierfl.scenario.load import load

    algos = [{"name": n} for n in REGISTRY] + [{"name": "ifca", "label": "ifca3",
                                                         "clusters": 3}]
    sc = load(make_scenario(tmp_path, algorithms=algos, topology__clients__count=7))
    world = build_world(sc)
    n, p = world.topo.n_clients, world.model.n_params
    assert (n, p) == (7, 5 * 3 + 3)
    for entry in sc.algorithms:
        assert predicted_bytes(entry.name, entry.params, n, p) == \
            state_bytes(sc, entry, world), entry.label
    assert predicted_bytes("scaffold", None, n, p) == (2 + 7) * p * 4


def test_validate_refuses_a_state_over_budget_naming_its_size_without_torch(tmp_path):
    from conftest import make_scenario

    path = make_scenario(tmp_path, algorithms=[{"name": "fedavg"}, {"name": "scaffold"}],
                         train__max_state_gb=1e-7)      # 100 B: FedAvg fits, SCAFFOLD not
    proc = subprocess.run([sys.executable, "-c", PROBE, "validate", path], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True,
                          text=True, timeout=120)
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "torch-imported: False exit: 2", proc.stdout + proc.stderr
    p = 5 * 3 + 3                                   # w, server c, 4 clients' c (float32)
    assert "algorithms[1].name" in proc.stderr and "scaffold" in proc.stderr
    assert f"4 clients x {p} parameters needs {6 * p * 4 / 1e9:.3g} GB" in proc.stderr
    assert "train.max_state_gb = 1e-07" in proc.stderr and "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- data arrays
def test_loaders_give_arrays_and_load_data_wraps_them_without_a_copy():
    import torch

    from hierfl.data.synthetic import generate
    from hierfl.data.registry import data_spec

    d = generate(data_spec(name="synthetic", dim=5, classes=3, samples=20), 4, 0)
    assert isinstance(d.x, np.ndarray) and isinstance(d.y_test, np.ndarray)
    t = d.as_tensors()
    assert isinstance(t.x, torch.Tensor) and t.x.dtype == torch.float32
    assert t.y.dtype == torch.int64 and t.out_dim == d.out_dim == 3
    assert t.x.data_ptr() == d.x.__array_interface__["data"][0]     # the same memory
    assert t.as_tensors() is t


# ------------------------------------------------------------------- the report at scale
def _inflate(src: str, dst: str, n: int, edges: int, rounds: int) -> None:
    """`src` (a finished run) as if it had `n` clients under `edges` edges: summary.json's
    nodes and data split, and `rounds` x n rows of clients.csv (the small run's rows, cycled)."""
    import json
    import shutil

    shutil.copytree(src, dst)
    with open(os.path.join(src, "summary.json")) as fh:
        s = json.load(fh)
    g = np.random.default_rng(0)
    en, cn = [f"edge{i}" for i in range(edges)], [f"client{i}" for i in range(n)]
    parents = ["cloud"] * edges + [en[i % edges] for i in range(n)]
    t = s["topology"]
    t["nodes"] = {"name": en + cn, "parent": parents, "depth": [1] * edges + [2] * n,
                  "role": ["edge"] * edges + ["client"] * n}
    for key in ("flops", "up_Bps", "down_Bps", "latency_up_s", "latency_down_s"):
        t["nodes"][key] = g.lognormal(20.0, 0.5, edges + n).round(1).tolist()
    t["clients"], t["client_edge"] = cn, parents[edges:]
    t["device_class"] = t["link_class"] = [""] * n
    k = len(s["data"]["label_counts"][0])
    train = g.integers(20, 200, n)
    s["data"].update(train_counts=train.tolist(), test_counts=(train // 4).tolist(),
                     label_counts=g.multinomial(train, np.full(k, 1.0 / k)).tolist())
    with open(os.path.join(dst, "summary.json"), "w") as fh:
        json.dump(s, fh)
    path = os.path.join(dst, "fedavg", "clients.csv")
    with open(path) as fh:
        head, *rows = fh.read().splitlines()
    cols = head.split(",")
    ci, ri = cols.index("client"), cols.index("round")
    cells = [r.split(",") for r in rows]
    out = [head]
    for i in range(rounds * n):
        row = list(cells[i % len(cells)])
        row[ci], row[ri] = str(i % n), str(1 + i // n)
        out.append(",".join(row))
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def test_the_report_of_200k_client_rounds_costs_about_what_a_small_one_does(small_run,
                                                                              tmp_path):
    """50,000 clients under 25 edges, 200,000 rows of clients.csv: the figures draw the
    aggregators and summaries (files of a bounded size, written the same twice) and the report
    takes a bounded multiple of the small run's time (before: ~10x, and ~20 MB figures)."""
    import hashlib
    import time

    from hierfl.report import write_report

    big = str(tmp_path / "big")
    _inflate(small_run, big, 50_000, 25, 4)
    t0 = time.perf_counter()
    write_report(small_run)
    t_small = time.perf_counter() - t0
    t0 = time.perf_counter()
    write_report(big)
    t_big = time.perf_counter() - t0

    def svgs(folder: str) -> dict[str, str]:
        return {f: hashlib.sha256(open(os.path.join(folder, f), "rb").read()).hexdigest()
                for f in sorted(os.listdir(folder)) if f.endswith(".svg")}
    first = svgs(big)
    for name in ("topology.svg", "data_split.svg", "steps_vs_speed.svg", "devices.svg"):
        assert name in first
        assert os.path.getsize(os.path.join(big, name)) < 400_000, name
    with open(os.path.join(big, "topology.svg")) as fh:
        text = fh.read()
    assert "50000 clients, 25 aggregators" in text and "2000 clients of each" in text
    write_report(big)
    assert svgs(big) == first                          # byte-identical run to run
    assert t_big < 4 * t_small + 5.0, (t_big, t_small)


# ------------------------------------------------------------------- a sweep point's cost
def test_sweep_points_write_no_report_unless_asked(tmp_path, monkeypatch):
    """Without point_reports, a point writes its run files and DONE but no report (~2 CPU s of
    figures a point); the sweep report still holds the points' numbers; `--point-reports`
    turns the reports on."""
    import csv

    from hierfl import cli
    from hierfl import sweep as sw
    from test_sweep import BASE, TOPOLOGY      # the tiny system of the sweep tests

    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    (tmp_path / "base.yaml").write_text(BASE)
    f = tmp_path / "sw.yaml"
    f.write_text("base: base.yaml\ngrid:\n  seed: [4]\noutput: out\n")
    s = sw.load_sweep(str(f))
    assert s.point_reports is False
    assert sw.run_sweep(s, "local", workers=1, progress=False) == {}
    point = tmp_path / "out" / s.points[0].name
    assert (point / sw.DONE).is_file() and (point / "fedavg" / "metrics.csv").is_file()
    assert not list(point.glob("report.*")) and not list(point.glob("*.svg")) and \
        not list(point.glob("*.png"))
    with open(point / "fedavg" / "metrics.csv", newline="") as fh:
        final = float(list(csv.DictReader(fh))[-1]["test_acc"])
    with open(tmp_path / "out" / "sweep.csv", newline="") as fh:
        rows = {r["algorithm"]: r for r in csv.DictReader(fh)}
    assert float(rows["fedavg"]["final_acc_mean"]) == pytest.approx(final, abs=1e-12)
    assert f"{final:.3f}" in (tmp_path / "out" / "sweep.md").read_text()
    seen = []
    monkeypatch.setattr(sw, "run_sweep", lambda s, *a, **k: seen.append(s) or {})
    assert cli.main(["sweep", str(f), "--point-reports", "--quiet"]) == 0
    assert cli.main(["sweep", str(f), "--quiet"]) == 0
    assert [x.point_reports for x in seen] == [True, False]


def test_the_old_module_paths_of_the_builtins_still_import():
    """Plugins written before the built-ins became packages import their classes from the
    package (`from hierfl.algorithms.fedavg import FedAvg`): the package forwards a name it
    lacks to its code module, importing it (and torch) only then."""
    code = ("import sys\n"
            "import hierfl.algorithms.fedavg as pkg, hierfl.models.cnn as cnn_pkg\n"
            "assert 'torch' not in sys.modules\n"
            "from hierfl.algorithms.fedavg import FedAvg\n"
            "from hierfl.algorithms.hierfavg import HierFAVG\n"
            "from hierfl.models.cnn import cnn\n"
            "assert FedAvg.__module__ == 'hierfl.algorithms.fedavg.algorithm'\n"
            "assert issubclass(HierFAVG, FedAvg) and HierFAVG.Params.__name__ == "
            "'HierFAVGParams'\n"
            "assert cnn.__module__ == 'hierfl.models.cnn.net'\n"
            "try:\n    pkg.no_such_name\nexcept AttributeError:\n    print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr
