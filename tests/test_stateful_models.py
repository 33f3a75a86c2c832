"""Models with per-client state (models/torch_model.py `stateful`, exec/carry.py): BatchNorm's
running statistics kept per client and dropout drawn from per-client, per-step seeded streams.

The reference is plain torch, client by client: the client's own module (its statistics in its
buffers), `torch.manual_seed(seed)` before each step, torch.optim run on the same minibatches,
the optimizer object carried across rounds for `state: keep` and made anew for `reset`. The
batched solver (the executor a run uses) must give the same parameters and statistics to 1e-5
relative over several rounds of heterogeneous clients (different sizes, data and budgets).
The comparison runs in float64: Adam divides each gradient entry by its own size, so a
rounding difference of float32 kernels on different thread counts (the sequential executor
runs on one) becomes a difference of lr in an entry whose gradient is nearly zero."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from hierfl.exec.local import BatchedExecutor, SequentialExecutor
from hierfl.learn.batches import dropout_keys, full_plan, minibatch_plan, step_seeds
from hierfl.learn.optim import SGD, Adam
from hierfl.learn.solver import TermsProgram
from hierfl.models.torch_model import TorchModel, init_values

from conftest import make_scenario, read_csv
from hierfl.cli import main

SEED = 5
COUNTS = np.array([23, 9, 32, 14])     # (no minibatch of one row: BatchNorm1d refuses it)
BUDGETS = [[7, 3, 9, 0], [5, 6, 2, 8], [9, 1, 4, 6]]     # per round: heterogeneous, one zero


def _module(dropout: float = 0.3, bn: bool = True) -> nn.Module:
    """A CNN with BatchNorm after its convolution and its hidden dense layer (those have no
    bias, as in ResNets: a bias before BatchNorm has a zero gradient up to rounding, which Adam
    divides by its own size: a comparison of rounding noise), and dropout."""
    layers = [nn.Conv2d(1, 4, 3, padding=1, bias=not bn)]
    layers += [nn.BatchNorm2d(4)] if bn else []
    layers += [nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 12, bias=not bn),
               nn.BatchNorm1d(12) if bn else nn.Identity(), nn.ReLU(), nn.Dropout(dropout),
               nn.Linear(12, 3)]
    return nn.Sequential(*layers)


def _data():
    g = torch.Generator().manual_seed(3)
    offsets = np.concatenate([[0], np.cumsum(COUNTS)])
    n = int(offsets[-1])
    shift = torch.repeat_interleave(torch.arange(4.0), torch.from_numpy(COUNTS))
    x = torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64) + \
        shift.view(-1, 1, 1, 1).double() * 0.5
    y = torch.randint(0, 3, (n,), generator=g)
    return offsets, x, y


def _torch_round(module, opt, row, buffers, plan_rows, plan_w, x, y, keys, budget, lr):
    """One client's round in plain torch: its module, torch.manual_seed before each step."""
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(row, module.parameters())
        for b, v in zip(_stat_buffers(module), buffers.split([b.numel() for b in
                                                              _stat_buffers(module)])):
            b.copy_(v.view(b.shape))
    module.train()
    for n in range(budget):
        wts = plan_w[n]
        real = int((wts != 0).nonzero().max()) + 1 if bool((wts != 0).any()) else 0
        if real == 0:
            continue
        torch.manual_seed(step_seeds(keys, torch.tensor([[n]]))[0])
        out = module(x[plan_rows[n, :real]])
        loss = (nn.functional.cross_entropy(out, y[plan_rows[n, :real]], reduction="none")
                * wts[:real]).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats = torch.cat([b.detach().double().reshape(-1) for b in _stat_buffers(module)]) \
        if _stat_buffers(module) else torch.zeros(0)
    stats = stats.double()
    return torch.nn.utils.parameters_to_vector(module.parameters()).detach(), stats


def _stat_buffers(module):
    return [b for m in module.modules() if isinstance(m, nn.modules.batchnorm._NormBase)
            for b in m.buffers(recurse=False)]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


@pytest.mark.parametrize("opt_name, keep", [("sgd", False), ("sgd", True), ("adam", True),
                                            ("adamw", False)])
