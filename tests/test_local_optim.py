"""train.local.optimizer (learn/optim.py): the batched optimizers equal torch.optim run client by
client on the same minibatches (heterogeneous clients, budgets and data; FedProx's prox term's
gradient added before the step); plain SGD keeps today's path; scenarios with adam train,
deterministically; bad keys and unsupported algorithms are refused naming the key."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hierfl.cli import main
from hierfl.exec.local import BatchedExecutor
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.learn.optim import SGD, Adam, Clip
from hierfl.learn.solver import TermsProgram
from hierfl.learn.terms import L1, Prox
from hierfl.models.functional import Layer, Model

from conftest import make_scenario, read_csv

CONFIGS = {
    "sgd-momentum": (SGD(momentum=0.9), lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9)),
    "sgd-nesterov": (SGD(momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.8, nesterov=True)),
    "sgd-dampening": (SGD(momentum=0.7, dampening=0.3),
                      lambda p: torch.optim.SGD(p, lr=LR, momentum=0.7, dampening=0.3)),
    "sgd-weight-decay": (SGD(weight_decay=0.1),
                         lambda p: torch.optim.SGD(p, lr=LR, weight_decay=0.1)),
    "sgd-all": (SGD(momentum=0.5, dampening=0.2, weight_decay=0.05),
                lambda p: torch.optim.SGD(p, lr=LR, momentum=0.5, dampening=0.2,
                                          weight_decay=0.05)),
    "adam": (Adam(), lambda p: torch.optim.Adam(p, lr=LR)),
    "adam-wd": (Adam(beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
                lambda p: torch.optim.Adam(p, lr=LR, betas=(0.8, 0.99), eps=1e-6,
                                           weight_decay=0.1)),
    "adamw": (Adam(weight_decay=0.05, decoupled=True),
              lambda p: torch.optim.AdamW(p, lr=LR, weight_decay=0.05)),
    "amsgrad": (Adam(amsgrad=True), lambda p: torch.optim.Adam(p, lr=LR, amsgrad=True)),
    "adamw-amsgrad": (Adam(weight_decay=0.01, amsgrad=True, decoupled=True),
                      lambda p: torch.optim.AdamW(p, lr=LR, amsgrad=True)),
}
LR = 0.05
MAX_REL: dict[str, float] = {}


def _problem(dtype=torch.float64):
    """Five logreg clients of different sizes and data, budgets that differ (one of them 0)."""
    g = torch.Generator().manual_seed(11)
    counts = np.array([13, 7, 21, 9, 16])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    n, d, k = int(offsets[-1]), 5, 3
    x = torch.randn(n, d, generator=g, dtype=dtype) + torch.repeat_interleave(
        torch.arange(5, dtype=dtype), torch.from_numpy(counts)).unsqueeze(1) * 0.3
    y = torch.randint(0, k, (n,), generator=g)
    model = Model([Layer(d, k, True)], "classification", "logreg")
    start = 0.1 * torch.randn(5, model.n_params, generator=g, dtype=dtype)
    budgets = np.array([11, 4, 17, 0, 8])
    plan = minibatch_plan(offsets, np.arange(5), 4, budgets, 3, 1, 0, x, y)
    full = full_plan(offsets, np.arange(5), x, y).at(0)
    return model, start, budgets, plan, full


def _reference(model, start, budgets, plan, make, terms_of=None, clip=None):
    """torch.optim on each client alone: the loss by hand (model.loss, autograd) plus the
    smooth terms' values, one optimizer step per minibatch of the same plan; `clip(params)`
    (torch.nn.utils') between backward and the step."""
    out = []
    for k in range(start.shape[0]):
        p = torch.nn.Parameter(start[k].clone())
        opt = make([p])
        for j in range(int(budgets[k])):
            b = plan.at(j)
            opt.zero_grad()
            w = p.unsqueeze(0)
            loss = model.loss(w, b.x[k:k + 1], b.y[k:k + 1], b.m[k:k + 1]).sum()
            for t in (terms_of(k) if terms_of else ()):
                loss = loss + t.value(w).sum()
            loss.backward()
            if clip is not None:
                clip([p])
            opt.step()
        out.append(p.detach())
    return torch.stack(out)


def _rel(got: torch.Tensor, ref: torch.Tensor, start: torch.Tensor) -> float:
    """Max relative error of the displacement from the start (the part the steps made)."""
    return float((got - ref).abs().max() / (ref - start).abs().max())


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("prox", [False, True])
def test_batched_optimizer_equals_torch_optim_per_client(name, prox):
    model, start, budgets, plan, full = _problem()
    opt, make = CONFIGS[name]
    mu = torch.tensor([[0.5], [1.0], [0.2], [0.0], [2.0]], dtype=start.dtype)
    anchor = start.flip(0).clone()
    terms = (Prox(mu, anchor),) if prox else ()
    prog = TermsProgram(model, start, terms, optimizer=opt)
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), LR, None, 5,
                                measure=False)
    ref = _reference(model, start, budgets, plan, make,
                     (lambda k: (Prox(mu[k:k + 1], anchor[k:k + 1]),)) if prox else None)
    assert res.steps.tolist() == budgets.tolist()
    assert float((res.state[0] - start).abs().max()) > 1e-2
    torch.testing.assert_close(res.state[0][3], start[3], rtol=0, atol=0)   # no budget
    rel = _rel(res.state[0], ref, start)
    MAX_REL[f"{name}{'+prox' if prox else ''}"] = rel
    assert rel < 1e-5, rel


