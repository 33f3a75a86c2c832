"""Local training plugins (train.local.solver) and loss plugins (train.local.loss): a plugin that
reimplements plain SGD gives FedAvg's numbers, its steps are cut where the built-in's are
(stragglers, deadlines, gamma targets), a momentum plugin equals torch run client by client by
hand, and a plugin that breaks its contract is a clear error (exit 2) that keeps what was
written."""
from __future__ import annotations

import copy
import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

from conftest import make_scenario, outputs_of, read_csv, scenario_doc
from hierfl import cli, plugins
from hierfl.algorithms.registry import REGISTRY
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.learn.local_train import LOCAL_TRAINS, LOSSES, register_local_train
from hierfl.learn.plugin_program import PluginProgram
from hierfl.learn.solver import solve
from hierfl.models.registry import MODELS
from hierfl.models.torch_model import TorchModel

PLUGIN = '''\
import torch
from torch import nn

import hierfl


@hierfl.register_local_train("plain_sgd")
def plain_sgd(model, batches, ctx):
    """Plain SGD, as the built-in steps take it."""
    for x, y in batches:
        model.zero_grad()
        ctx.loss(model(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= ctx.lr * p.grad


@hierfl.register_local_train("momentum")
def momentum(model, batches, ctx):
    opt = torch.optim.SGD(model.parameters(), lr=ctx.lr, momentum=0.9)
    for x, y in batches:
        opt.zero_grad()
        ctx.loss(model(x), y).backward()
        opt.step()


@hierfl.register_local_train("raises")
def raises(model, batches, ctx):
    if ctx.round == 2:
        raise RuntimeError("no more")
    plain_sgd(model, batches, ctx)


@hierfl.register_local_train("nan")
def nan(model, batches, ctx):
    plain_sgd(model, batches, ctx)
    if ctx.round == 2:
        with torch.no_grad():
            next(model.parameters()).fill_(float("nan"))


@hierfl.register_local_train("grows")
def grows(model, batches, ctx):
    plain_sgd(model, batches, ctx)
    if ctx.round == 2:
        model[1].weight = nn.Parameter(torch.zeros(9, 5))


@hierfl.register_loss("smoothed")
def smoothed(z, y):
    """Cross-entropy with labels smoothed by 0.1, per sample, any leading dimensions."""
    logp = torch.log_softmax(z, -1)
    nll = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    return 0.9 * nll - 0.1 * logp.mean(-1)


@hierfl.register_model("tiny")
def tiny(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], 8), nn.ReLU(),
                         nn.Linear(8, num_classes))
'''

TOPO = {"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.0e8}},
        "clients": {"count": 6, "compute_flops": 1.0e9,
                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2.0e6}}}
TRAIN = {"rounds": 3, "clients_per_round": 4, "local": {"steps": 4, "batch_size": 7, "lr": 0.1}}


@pytest.fixture(autouse=True)
def clean_registries():
    """Built-in registries only, and no plugin file loaded, before and after each test."""
    snaps = [(r, r.snapshot()) for r in (REGISTRY, MODELS, LOCAL_TRAINS, LOSSES)]
    loaded = dict(plugins._LOADED)
    plugins._LOADED.clear()
    yield
    for reg, snap in snaps:
        reg.restore(snap)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
    for name in [m for m in sys.modules if m.startswith("hierfl_plugin_")]:
        del sys.modules[name]


def _scenario(tmp_path, name: str = "s", **overrides) -> str:
    (tmp_path / "plug.py").write_text(PLUGIN)
    doc = scenario_doc(name=name, seed=2, topology=TOPO, train=TRAIN, plugins=["plug.py"],
                       model={"name": "tiny"},
                       data={"name": "synthetic", "dim": 5, "classes": 3, "samples": 30})
    return make_scenario(tmp_path, scenario_doc(doc, **overrides), name=name)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


def _same_run(a: list[dict], b: list[dict], exact: tuple[str, ...],
              close: tuple[str, ...] = ("train_loss", "test_acc")) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for col in exact:
            assert ra[col] == rb[col], (col, ra[col], rb[col])
        for col in close:
            assert math.isclose(float(ra[col]), float(rb[col]), rel_tol=1e-6, abs_tol=1e-7), \
                (col, ra[col], rb[col])