@pytest.mark.parametrize("executor", ["batched", "sequential", "plain-model"])
def test_bn_and_dropout_clients_equal_torch_client_by_client(opt_name, keep, executor):
    """("plain-model": the same CNN without BatchNorm and dropout on the per-client loop path,
    whose optimizer steps run in place inside `client_steps`: TermsProgram.run_steps.)"""
    torch.manual_seed(0)
    offsets, x, y = _data()
    plain = executor == "plain-model"
    base = (_module(dropout=0.0, bn=False) if plain else _module()).double()
    model = TorchModel(copy.deepcopy(base), (1, 8, 8), "classification", "bn",
                       batching="loop")
    assert model.stateful != plain and model.batching == "loop"
    assert plain or model.n_buffers == (4 + 4 + 1) + (12 + 12 + 1)
    lr = 0.05
    ours, make = {
        "sgd": (SGD(momentum=0.9, weight_decay=5e-4),
                lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9, weight_decay=5e-4)),
        "adam": (Adam(), lambda p: torch.optim.Adam(p, lr=lr)),
        "adamw": (Adam(weight_decay=0.01, decoupled=True),
                  lambda p: torch.optim.AdamW(p, lr=lr, weight_decay=0.01))}[opt_name]
    w0 = init_values(base, torch.Generator().manual_seed(1)).double()
    clients = np.arange(4)
    refs = [copy.deepcopy(base) for _ in clients]
    ref_opts = [make(m.parameters()) for m in refs]
    ref_w = w0.expand(4, -1).clone()
    ref_b = model.init_buffers().expand(4, -1).clone()
    w, b = ref_w.clone(), ref_b.clone()
    opt_state = None
    run = (SequentialExecutor() if executor == "sequential" else BatchedExecutor()).run
    for t, budgets in enumerate(BUDGETS, start=1):
        plan = minibatch_plan(offsets, clients, 5, np.array(budgets), SEED, t, 0, x, y)
        keys = dropout_keys(SEED, t, 0, clients)
        program = TermsProgram(model, w.clone(), optimizer=ours, keys=None if plain else keys,
                               buffers0=None if plain else b.clone(),
                               opt0=opt_state if keep else None)
        assert plain == (program.run_steps(program.init(), plan.span(0, 1), lr) is not None)
        res = run(program, plan, full_plan(offsets, clients, x, y).at(0),
                  torch.tensor(budgets), lr, None, 5, measure=False)
        w_new, opt_new, ms = program.parts(res.state)
        for k in clients:
            if not keep:
                ref_opts[k] = make(refs[k].parameters())
            ref_w[k], ref_b[k] = _torch_round(refs[k], ref_opts[k], ref_w[k], ref_b[k],
                                              plan.rows[k], plan.weights[k], x, y, keys[k:k + 1],
                                              budgets[k], lr)
        assert res.steps.tolist() == budgets
        assert _rel(w_new, ref_w) < 1e-5, (t, _rel(w_new, ref_w))
        if not plain:
            assert _rel(ms[0], ref_b) < 1e-5, (t, _rel(ms[0], ref_b))
            assert ms[1].view(-1).tolist() == budgets      # each client's step counter
        # the next round: every client from the mean model, its own statistics and optimizer
        mean = w_new.mean(0)
        w, opt_state = mean.expand(4, -1).clone(), opt_new
        b = b if plain else ms[0].clone()
        ref_w = mean.expand(4, -1).clone()
    assert plain or not torch.equal(b[0], b[2])             # the statistics are per client


def test_dropout_masks_come_from_the_seed_not_the_global_generator():
    offsets, x, y = _data()
    x = x.float()
    model = TorchModel(_module(dropout=0.5, bn=False), (1, 8, 8), "classification", "d")
    assert model.random and model.n_buffers == 0
    clients = np.arange(4)
    plan = minibatch_plan(offsets, clients, 5, np.full(4, 6), SEED, 1, 0, x, y)
    w0 = model.init(torch.Generator().manual_seed(2)).expand(4, -1).clone()

    def once(seed: int, round_: int) -> torch.Tensor:
        torch.manual_seed(1234 + round_)             # the global generator: must not matter
        p = TermsProgram(model, w0, keys=dropout_keys(seed, round_, 0, clients),
                         buffers0=w0.new_zeros(4, 0))
        res = BatchedExecutor().run(p, plan, full_plan(offsets, clients, x, y).at(0),
                                    torch.full((4,), 6), 0.1, None, 5, measure=False)
        return res.state[0]

    before = torch.random.get_rng_state()
    a = once(SEED, 1)
    assert torch.equal(torch.random.get_rng_state(), torch.manual_seed(1234 + 1).get_state())
    torch.random.set_rng_state(before)
    assert torch.equal(a, once(SEED, 1))                    # same seed: same masks
    assert not torch.equal(a, once(SEED + 1, 1))            # another seed: other masks
    assert not torch.equal(a, once(SEED, 2))                # another round: other masks


