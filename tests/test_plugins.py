"""Plugins: a Python file that registers an algorithm, a model and a data set, named by a
scenario's `plugins:` or by `--plugin`, run through the CLI (validate, run, docs, sweep, a Ray
executor). Each kind is checked against a built-in it must equal: a FedAvg written again gives
FedAvg's final parameters bit for bit, a zero-initialised nn.Linear trains as the zero-initialised
logreg, a data set returned by a loader gives the same run as the same arrays in an npz file."""
from __future__ import annotations

import math
import os
import sys
import textwrap

import numpy as np
import pytest
import yaml

from conftest import make_scenario, outputs_of, read_csv, scenario_doc
from hierfl import cli, plugins
from hierfl.algorithms.base import Algorithm
from hierfl.algorithms.registry import REGISTRY, register_algorithm
from hierfl.data.registry import DATASETS
from hierfl.models.registry import MODELS

PLUGIN = '''\
"""A test plugin: one algorithm, one model, one data set."""
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import hierfl
from hierfl.algorithms.base import Capabilities, stack_start
from hierfl.learn.solver import TermsProgram

with open(__file__ + ".count", "a") as fh:      # how many times this file was imported
    fh.write("imported\\n")


@dataclass(frozen=True)
class CopyParams:
    pass


class CopyAvg(hierfl.Algorithm):
    """FedAvg, written again outside the package."""
    name = "copy_avg"
    Params = CopyParams
    caps = Capabilities(linear_aggregate=True, drops_stragglers=True)

    def local(self, state, clients, start, ctx):
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))


hierfl.register_algorithm(CopyAvg)


class FlatLinear(nn.Module):
    """Logistic regression as a module of this file (its class pickles by reference here)."""

    def __init__(self, d, k, width):
        super().__init__()
        self.hidden = nn.Linear(d, width) if width else None
        self.out = nn.Linear(width or d, k)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.out(torch.relu(self.hidden(x)) if self.hidden is not None else x)


@hierfl.register_model("flat_linear")
def flat_linear(input_shape, num_classes, width: int = 0):
    """A linear layer on the flattened input (width > 0: one hidden ReLU layer first)."""
    return FlatLinear(int(np.prod(input_shape)), num_classes, width)


@hierfl.register_dataset("blobs", classes=3)
def blobs(n_clients: int, seed: int, rows: int = 20, spread: float = 1.0):
    """Three Gaussian blobs in 4 dimensions, every client its own draw."""
    g = np.random.default_rng(seed)
    centres = g.normal(size=(3, 4)) * 3
    out = []
    for k in range(n_clients):
        y = np.arange(rows) % 3
        x = centres[y] + spread * g.normal(size=(rows, 4))
        yt = np.arange(rows // 4) % 3
        xt = centres[yt] + spread * g.normal(size=(len(yt), 4))
        out.append(hierfl.ClientArrays(x, y, xt, yt))
    return out


@hierfl.register_dataset("bad_labels", classes=3)
def bad_labels(n_clients: int, seed: int, top: int = 3, clients: int = 0):
    return [(np.zeros((2, 3)), np.array([0, top]), np.zeros((0, 3)), np.zeros(0, np.int64))
            for _ in range(clients or n_clients)]
'''

TOPO = {"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.0e8}},
        "clients": {"count": 6, "compute_flops": 1.0e9,
                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2.0e6}}}
TRAIN = {"rounds": 3, "clients_per_round": 4, "local": {"steps": 4, "batch_size": 5, "lr": 0.1}}


@pytest.fixture(autouse=True)
def clean_registries():
    """Every test starts and ends with the built-in registries only (later test modules read
    REGISTRY and generate docs), and no plugin file loaded, as in a fresh process (a test of
    another module in this process, e.g. a sweep run in-process, may have loaded one)."""
    snaps = [(r, r.snapshot()) for r in (REGISTRY, MODELS, DATASETS)]
    loaded = dict(plugins._LOADED)
    plugins._LOADED.clear()
    yield
    for reg, snap in snaps:
        reg.restore(snap)
    for reg, old in ((plugins._LOADED, loaded),):
        reg.clear()
        reg.update(old)
    for name in [m for m in sys.modules if m.startswith("hierfl_plugin_")]:
        del sys.modules[name]