TIMES = ("round", "sim_time_s", "bytes_up", "bytes_down", "bytes_client_edge",
         "bytes_edge_cloud", "selected")
CLIENTS = ("round", "edge_round", "client", "steps", "budget", "compute_s", "upload_s",
           "dropped", "straggler", "up_bytes")


# --------------------------------------------------------------------- equal to the built-in
@pytest.mark.parametrize("extra", [
    {},
    {"stragglers": {"fraction": 0.5, "drop": "never"}, "train.local.steps": None,
     "train.local.epochs": 3, "train.round": {"policy": "deadline_partial",
                                              "deadline_s": 1.3},
     "topology.clients.compute_flops": 2.0e4},
    {"train.local.gamma": 0.6, "train.local.check_every": 2, "train.local.steps": 16,
     "train.local.lr": 0.3},
    {"model": {"name": "logreg"}},
], ids=["plain", "stragglers-deadline", "gamma", "functional-logreg"])
def test_plain_sgd_plugin_equals_fedavg(tmp_path, capsys, extra):
    """The same losses and accuracies to 1e-6, the same simulated times, bytes, steps and
    compute seconds, client by client, as FedAvg's built-in steps."""
    f = _scenario(tmp_path, algorithms=[{"name": "fedavg"}, {
        "name": "fedavg", "label": "mine", "local": {"solver": "plain_sgd"}}], **extra)
    rc, err = _run(["run", f, "--out", str(tmp_path / "o"), "--quiet", "--no-report"], capsys)
    assert rc == 0, err
    o = outputs_of(str(tmp_path / "o"), ["fedavg", "mine"])
    _same_run(o.metrics["fedavg"], o.metrics["mine"], TIMES)
    _same_run(o.clients["fedavg"], o.clients["mine"], CLIENTS, close=("gamma",))
    steps = [(int(r["steps"]), int(r["budget"])) for r in o.clients["mine"]]
    if "train.local.gamma" in extra:        # the gamma target cut some clients short
        assert any(s < b for s, b in steps) and any(s == b for s, b in steps), steps
    if "stragglers" in extra:   # of 3 epochs of 4 batches: stragglers' 1 or 2, the deadline's
        assert {b for _, b in steps} >= {4, 8} and max(b for _, b in steps) < 12, steps
    loss = [float(r["train_loss"]) for r in o.metrics["mine"]]
    assert loss[-1] < loss[0]


def test_sequential_executor_gives_the_batched_bytes(tmp_path, capsys):
    algs = [{"name": "fedavg", "local": {"solver": "momentum"}}]
    for kind in ("batched", "sequential"):
        f = _scenario(tmp_path, kind, algorithms=algs, **{"train.executor.kind": kind})
        rc, err = _run(["run", f, "--out", str(tmp_path / kind), "--quiet", "--no-report"],
                       capsys)
        assert rc == 0, err
    a = outputs_of(str(tmp_path / "batched"), ["fedavg"])
    b = outputs_of(str(tmp_path / "sequential"), ["fedavg"])
    for key, value in a.params["fedavg"].items():
        assert np.array_equal(value, b.params["fedavg"][key])
    _same_run(a.metrics["fedavg"], b.metrics["fedavg"], TIMES + ("train_loss", "test_acc"))