def test_float32_adam_close_to_torch():
    model, start, budgets, plan, full = _problem(torch.float32)
    prog = TermsProgram(model, start, (), optimizer=Adam(amsgrad=True))
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), LR, None, 5,
                                measure=False)
    ref = _reference(model, start, budgets, plan, lambda p: torch.optim.Adam(p, lr=LR,
                                                                             amsgrad=True))
    assert _rel(res.state[0], ref, start) < 1e-5


def test_l1_prox_applied_after_the_optimizer_step():
    """A non-smooth term (l1) is its proximal map after the optimizer's step, with lr."""
    model, start, budgets, plan, full = _problem()
    opt = SGD(momentum=0.9)
    prog = TermsProgram(model, start, (L1(0.01),), optimizer=opt)
    s = prog.init()
    b = plan.at(0)
    got = prog.step(s, b, LR)
    w, st = opt.update(model.grad(start, b.x, b.y, b.m), opt.init(start), start, LR)
    torch.testing.assert_close(got[0], L1(0.01).prox(w, LR), rtol=0, atol=0)
    assert len(got) == 1 + len(st)


def test_plain_sgd_is_todays_path_bit_for_bit():
    """{name: sgd} builds no optimizer (the fused path stays); SGD() run through the optimizer
    mechanism agrees with it too."""
    from hierfl.config.schema import OptimizerSpec
    from hierfl.learn.optim import build
    assert build(OptimizerSpec()) is None
    assert build(OptimizerSpec(momentum=0.0, dampening=0.0, nesterov=False,
                               weight_decay=0.0)) is None
    model, start, budgets, plan, full = _problem()
    prog = TermsProgram(model, start, (Prox(0.3, start[0].clone()),))
    assert prog.run_steps(prog.init(), plan.span(0, 2), LR) is not None    # fused
    args = (plan, full, torch.from_numpy(budgets), LR, None, 5)
    today = BatchedExecutor().run(prog, *args, measure=False)
    again = BatchedExecutor().run(TermsProgram(model, start, (Prox(0.3, start[0].clone()),),
                                               optimizer=None), *args, measure=False)
    assert torch.equal(today.state[0], again.state[0])
    via = BatchedExecutor().run(TermsProgram(model, start, (Prox(0.3, start[0].clone()),),
                                             optimizer=SGD()), *args, measure=False)
    torch.testing.assert_close(via.state[0], today.state[0], rtol=1e-12, atol=1e-12)