def test_evaluation_uses_running_statistics_and_no_dropout():
    offsets, x, y = _data()
    x = x.float()
    module = _module(dropout=0.9)
    model = TorchModel(copy.deepcopy(module), (1, 8, 8), "classification", "bn")
    w = model.init(torch.Generator().manual_seed(4))
    stats = model.init_buffers()
    stats[:4] = torch.tensor([0.5, -1.0, 2.0, 0.0])        # conv BN's running means
    out = model.forward(w.unsqueeze(0), x[:10].reshape(1, 10, -1), stats)
    ref = copy.deepcopy(module)
    torch.nn.utils.vector_to_parameters(w, ref.parameters())
    ref.eval()
    ref[1].running_mean.copy_(stats[:4])
    with torch.no_grad():
        assert torch.allclose(out[0], ref(x[:10]), atol=1e-6)
        assert torch.equal(model.forward(w.unsqueeze(0), x[:10].reshape(1, 10, -1), stats), out)
    assert model.module.training            # left in training mode for the next step


def _bn_plugin(tmp_path, model, dropout=0.3):
    p = tmp_path / f"{model}.py"
    p.write_text(
        "import hierfl\nfrom torch import nn\n\n"
        f"@hierfl.register_model({model!r})\n"
        f"def bn_cnn(input_shape, num_classes, dropout={dropout}):\n"
        "    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),\n"
        "                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 16), nn.ReLU(),\n"
        "                         nn.Dropout(dropout), nn.Linear(16, num_classes))\n")
    return str(p)


def _scenario(tmp_path, name, model, algos=("fedavg",), **train):
    local = {"steps": 4, "batch_size": 8, "lr": 0.05,
             "optimizer": {"name": "sgd", "momentum": 0.9, "weight_decay": 5e-4,
                           "state": "keep"}}
    local.update(train.pop("local", {}))
    return make_scenario(tmp_path, name=name, plugins=[_bn_plugin(tmp_path, model)],
                         data={"name": "digits", "test_fraction": 0.2},
                         topology={"edges": {"count": 2}, "clients": {"count": 8}},
                         model={"name": model},
                         train={"rounds": 3, "clients_per_round": 6, "local": local, **train},
                         algorithms=[{"name": a} for a in algos])


def test_a_run_with_batchnorm_and_dropout_is_reproducible_and_counts_the_statistics(tmp_path):
    f = _scenario(tmp_path, "bn", "bn_cnn_runs", algos=("fedavg", "hierfavg"))
    for out in ("a", "b"):
        assert main(["run", f, "--out", str(tmp_path / out), "--no-report"]) == 0
    for algo in ("fedavg", "hierfavg"):
        a = read_csv(tmp_path / "a" / algo / "metrics.csv")
        assert a == read_csv(tmp_path / "b" / algo / "metrics.csv")
        clients = read_csv(tmp_path / "a" / algo / "clients.csv")
        # the model (P floats) and its statistics (Q floats) travel together
        p, q = 4 * 9 + 4 + 8 + 64 * 16 + 16 + 16 * 10 + 10, 4 + 4 + 1
        assert {float(r["up_bytes"]) for r in clients} == {4.0 * (p + q)}
        assert float(a[-1]["test_acc"]) > float(a[0]["test_acc"])