def test_momentum_plugin_equals_torch_by_hand():
    """The plugin's clients, run by the solver, against torch.optim.SGD(momentum=0.9) on each
    client's plan minibatches (the padding of a short batch left out), written out here."""
    ns: dict = {}
    exec(compile(PLUGIN.split("@hierfl.register_local_train(\"raises\")")[0], "<plug>", "exec"),
         ns)
    g = torch.Generator().manual_seed(0)
    counts = np.array([13, 9, 17])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    x = torch.randn(int(counts.sum()), 5, generator=g)
    y = torch.randint(0, 3, (int(counts.sum()),), generator=g)
    module = nn.Sequential(nn.Flatten(), nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    model = TorchModel(module, (5,), "classification", "tiny")
    start = model.init(g) + 0.1 * torch.randn(3, model.n_params, generator=g)
    budgets = np.array([5, 3, 7])
    clients = np.array([0, 1, 2])
    plan = minibatch_plan(offsets, clients, 4, budgets, 1, 2, 0, x, y)
    program = PluginProgram(model, start, "momentum", torch.from_numpy(clients), 2, 0, 1, 4)
    full = full_plan(offsets, clients, x, y).at(0)
    res = solve(program, plan, full, torch.from_numpy(budgets), 0.05, None, 5, measure=False)
    assert res.steps.tolist() == [5, 3, 7]
    for k in range(3):
        m = copy.deepcopy(module)
        nn.utils.vector_to_parameters(start[k].clone(), m.parameters())
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        for i in range(int(budgets[k])):
            rows = plan.rows[k, i][plan.weights[k, i] > 0]
            opt.zero_grad()
            nn.functional.cross_entropy(m(x[rows]), y[rows]).backward()
            opt.step()
        want = nn.utils.parameters_to_vector(m.parameters()).detach()
        torch.testing.assert_close(res.state[0][k], want, rtol=1e-6, atol=1e-7)
    short = [int((plan.weights[k, i] > 0).sum()) for k in range(3) for i in range(budgets[k])]
    assert min(short) < 4                     # a short last batch was among them


def test_ctx_says_the_round_and_draws_from_the_clients_stream():
    seen = []

    @register_local_train("look")
    def look(model, batches, ctx):
        seen.append((ctx.client, ctx.round, ctx.edge_round, ctx.budget, ctx.lr,
                     float(torch.rand(1, generator=ctx.generator))))
        assert sum(1 for _ in batches) == ctx.budget

    module = nn.Sequential(nn.Linear(2, 2))
    model = TorchModel(module, (2,), "classification", "lin")
    x, y = torch.randn(8, 2), torch.randint(0, 2, (8,))
    offsets, clients = np.array([0, 4, 8]), np.array([0, 1])
    plan = minibatch_plan(offsets, clients, 2, np.array([2, 3]), 7, 3, 1, x, y)
    start = torch.zeros(2, model.n_params)
    for _ in range(2):
        solve(PluginProgram(model, start, "look", torch.tensor([4, 9]), 3, 1, 7, 2), plan,
              full_plan(offsets, clients, x, y).at(0), torch.tensor([2, 3]), 0.1, None, 5,
              measure=False)
    assert [s[:5] for s in seen[:2]] == [(4, 3, 1, 2, 0.1), (9, 3, 1, 3, 0.1)]
    assert seen[0][5] != seen[1][5] and [s[5] for s in seen[:2]] == [s[5] for s in seen[2:]]


# --------------------------------------------------------------------- a loss of one's own
def test_custom_loss_batched_equals_the_per_client_plugin(tmp_path, capsys):
    """train.local.loss on the built-in (batched, vmap) steps equals the plain-SGD plugin whose
    ctx.loss is the same loss, client by client; the reported train loss is that loss."""
    algs = [{"name": "fedavg", "local": {"loss": "smoothed"}},
            {"name": "fedavg", "label": "mine", "local": {"loss": "smoothed",
                                                          "solver": "plain_sgd"}},
            {"name": "fedavg", "label": "ce"}]
    f = _scenario(tmp_path, algorithms=algs)
    rc, err = _run(["run", f, "--out", str(tmp_path / "o"), "--quiet", "--no-report"], capsys)
    assert rc == 0, err
    o = outputs_of(str(tmp_path / "o"), ["fedavg", "mine", "ce"])
    _same_run(o.metrics["fedavg"], o.metrics["mine"], TIMES)
    smooth, ce = (float(o.metrics[a][0]["train_loss"]) for a in ("fedavg", "ce"))
    assert smooth != ce and o.metrics["fedavg"][0]["test_acc"] == o.metrics["ce"][0]["test_acc"]
    logits = torch.randn(2, 5, 3)                # the loss is batched over leading dimensions
    labels = torch.randint(0, 3, (2, 5))
    ns: dict = {}
    exec(compile("import torch\n" + "def smoothed" + PLUGIN.split("def smoothed")[1]
                 .split("@hierfl")[0], "<loss>", "exec"), ns)
    whole = ns["smoothed"](logits, labels)
    assert whole.shape == (2, 5)
    torch.testing.assert_close(whole[1], ns["smoothed"](logits[1], labels[1]))


# --------------------------------------------------------------------- errors
@pytest.mark.parametrize("name, says", [
    ("raises", "raised RuntimeError: no more (at {p}:"),
    ("nan", "left non-finite values (NaN or inf) in 1.weight after 4 batch(es)"),
    ("grows", "changed the model's parameters: 1.weight (8, 5) -> (9, 5)"),
])
def test_a_broken_plugin_is_an_error_that_keeps_the_rounds_before(tmp_path, capsys, name, says):
    f = _scenario(tmp_path, algorithms=[{"name": "fedavg", "local": {"solver": name}}])
    p = str(tmp_path / "plug.py")
    rc, err = _run(["run", f, "--out", str(tmp_path / "o"), "--quiet", "--no-report"], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert f"algorithms[0].local.solver = {name!r}: fedavg: the local training plugin " \
        f"{name!r} ({p})" in err
    assert says.format(p=p) in err and ", round 2;" in err
    rows = read_csv(str(tmp_path / "o" / "fedavg" / "metrics.csv"))
    assert [r["round"] for r in rows] == ["0", "1"]              # round 1's row stays


def test_unknown_or_refused_solver_exit_2(tmp_path, capsys):
    f = _scenario(tmp_path, **{"train.local.solver": "plain_sdg"})
    rc, err = _run(["validate", f], capsys)
    assert rc == 2 and "train.local.solver = 'plain_sdg': unknown local training function " \
        "(did you mean 'plain_sgd'?)" in err
    f = _scenario(tmp_path, algorithms=[{"name": "fedprox", "mu": 0.1,
                                         "local": {"solver": "plain_sgd"}}])
    rc, err = _run(["validate", f], capsys)
    assert rc == 2 and "algorithms[0].local.solver = 'plain_sgd': fedprox (algorithms[0]) " \
        "has a local program of its own" in err and "fedavg" in err
    f = _scenario(tmp_path, **{"train.local.solver": "plain_sgd",
                               "train.local.optimizer": {"name": "sgd", "momentum": 0.9}})
    rc, err = _run(["validate", f], capsys)
    assert rc == 2 and "train.local.optimizer = " in err and "does not apply beside solver" \
        in err
    f = _scenario(tmp_path, **{"train.local.loss": "smooth"})
    rc, err = _run(["validate", f], capsys)
    assert rc == 2 and "unknown loss (did you mean 'smoothed'?)" in err


@pytest.mark.ray
def test_plugin_runs_on_ray_workers(tmp_path, capsys):
    """The ray executor's workers import the plugin file and run it: the batched bytes; a
    plugin raising in a worker is the same error as in this process (exit 2, no traceback)."""
    pytest.importorskip("ray")
    algs = [{"name": "fedavg", "local": {"solver": "momentum"}}]
    runs = {"ray": _scenario(tmp_path, "r", algorithms=algs, **{
        "train.executor": {"kind": "ray", "address": "local", "clients_per_task": 2}}),
        "batched": _scenario(tmp_path, "b", algorithms=algs)}
    for name, f in runs.items():
        rc, err = _run(["run", f, "--out", str(tmp_path / name), "--quiet", "--no-report"],
                       capsys)
        assert rc == 0, err
    a = outputs_of(str(tmp_path / "ray"), ["fedavg"]).params["fedavg"]
    b = outputs_of(str(tmp_path / "batched"), ["fedavg"]).params["fedavg"]
    for key, value in b.items():
        assert np.array_equal(value, a[key])
    f = _scenario(tmp_path, "e", algorithms=[{"name": "fedavg", "local": {"solver": "raises"}}],
                  **{"train.executor": {"kind": "ray", "address": "local",
                                        "clients_per_task": 2}})
    rc, err = _run(["run", f, "--out", str(tmp_path / "e"), "--quiet", "--no-report"], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert "the local training plugin 'raises'" in err and "RuntimeError: no more" in err