def test_optimizer_state_follows_w_in_the_state():
    model, start, budgets, plan, full = _problem()
    s = TermsProgram(model, start, optimizer=Adam(amsgrad=True)).init()
    assert len(s) == 5 and all(t.shape[0] == 5 for t in s)
    assert s[0] is not start and torch.equal(s[0], start)
    assert all(float(t.abs().sum()) == 0 for t in s[1:])
    assert len(TermsProgram(model, start, optimizer=SGD(weight_decay=0.1)).init()) == 1


# ----------------------------------------------------------------------------- scenarios
LOCAL = {"steps": 5, "lr": 0.01, "batch_size": 10}
ADAM = {"train.rounds": 4, "train.local": {**LOCAL, "optimizer": {"name": "adam"}}}


def _run(tmp_path, tag, over):
    path = make_scenario(tmp_path / tag, None, **over)
    out = tmp_path / tag / "out"
    rc = main(["run", str(path), "--out", str(out)])
    return rc, out


def test_scenario_with_adam_trains_and_is_deterministic(tmp_path):
    rc, out = _run(tmp_path, "a", ADAM)
    assert rc == 0
    rows = read_csv(out / "fedavg" / "metrics.csv")
    loss = [float(r["train_loss"]) for r in rows if r.get("train_loss")]
    assert len(loss) >= 2 and loss[-1] < loss[0]
    rc2, out2 = _run(tmp_path, "b", ADAM)
    assert rc2 == 0
    assert (out / "fedavg" / "metrics.csv").read_bytes() == \
        (out2 / "fedavg" / "metrics.csv").read_bytes()
    rc3, out3 = _run(tmp_path, "c", {"train.rounds": 4, "train.local": LOCAL})
    assert rc3 == 0
    assert (out / "fedavg" / "metrics.csv").read_bytes() != \
        (out3 / "fedavg" / "metrics.csv").read_bytes()


@pytest.mark.parametrize("opt,key,words", [
    ({"name": "adam", "momentum": 0.9}, "train.local.optimizer", "momentum does not apply"),
    ({"name": "sgd", "betas": [0.9, 0.99]}, "train.local.optimizer", "betas does not apply"),
    ({"name": "sgd", "momentum": 1.0}, "train.local.optimizer.momentum", "[0, 1)"),
    ({"name": "adam", "betas": [0.9, 1.0]}, "train.local.optimizer.betas", "[0, 1)"),
    ({"name": "adam", "eps": 0.0}, "train.local.optimizer.eps", "> 0"),
    ({"name": "adamw", "weight_decay": -1.0}, "train.local.optimizer.weight_decay", ">= 0"),
    ({"name": "sgd", "nesterov": True}, "train.local.optimizer", "nesterov needs momentum"),
    ({"name": "sgd", "nesterov": True, "momentum": 0.9, "dampening": 0.1},
     "train.local.optimizer", "dampening 0"),
    ({"name": "rmsprop"}, "train.local.optimizer.name", "rmsprop"),
    ({"name": "sgd", "mom": 0.9}, "train.local.optimizer.mom", "unknown key"),
])
def test_bad_optimizer_is_exit_2_naming_the_key(tmp_path, capsys, opt, key, words):
    path = make_scenario(tmp_path, None, **{"train.local.optimizer": opt})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert key in err and words in err, err


@pytest.mark.parametrize("name", ["pfedme", "ditto", "scaffold"])
def test_algorithms_without_optimizers_refuse_adam(tmp_path, capsys, name):
    path = make_scenario(tmp_path, None, algorithms=[{"name": name,
                                                      "local": {"optimizer": {"name": "adam"}}}])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "algorithms[0].local.optimizer" in err and name in err and "plain SGD" in err, err
    path = make_scenario(tmp_path / "ok", None, **{"train.local.optimizer": {
        "name": "sgd", "momentum": 0.0}}, algorithms=[{"name": name}])
    assert main(["validate", str(path)]) == 0