def _plugin(tmp_path, name: str = "myplug.py", text: str = PLUGIN) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _scenario(tmp_path, name: str = "s", **overrides) -> str:
    doc = scenario_doc(name=name, seed=2, topology=TOPO, train=TRAIN,
                       data={"name": "synthetic", "dim": 5, "classes": 3, "samples": 30})
    return make_scenario(tmp_path, scenario_doc(doc, **overrides), name=name)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


# --------------------------------------------------------------------- each kind, by the CLI
def test_algorithm_plugin_equals_fedavg_bit_for_bit(tmp_path, capsys):
    _plugin(tmp_path)
    f = _scenario(tmp_path, plugins=["myplug.py"],
                  algorithms=[{"name": "fedavg"}, {"name": "copy_avg"}])
    rc, out, err = _run(["validate", f], capsys)
    assert rc == 0, err
    assert "algorithm copy_avg: copy_avg CopyParams()" in out
    rc, _, err = _run(["run", f, "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert rc == 0, err
    o = outputs_of(str(tmp_path / "out"), ["fedavg", "copy_avg"])
    assert o.params["fedavg"].keys() == o.params["copy_avg"].keys()
    for key, value in o.params["fedavg"].items():
        assert np.array_equal(value, o.params["copy_avg"][key])
    drop = ("algorithm", "label")
    strip = [[{k: v for k, v in r.items() if k not in drop} for r in o.metrics[a]]
             for a in ("fedavg", "copy_avg")]
    assert strip[0] == strip[1] and len(strip[0]) == 4          # rounds 0..3
    loss = [float(r["train_loss"]) for r in o.metrics["copy_avg"]]
    assert loss[-1] < loss[0]                                    # it trained


def test_model_plugin_by_option_trains_as_logreg(tmp_path, capsys):
    """nn.Linear from zeros takes the same SGD steps as logreg from zeros (its closed-form
    gradient): the same losses and accuracies to float rounding."""
    p = _plugin(tmp_path)
    ours = _scenario(tmp_path, "mine", model={"name": "flat_linear", "init": "zeros"})
    ref = _scenario(tmp_path, "ref", model={"name": "logreg", "init": "zeros"})
    rc, out, err = _run(["validate", ours, "--plugin", p], capsys)
    assert rc == 0, err
    assert "model: flat_linear, 18 parameters" in out          # 5 x 3 weights + 3 biases
    for f, o in ((ours, "o_mine"), (ref, "o_ref")):
        rc, _, err = _run(["run", f, "--out", str(tmp_path / o), "--quiet", "--plugin", p],
                          capsys)
        assert rc == 0, err
    a = read_csv(str(tmp_path / "o_mine" / "fedavg" / "metrics.csv"))
    b = read_csv(str(tmp_path / "o_ref" / "fedavg" / "metrics.csv"))
    assert len(a) == len(b) == 4                                  # rounds 0..3
    cols = ("train_loss", "test_acc", "bytes_up", "bytes_down")  # (FLOPs: counted apart)
    assert all(c in b[0] for c in cols)
    for ra, rb in zip(a, b):
        for col in cols:
            assert math.isclose(float(ra[col]), float(rb[col]), rel_tol=1e-5,
                                abs_tol=1e-7), (col, ra[col], rb[col])
    assert math.isclose(float(a[0]["train_loss"]), math.log(3), rel_tol=1e-6)  # zeros: log K
    assert float(a[-1]["train_loss"]) < float(a[0]["train_loss"])


def test_dataset_plugin_equals_the_same_arrays_in_npz(tmp_path, capsys):
    p = _plugin(tmp_path)
    plugin_ns: dict = {}
    exec(compile(PLUGIN.split("@hierfl.register_dataset")[0].split("with open")[0]
                 + "\n" + "def blobs" + PLUGIN.split("def blobs")[1].split("@hierfl")[0],
                 "<blobs>", "exec"), plugin_ns)
    parts = plugin_ns["blobs"](6, 2, rows=12, spread=0.5)       # the loader, by hand
    train = [(c.x_train, c.y_train) for c in parts]
    tests = [(c.x_test, c.y_test) for c in parts]
    ours = _scenario(tmp_path, "mine", data={"name": "blobs", "rows": 12, "spread": 0.5},
                     plugins=[p])
    ref = make_scenario(tmp_path, scenario_doc(scenario_doc(name="ref", seed=2, topology=TOPO,
                                                            train=TRAIN)),
                        name="ref", clients=train, tests=tests, labels=True)
    rc, out, err = _run(["validate", ours], capsys)
    assert rc == 0, err
    assert "data: blobs, 72 training rows (12..12 per client), 18 test rows, dim 4" in out
    for f, o in ((ours, "o_mine"), (ref, "o_ref")):
        rc, _, err = _run(["run", f, "--out", str(tmp_path / o), "--quiet"], capsys)
        assert rc == 0, err
    a = outputs_of(str(tmp_path / "o_mine"), ["fedavg"])
    b = outputs_of(str(tmp_path / "o_ref"), ["fedavg"])
    for key in b.params["fedavg"]:
        assert np.array_equal(a.params["fedavg"][key], b.params["fedavg"][key])
    assert [r["test_acc"] for r in a.metrics["fedavg"]] == \
        [r["test_acc"] for r in b.metrics["fedavg"]]


def test_docs_lists_the_plugins_parameters(tmp_path, capsys):
    p = _plugin(tmp_path)
    page = tmp_path / "ref.md"
    rc, _, err = _run(["docs", "--plugin", p, "--path", str(page)], capsys)
    assert rc == 0, err
    text = page.read_text()
    plug = text[text.index("## Plugins"):]
    assert "### copy_avg" in plug and "FedAvg, written again outside the package." in plug
    assert "| `model.width` | integer | `0` |" in plug
    assert "| `data.rows` | integer | `20` |" in plug
    assert "| `data.spread` | number | `1.0` |" in plug
    assert "## Plugins" not in open(os.path.join("docs", "scenario.md")).read()


# --------------------------------------------------------------------- loading and errors
def test_loading_twice_registers_once(tmp_path, capsys):
    p = _plugin(tmp_path)
    f = _scenario(tmp_path, plugins=["myplug.py"], algorithms=[{"name": "copy_avg"}])
    rc, _, err = _run(["validate", f, "--plugin", p, "--plugin", p], capsys)
    assert rc == 0, err
    with open(p + ".count") as fh:
        assert fh.read() == "imported\n"
    assert plugins.loaded() == [p]
    assert REGISTRY["copy_avg"].__module__ == plugins.module_name(p)


def test_error_in_the_plugin_names_its_file_and_line(tmp_path, capsys):
    p = _plugin(tmp_path, "broken.py", "import hierfl\n\nX = 1\nraise RuntimeError('boom')\n")
    f = _scenario(tmp_path, plugins=["broken.py"])
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "Traceback" not in err
    assert f"{f}:12: plugins[0] = " in err                 # the scenario's line of plugins:
    assert f"the plugin raised RuntimeError: boom (at {p}:4)" in err
    rc, _, err = _run(["run", _scenario(tmp_path, "t"), "--plugin", p], capsys)
    assert rc == 2 and "--plugin = " in err and f"(at {p}:4)" in err
    s = _plugin(tmp_path, "syntax.py", "x = 1\ndef f(:\n")
    rc, _, err = _run(["report", str(tmp_path), "--plugin", s], capsys)
    assert rc == 2 and f"SyntaxError: invalid syntax (at {s}:2)" in err
    assert plugins.loaded() == []                       # nothing half-registered


@pytest.mark.parametrize("code", ["0", "None", "'bye'"])
def test_a_plugin_that_exits_at_import_is_an_error(tmp_path, capsys, code):
    """`raise SystemExit(0)` (or sys.exit()) in a plugin ended `hierfl validate` and `hierfl run`
    silently with exit 0: now an error naming the plugin file and line, exit 2."""
    p = _plugin(tmp_path, "exits.py", f"import sys\nsys.exit({code})\n")
    for argv in (["validate", _scenario(tmp_path, "t"), "--plugin", p],
                 ["run", _scenario(tmp_path, "t"), "--plugin", p, "--out",
                  str(tmp_path / "o"), "--quiet"]):
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and "Traceback" not in err, err
        assert "--plugin = " in err and "the plugin raised SystemExit" in err
        assert "must not exit" in err and f"(at {p}:2)" in err
    assert plugins.loaded() == [] and not (tmp_path / "o").exists()


def test_missing_plugin_file_exits_2(tmp_path, capsys):
    f = _scenario(tmp_path, plugins=["nowhere.py"])
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "plugins[0]" in err and "no such plugin file" in err
    rc, _, err = _run(["sweep", str(tmp_path / "sw.yaml"), "--plugin", "nowhere.py"], capsys)
    assert rc == 2 and "--plugin" in err and "no such plugin file" in err


def test_unknown_names_and_options_of_plugins(tmp_path, capsys):
    f = _scenario(tmp_path, algorithms=[{"name": "copy_avg"}])
    rc, _, err = _run(["validate", f], capsys)                  # not loaded yet: unknown
    assert rc == 2 and "algorithms[0].name = 'copy_avg': unknown algorithm" in err
    p = _plugin(tmp_path)
    f = _scenario(tmp_path, plugins=[p], data={"name": "blob", "rows": 4})
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "error: 1 problem" in err
    assert "data.name = 'blob': unknown data set (did you mean 'blobs'?)" in err
    f = _scenario(tmp_path, plugins=[p], data={"name": "blobs", "rowz": 4})
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "data.rowz = 4: unknown key for data set 'blobs' (did you mean " \
        "'rows'?); allowed: name, rows, spread" in err
    f = _scenario(tmp_path, data={"name": "digits", "options": {"a": 1}})
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "options: are for data sets registered" in err


def test_a_loader_breaking_its_contract_is_named(tmp_path, capsys):
    p = _plugin(tmp_path)
    f = _scenario(tmp_path, plugins=[p], data={"name": "bad_labels"})
    rc, _, err = _run(["validate", f], capsys)                  # classes=3, a label 3
    assert rc == 2 and "Traceback" not in err
    assert f"data.name = 'bad_labels': data set 'bad_labels' ({p}:" in err
    assert "client 0: y_train labels must be in 0..2 (found 0..3)" in err
    f = _scenario(tmp_path, plugins=[p], data={"name": "bad_labels", "top": 2, "clients": 2})
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "the loader returned 2 clients, the topology has 6" in err
    f = _scenario(tmp_path, plugins=[p], data={"name": "bad_labels", "top": 2})
    rc, out, err = _run(["validate", f], capsys)                # within its contract
    assert rc == 0, err
    assert "data: bad_labels, 12 training rows (2..2 per client), 0 test rows, dim 3" in out


BAD_MODELS = '''\
import numpy as np
import torch
from torch import nn

import hierfl


@hierfl.register_model("with_dropout")
def with_dropout(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], 8), nn.Dropout(0.5),
                         nn.Linear(8, num_classes))


@hierfl.register_model("zero_dropout")
def zero_dropout(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], 8), nn.Dropout(0.0),
                         nn.Linear(8, num_classes))


class Gru(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.gru = nn.GRU(1, 6, num_layers=2, dropout=0.3, batch_first=True)
        self.out = nn.Linear(6, k)

    def forward(self, x):
        h, _ = self.gru(x.unsqueeze(-1))
        return self.out(h[:, -1])


@hierfl.register_model("gru_dropout")
def gru_dropout(input_shape, num_classes):
    return Gru(input_shape[0], num_classes)


@hierfl.register_model("sized")
def sized(input_shape, num_classes, width: int = 4):
    return nn.Sequential(nn.Linear(input_shape[0], width), nn.Linear(width, num_classes))


@hierfl.register_model("raising")
def raising(input_shape, num_classes):
    raise RuntimeError("boom in the factory")


@hierfl.register_dataset("int_pixels", classes=3)
def int_pixels(n_clients, seed):
    g = np.random.default_rng(seed)
    return [hierfl.ClientArrays(g.integers(0, 300, (6, 1, 8, 8)), g.integers(0, 3, 6),
                                g.integers(0, 300, (2, 1, 8, 8)), g.integers(0, 3, 2))
            for _ in range(n_clients)]
'''


@pytest.mark.parametrize("model, needle", [
    # dropout draws per-client seeded masks (tests/test_stateful_models.py): valid
    ({"name": "with_dropout"}, None),
    ({"name": "gru_dropout"}, None),
    # these two were tracebacks, exit 1
    ({"name": "sized", "width": 8.5}, "model.name = 'sized': model factory 'sized' raised "
                                      "TypeError"),
    ({"name": "raising"}, "model factory 'raising' raised RuntimeError: boom in the factory"),
    ({"name": "zero_dropout"}, None),
    # int64 rows (indices) to the CNN: valid, then a dtype traceback in run
    ({"name": "cnn", "_data": "int_pixels"}, "model.name = 'cnn': int_pixels rows are integer "
                                            "indices (vocabulary 300)"),
])
def test_a_model_plugin_that_cannot_run_reproducibly_or_at_all_is_named(tmp_path, capsys,
                                                                       model, needle):
    if needle is None:                  # dropout: seeded per client and step, valid
        p = _plugin(tmp_path, "badmodels.py", BAD_MODELS)
        rc, _, err = _run(["validate", _scenario(tmp_path, plugins=[p], model=model)], capsys)
        assert rc == 0, err
        return
    p = _plugin(tmp_path, "badmodels.py", BAD_MODELS)
    model = dict(model)
    data = {"data": {"name": model.pop("_data")}} if "_data" in model else {}
    f = _scenario(tmp_path, plugins=[p], model=model, **data)
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and needle in err and "Traceback" not in err, err


def test_register_algorithm_checks(tmp_path):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class P:
        pass

    class NoName(Algorithm):
        Params = P

    class Clash(Algorithm):
        name = "fedavg"
        Params = P

    class Fine(Algorithm):
        name = "fine_one"
        Params = P

    with pytest.raises(TypeError, match="subclass"):
        register_algorithm(int)                            # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name"):
        register_algorithm(NoName)
    with pytest.raises(ValueError, match="'fedavg' is taken"):
        register_algorithm(Clash)
    assert register_algorithm(Fine) is Fine and register_algorithm(Fine) is Fine
    assert REGISTRY["fine_one"] is Fine


@pytest.mark.parametrize("second", [
    'def blobs(n_clients, seed, rows: int = 30):\n    return []\n',     # the same def name
    'def other(n_clients, seed):\n    return []\n',
])
def test_a_data_set_registered_twice_under_one_name_is_refused(tmp_path, capsys, second):
    """A second loader under a taken name was silently put in the first's place (where the
    two functions had the same name); the same file imported again stays a no-op."""
    text = ('import hierfl\n\n@hierfl.register_dataset("twice", classes=3)\n'
            'def blobs(n_clients, seed, rows: int = 20):\n    return []\n\n'
            '@hierfl.register_dataset("twice", classes=3)\n' + second)
    p = _plugin(tmp_path, "twice.py", text)
    f = _scenario(tmp_path, plugins=[p], data={"name": "twice"})
    rc, _, err = _run(["validate", f], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert "data set name 'twice' is taken by blobs (" + p + ":3)" in err and \
        f"(at {p}:7)" in err, err
    one = _plugin(tmp_path, "once.py", text.split("\n\n@")[0] + "\n")
    plugins.load_file(one)
    plugins._LOADED.clear()
    plugins.load_file(one)                                      # imported anew: a no-op
    assert "twice" in DATASETS


def test_a_plugin_data_set_under_a_built_in_name_is_refused_before_the_scan(tmp_path, capsys):
    """Loaded before the built-ins were listed, it took the name and the built-in's own
    declaration failed later with a traceback."""
    p = _plugin(tmp_path, "digits.py", 'import hierfl\n\n@hierfl.register_dataset("digits")\n'
                'def digits(n_clients, seed):\n    return []\n')
    import subprocess
    r = subprocess.run([sys.executable, "-c", "import hierfl, sys\n"
                        "from hierfl.config.errors import ScenarioError\n"
                        f"try:\n    hierfl.load_plugins([{p!r}])\n"
                        "except ScenarioError as e:\n    sys.exit(str(e))\n"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "data set name 'digits' is taken by hierfl.data.real:load_digits" in r.stderr


# --------------------------------------------------------------------- other processes
def test_local_sweep_workers_load_the_command_line_plugin(tmp_path, capsys):
    """The plugin is named only by --plugin: the spawned worker processes import it from the
    driver's bundle before they read their point."""
    p = _plugin(tmp_path)
    _scenario(tmp_path, "base", algorithms=[{"name": "fedavg"}, {"name": "copy_avg"}],
              **{"train.rounds": 2})
    sw = tmp_path / "sw.yaml"
    sw.write_text("base: base.yaml\ngrid:\n  seed: [0, 1]\noutput: out\npoint_reports: false\n")
    rc, _, err = _run(["sweep", str(sw), "--plugin", p, "--workers", "2", "--quiet"], capsys)
    assert rc == 0, err
    points = sorted(d for d in os.listdir(tmp_path / "out") if d.startswith("seed"))
    assert len(points) == 2
    for pt in points:
        o = outputs_of(str(tmp_path / "out" / pt), ["fedavg", "copy_avg"])
        for key in o.params["fedavg"]:
            assert np.array_equal(o.params["fedavg"][key], o.params["copy_avg"][key])
    text = yaml.safe_load((tmp_path / "out" / points[0] / "point.yaml").read_text())
    assert "plugins" not in text                       # it came with the task, not the file


@pytest.mark.ray
def test_ray_executor_workers_load_the_plugin(tmp_path, capsys):
    """A plugin model (its nn.Module class in the plugin file) on a real one-node Ray cluster:
    the workers import the plugin before unpickling the chunk; the result equals the batched
    executor's."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 1024 * 1024)
    try:
        p = _plugin(tmp_path)
        model = {"name": "flat_linear", "width": 6}
        algs = [{"name": "copy_avg"}]
        f_ray = _scenario(tmp_path, "r", model=model, algorithms=algs, **{
            "train.executor": {"kind": "ray", "address": "local", "clients_per_task": 2}})
        f_b = _scenario(tmp_path, "b", model=model, algorithms=algs)
        for f, o in ((f_ray, "o_ray"), (f_b, "o_b")):
            rc, _, err = _run(["run", f, "--out", str(tmp_path / o), "--quiet", "--plugin", p],
                              capsys)
            assert rc == 0, err
    finally:
        ray.shutdown()
    a = outputs_of(str(tmp_path / "o_ray"), ["copy_avg"])
    b = outputs_of(str(tmp_path / "o_b"), ["copy_avg"])
    for key in b.params["copy_avg"]:
        np.testing.assert_allclose(a.params["copy_avg"][key], b.params["copy_avg"][key],
                                   atol=1e-5, rtol=0)
    assert float(np.abs(b.params["copy_avg"]["global"]).sum()) > 0


LAZY = '''\
from dataclasses import dataclass
import hierfl

@hierfl.declare_algorithm("ghost", code="no_such_pkg.algo:Ghost")
@dataclass(frozen=True)
class GhostParams:
    pass

@hierfl.declare_algorithm("raiser", code="lazy_code_that_raises:Raiser")
@dataclass(frozen=True)
class RaiserParams:
    pass
'''


def test_a_lazy_declaration_whose_code_is_missing_or_raises_is_named(tmp_path, capsys):
    """declare_algorithm names its class by "module:Class": validate refuses a module that
    does not exist (found without importing it), a run one that raises on import; both exit 2
    naming the declaration, its plugin file and the failing line, no traceback."""
    p = _plugin(tmp_path, "lazy.py", LAZY)
    (tmp_path / "lazy_code_that_raises.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        ghost = _scenario(tmp_path, "g", plugins=[p], algorithms=[{"name": "ghost"}])
        rc, _, err = _run(["validate", ghost], capsys)
        assert rc == 2 and "Traceback" not in err
        assert "algorithms[0].name = 'ghost'" in err and "no_such_pkg" in err and p in err
        raiser = _scenario(tmp_path, "r", plugins=[p], algorithms=[{"name": "raiser"}])
        rc, _, err = _run(["validate", raiser], capsys)
        assert rc == 0, err                                 # the module exists
        rc, _, err = _run(["run", raiser, "--out", str(tmp_path / "o"), "--quiet"], capsys)
        assert rc == 2 and "Traceback" not in err
        assert "RuntimeError: boom" in err and "lazy_code_that_raises.py:2" in err, err
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lazy_code_that_raises", None)


# --------------------------------------------------------------------- a plugin's hooks failing
BROKEN = '''\
from dataclasses import dataclass, replace

import torch

import hierfl
from hierfl.algorithms.base import Capabilities, stack_start, Upload
from hierfl.algorithms.registry import EdgeRounds
from hierfl.learn.solver import TermsProgram


@dataclass(frozen=True)
class P:
    at: int = 2


class Flat(hierfl.Algorithm):
    """FedAvg whose hook fails in round `at` (by its label's kind)."""
    name = "broken_flat"
    Params = P
    caps = Capabilities(linear_aggregate=True)
    how = ""

    def local(self, state, clients, start, ctx):
        if self.how == "local" and ctx.round == self.p.at:
            raise KeyError("no such term")
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))

    def client_update(self, state, clients, start, res, ctx):
        if self.how == "upload" and ctx.round == self.p.at:
            return state, Upload((res.state[0][:, :-1],))
        return state, Upload((res.state[0],))

    def server_update(self, state, clients, up, ctx):
        if self.how == "raise" and ctx.round == self.p.at:
            return helper(state)
        if self.how == "shape" and ctx.round == self.p.at:
            return replace(state, w=torch.zeros(3))
        return super().server_update(state, clients, up, ctx)


def helper(state):
    return 1 / 0


class Raise(Flat):
    name = "broken_raise"
    how = "raise"


class Shape(Flat):
    name = "broken_shape"
    how = "shape"


class Up(Flat):
    name = "broken_upload"
    how = "upload"


class Local(Flat):
    name = "broken_local"
    how = "local"


@dataclass(frozen=True)
class HP(EdgeRounds):
    pass


class Hier(hierfl.Algorithm):
    name = "broken_edge"
    Params = HP
    caps = Capabilities(hierarchical=True, linear_aggregate=True)

    def local(self, state, clients, start, ctx):
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))

    def edge_aggregate(self, es, clients, up, weights, ctx):
        if ctx.round == 2:
            raise ValueError("edge sums disagree")
        return super().edge_aggregate(es, clients, up, weights, ctx)


for cls in (Raise, Shape, Up, Local, Hier):
    hierfl.register_algorithm(cls)
'''


@pytest.mark.parametrize("name, hook, says", [
    ("broken_raise", "server_update", "raised ZeroDivisionError: division by zero (at {p}:{div})"),
    ("broken_shape", "server_update", "returned a State whose model w has shape (3,), not (18,)"),
    ("broken_upload", "client_update", "returned a wrong upload: broken_upload: upload of "
     "[(4, 17)]"),
    ("broken_local", "local", "raised KeyError: 'no such term' (at {p}:{key})"),
    ("broken_edge", "edge_aggregate", "raised ValueError: edge sums disagree (at {p}:"),
])
def test_a_failing_plugin_hook_is_exit_2_naming_it_and_keeps_the_rounds_before(
        tmp_path, capsys, name, hook, says):
    """A plugin algorithm's hook that raises or returns a tensor of the wrong shape: exit 2
    naming the plugin, its file, the hook, the round and its own line; round 1 stays written."""
    p = _plugin(tmp_path, "broken.py", BROKEN)
    f = _scenario(tmp_path, plugins=[p], algorithms=[{"name": name}])
    rc, _, err = _run(["run", f, "--out", str(tmp_path / "o"), "--quiet", "--no-report"],
                      capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert f"algorithms[0].name = {name!r}: {name}: the algorithm plugin {name!r} ({p}): its " \
        f"{hook} " in err, err
    lines = BROKEN.splitlines()
    at = {w: 1 + next(i for i, t in enumerate(lines) if s in t)
          for w, s in (("div", "1 / 0"), ("key", "raise KeyError"))}
    assert says.format(p=p, **at) in err and "in round 2; the outputs of the rounds before are " \
        "kept" in err, err
    rows = read_csv(str(tmp_path / "o" / name / "metrics.csv"))
    assert [r["round"] for r in rows] == ["0", "1"]