def test_a_batchnorm_model_is_refused_where_the_program_cannot_carry_it(tmp_path, capsys):
    f = _scenario(tmp_path, "bn", "bn_cnn_refused", algos=("fedavg", "pfedme"),
                  local={"optimizer": {"name": "sgd"}})
    assert main(["run", f, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "algorithms[1].name = 'pfedme'" in err and "BatchNorm running statistics" in err \
        and "Traceback" not in err


def test_pause_and_resume_with_kept_optimizer_state_and_statistics_is_bit_identical(tmp_path):
    """The client tables (kept optimizer state, per-client and server statistics) are in the
    checkpoint: a run paused after round 2 and resumed equals the uninterrupted run."""
    f = _scenario(tmp_path, "bn", "bn_cnn_resume", algos=("fedavg", "hierfavg"),
                  rounds=4)
    assert main(["run", f, "--out", str(tmp_path / "ref"), "--no-report"]) == 0
    assert main(["run", f, "--out", str(tmp_path / "cut"), "--no-report",
                 "--stop-after", "2"]) == 0
    assert main(["run", f, "--out", str(tmp_path / "cut"), "--no-report", "--resume"]) == 0
    for algo in ("fedavg", "hierfavg"):
        for name in ("metrics.csv", "clients.csv"):
            assert (tmp_path / "ref" / algo / name).read_bytes() == \
                (tmp_path / "cut" / algo / name).read_bytes(), (algo, name)


def test_a_minibatch_of_one_row_through_batchnorm_is_named_not_a_traceback(tmp_path, capsys):
    p = tmp_path / "bn1d.py"
    p.write_text("import hierfl\nfrom torch import nn\n\n"
                 "@hierfl.register_model('bn1d_mlp')\n"
                 "def bn1d_mlp(input_shape, num_classes):\n"
                 "    return nn.Sequential(nn.Flatten(), nn.Linear(64, 8, bias=False),\n"
                 "                         nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, num_classes))\n")
    # 8 clients of the 1,437 training digits: sizes 179 / 180; batch 179 leaves 180 % 179 = 1
    f = make_scenario(tmp_path, name="one", plugins=[str(p)],
                      data={"name": "digits", "test_fraction": 0.2},
                      topology={"edges": {"count": 1}, "clients": {"count": 8}},
                      model={"name": "bn1d_mlp"},
                      train={"rounds": 2, "clients_per_round": "all",
                             "local": {"epochs": 1, "batch_size": 179, "lr": 0.05}})
    assert main(["run", f, "--out", str(tmp_path / "o"), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "train.local.batch_size = 179" in err and "minibatch of one row" in err and \
        "Traceback" not in err, err


@pytest.mark.parametrize("state, ok", [("reset", True), ("keep", False)])
def test_kept_optimizer_state_counts_in_the_state_guard(tmp_path, capsys, state, ok):
    """Adam kept per client is 8 + 2 x 4 P bytes a client: 4 clients x 18 parameters of logreg
    = 608 B over FedAvg's 72 B model; a budget of 300 B takes reset and refuses keep."""
    from hierfl.algorithms.state_size import kept_optimizer_bytes
    from hierfl.scenario.load import load
    f = make_scenario(tmp_path, name=state, train__max_state_gb=3e-7,
                      train__local__optimizer={"name": "adam", "state": state})
    assert kept_optimizer_bytes(load(f).algorithms[0], 4, 18) == (0 if ok else 4 * (8 + 8 * 18))
    assert main(["validate", f]) == (0 if ok else 2)
    err = capsys.readouterr().err
    assert ok or ("kept optimizer state" in err and "Traceback" not in err), err


@pytest.mark.ray
@pytest.mark.parametrize("kind", ["sequential", "ray"])
def test_batchnorm_dropout_and_kept_state_give_the_same_bytes_on_every_executor(tmp_path, kind):
    """The statistics, the dropout streams and the kept optimizer state do not depend on where
    the clients run: the sequential executor and a local Ray cluster write the batched one's
    metrics and models."""
    if kind == "ray":
        pytest.importorskip("ray")
    ex = {"kind": kind} if kind == "sequential" else \
        {"kind": "ray", "address": "local", "clients_per_task": 2}
    f = _scenario(tmp_path, "e", "bn_cnn_on_" + kind, rounds=2)
    g = _scenario(tmp_path, "g", "bn_cnn_on_" + kind, rounds=2, executor=ex)
    assert main(["run", f, "--out", str(tmp_path / "a"), "--no-report"]) == 0
    assert main(["run", g, "--out", str(tmp_path / "b"), "--no-report"]) == 0
    for name in ("metrics.csv", "clients.csv"):
        a = read_csv(tmp_path / "a" / "fedavg" / name)
        b = read_csv(tmp_path / "b" / "fedavg" / name)
        cols = [c for c in a[0] if c not in ("elapsed_s", "wall_s")]
        assert [[r[c] for c in cols] for r in a] == [[r[c] for c in cols] for r in b], name