def test_report_max_relative_error():
    """Prints the largest relative error of the comparisons above (run with -s)."""
    if MAX_REL:
        print("\nmax relative error vs torch.optim:",
              {k: f"{v:.1e}" for k, v in sorted(MAX_REL.items())})


def test_an_entry_local_optimizer_overrides_train_local(tmp_path):
    """FedProx with adam (entry local:) next to FedAvg with the scenario's plain SGD: FedAvg's
    numbers are those of a run without the entry, FedProx's differ from plain SGD's."""
    algos = [{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1, "label": "adam",
                                  "local": {"optimizer": {"name": "adam", "amsgrad": True}}},
             {"name": "fedprox", "mu": 0.1, "label": "sgd"}]
    path = make_scenario(tmp_path / "e", None, **{"train.rounds": 3, "train.local": LOCAL},
                         algorithms=algos)
    assert main(["run", str(path), "--out", str(tmp_path / "e" / "out")]) == 0
    rc, alone = _run(tmp_path, "f", {"train.rounds": 3, "train.local": LOCAL})
    out = tmp_path / "e" / "out"
    assert (out / "fedavg" / "metrics.csv").read_bytes() == \
        (alone / "fedavg" / "metrics.csv").read_bytes()
    adam = read_csv(out / "adam" / "metrics.csv")
    sgd = read_csv(out / "sgd" / "metrics.csv")
    assert [r["train_loss"] for r in adam] != [r["train_loss"] for r in sgd]


def test_sequential_executor_agrees_with_batched():
    """One client at a time (program.select) carries the optimizer and its state alike."""
    from hierfl.exec.local import SequentialExecutor
    model, start, budgets, plan, full = _problem()
    prog = TermsProgram(model, start, (Prox(0.5, start[0].clone()),),
                        optimizer=Adam(weight_decay=0.01, amsgrad=True, decoupled=True))
    args = (plan, full, torch.from_numpy(budgets), LR, None, 5)
    got = BatchedExecutor().run(prog, *args, measure=False)
    ref = SequentialExecutor().run(prog, *args, measure=False)
    assert len(got.state) == len(ref.state) == 5
    torch.testing.assert_close(got.state[0], ref.state[0], rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- clipping
CLIPS = {
    "norm2-sgd": (Clip(max_norm=0.5), None, lambda p: torch.nn.utils.clip_grad_norm_(p, 0.5),
                  lambda p: torch.optim.SGD(p, lr=LR)),
    "norm-inf-adam": (Clip(max_norm=0.3, norm_type=math.inf), Adam(),
                      lambda p: torch.nn.utils.clip_grad_norm_(p, 0.3, norm_type="inf"),
                      lambda p: torch.optim.Adam(p, lr=LR)),
    "norm1-momentum": (Clip(max_norm=1.0, norm_type=1.0), SGD(momentum=0.9),
                       lambda p: torch.nn.utils.clip_grad_norm_(p, 1.0, norm_type=1.0),
                       lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9)),
    "value-sgd": (Clip(max_value=0.05), None,
                  lambda p: torch.nn.utils.clip_grad_value_(p, 0.05),
                  lambda p: torch.optim.SGD(p, lr=LR)),
}


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_clipping_equals_torch_nn_utils_per_client(name):
    """train.local.clip: each client's gradient clipped as torch.nn.utils clips one client's
    parameters, after the smooth terms' gradients are added, before the optimizer's step."""
    clip, opt, torch_clip, make = CLIPS[name]
    model, start, budgets, plan, full = _problem()
    anchor = start.flip(0).clone()
    prog = TermsProgram(model, start, (Prox(0.3, anchor),), optimizer=opt, grad_clip=clip)
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets), LR, None, 5,
                                measure=False)
    clipped = []

    def counted(params):                            # torch's clip, noting when it bit
        before = params[0].grad.clone()
        torch_clip(params)
        clipped.append(not torch.equal(before, params[0].grad))

    ref = _reference(model, start, budgets, plan, make,
                     lambda k: (Prox(0.3, anchor[k:k + 1]),), counted)
    assert any(clipped)                             # the clip bit somewhere
    rel = _rel(res.state[0], ref, start)
    MAX_REL[f"clip-{name}"] = rel
    assert rel < 1e-5, rel


def test_scenario_with_clipping_runs_and_plain_sgd_is_untouched(tmp_path):
    clip = {"train.rounds": 3, "train.local": {**LOCAL, "clip": {"max_norm": 0.05}}}
    rc, out = _run(tmp_path, "clip", clip)
    assert rc == 0
    rc, plain = _run(tmp_path, "plain", {"train.rounds": 3, "train.local": LOCAL})
    assert rc == 0
    a = read_csv(out / "fedavg" / "metrics.csv")
    b = read_csv(plain / "fedavg" / "metrics.csv")
    assert [r["train_loss"] for r in a] != [r["train_loss"] for r in b]
    assert [r["bytes_up"] for r in a] == [r["bytes_up"] for r in b]   # the same messages


@pytest.mark.parametrize("clip,key,words", [
    ({"max_norm": 1.0, "max_value": 1.0}, "train.local.clip", "one of them"),
    ({"norm_type": 1.0}, "train.local.clip", "one of them"),
    ({"max_value": 1.0, "norm_type": 1.0}, "train.local.clip", "norm_type applies to max_norm"),
    ({"max_norm": 0.0}, "train.local.clip.max_norm", "> 0"),
    ({"max_norm": 1.0, "norm_type": "l2"}, "train.local.clip.norm_type", "'inf'"),
    ({"max_norm": 1.0, "norm_type": -1.0}, "train.local.clip.norm_type", "> 0 or inf"),
])
def test_bad_clip_is_exit_2_naming_the_key(tmp_path, capsys, clip, key, words):
    path = make_scenario(tmp_path, None, **{"train.local.clip": clip})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert key in err and words in err, err


def test_algorithms_without_optimizers_refuse_clipping(tmp_path, capsys):
    path = make_scenario(tmp_path, None, algorithms=[{"name": "pfedme",
                                                      "local": {"clip": {"max_norm": 1.0}}}])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "algorithms[0].local.clip" in err and "pfedme" in err, err


# ----------------------------------------------------------------------------- lr schedules
@pytest.mark.parametrize("sched,make", [
    ({"kind": "step", "gamma": 0.5, "step_size": 3},
     lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
    ({"kind": "exponential", "gamma": 0.9},
     lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)),
    ({"kind": "cosine", "t_max": 7, "eta_min": 0.001},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.001)),
    ({"kind": "cosine"},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10)),
])
def test_round_schedules_equal_torch_schedulers(sched, make):
    """The lr of round t is what torch's scheduler gives after t - 1 steps (one per round)."""
    from hierfl.config.schema import ScheduleSpec
    from hierfl.learn.schedules import round_lr

    spec = ScheduleSpec(**sched)
    o = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    s = make(o)
    for t in range(1, 11):
        want = o.param_groups[0]["lr"]
        assert math.isclose(round_lr(spec, 0.1, t, 10), want, rel_tol=1e-12), (t, want)
        o.step()
        s.step()


def test_warmup_cosine_ramps_then_follows_the_cosine():
    from hierfl.config.schema import ScheduleSpec
    from hierfl.learn.schedules import round_lr

    spec = ScheduleSpec(kind="warmup_cosine", warmup=4, eta_min=0.01)
    lrs = [round_lr(spec, 0.2, t, 10) for t in range(1, 11)]
    assert lrs[:4] == [0.05, 0.1, 0.15000000000000002, 0.2]
    assert lrs[4] == 0.2 and lrs[-1] < lrs[5] < lrs[4]            # cosine from lr, 6 rounds
    assert math.isclose(lrs[-1], 0.01 + 0.19 * (1 + math.cos(math.pi * 5 / 6)) / 2)


def test_exponential_schedule_is_lr_decay_to_the_bit(tmp_path):
    base = {"train.rounds": 3}
    rc, a = _run(tmp_path, "decay", {**base, "train.local": {**LOCAL, "lr_decay": 0.7}})
    rc2, b = _run(tmp_path, "sched", {**base, "train.local": {
        **LOCAL, "lr_schedule": {"kind": "exponential", "gamma": 0.7}}})
    assert rc == rc2 == 0
    assert (a / "fedavg" / "metrics.csv").read_bytes() == (b / "fedavg" / "metrics.csv").read_bytes()


@pytest.mark.parametrize("sched,key,words", [
    ({"kind": "step", "gamma": 0.5}, "train.local.lr_schedule", "needs step_size"),
    ({"kind": "cosine", "gamma": 0.5}, "train.local.lr_schedule", "gamma does not apply"),
    ({"kind": "warmup_cosine"}, "train.local.lr_schedule", "needs warmup"),
    ({"kind": "poly"}, "train.local.lr_schedule.kind", "poly"),
    ({"kind": "exponential", "gamma": 10.0}, "lr_schedule.gamma", "the learning rate reaches"),
])
def test_bad_schedule_is_exit_2_naming_the_key(tmp_path, capsys, sched, key, words):
    path = make_scenario(tmp_path, None, **{"train.local.lr_schedule": sched,
                                            "train.rounds": 50})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert key in err and words in err, err


def test_lr_decay_and_a_schedule_together_are_refused(tmp_path, capsys):
    path = make_scenario(tmp_path, None, **{"train.local.lr_decay": 0.9,
                                            "train.local.lr_schedule": {"kind": "cosine"}})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "train.local" in err and "give lr_decay or lr_schedule, not both" in err, err


# ----------------------------------------------------------------------------- per-step lr
@pytest.mark.parametrize("kind, keys, torch_sched", [
    ("cosine", {"t_max": 9}, lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 9)),
    ("step", {"gamma": 0.5, "step_size": 3},
     lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5)),
    ("exponential", {"gamma": 0.9}, lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.9))])
def test_per_step_schedule_equals_torch_scheduler_stepped_after_every_step(kind, keys,
                                                                          torch_sched):
    """`every: step`: step i of a round with clock offset c has torch's lr after c + i
    scheduler steps; here round 2 of 17-step rounds (offset 17), momentum SGD per client."""
    from hierfl.config.schema import ScheduleSpec
    from hierfl.learn.schedules import StepLR
    model, start, budgets, plan, full = _problem()
    spec = ScheduleSpec(kind=kind, every="step", **keys)
    prog = TermsProgram(model, start, optimizer=SGD(momentum=0.9))
    res = BatchedExecutor().run(prog, plan, full, torch.from_numpy(budgets),
                                StepLR(spec, LR, 17, 40), None, 5, measure=False)

    def make(params):
        opt = torch.optim.SGD(params, lr=LR, momentum=0.9)
        sched = torch_sched(opt)
        for _ in range(17):                     # the clock at the round's first step
            opt.step()
            sched.step()
        opt.state.clear()                       # (state: reset: fresh momentum)
        orig = opt.step

        def step(*a, **k):
            out = orig(*a, **k)
            sched.step()
            return out
        opt.step = step
        return opt
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # stepping the scheduler without gradients
        ref = _reference(model, start, budgets, plan, make)
    assert _rel(res.state[0], ref, start) < 1e-5


def test_per_step_schedule_runs_and_needs_fixed_steps(tmp_path, capsys):
    sched = {"kind": "warmup_cosine", "warmup": 4, "every": "step"}
    rc, _ = _run(tmp_path, "ok", {"train.rounds": 3, "train.local": {
        **LOCAL, "lr_schedule": sched, "optimizer": {"name": "sgd", "momentum": 0.9}}})
    assert rc == 0
    path = make_scenario(tmp_path / "bad", None, **{"train.local": {
        "epochs": 1, "lr": 0.01, "batch_size": 10, "lr_schedule": sched}})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "every: step needs steps" in err and "Traceback" not in err
