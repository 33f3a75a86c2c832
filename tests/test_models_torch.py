"""Models built from torch.nn.Modules (CNN, char-LSTM, plugins): the stacked TorchModel against a
plain nn.Module forward/backward per client, FLOPs against closed forms, seeded initialisation,
the registry and its scenario keys."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import yaml
from torch import nn

import hierfl
from hierfl.config.errors import ScenarioError
from hierfl.config.schema import ModelSpec
from hierfl.models.registry import MODELS, ModelOptionError, build_model
from hierfl.models.torch_model import TorchModel
from hierfl.scenario.load import load


def _spec(name: str, **options) -> ModelSpec:
    return ModelSpec(name=name, options=options)


def _reference(model: TorchModel, w: torch.Tensor, x, y, m):
    """Client by client: load the row into a copy of the module's parameters, run the module
    on (B, *input_shape), cross-entropy weighted by m, backward into .grad."""
    losses, grads, outs = [], [], []
    for k in range(w.shape[0]):
        with torch.no_grad():
            for p, v in zip(model.module.parameters(), w[k].split(model.sizes)):
                p.copy_(v.view(p.shape))              # (vector_to_parameters would alias w)
        model.module.zero_grad()
        z = model.module(x[k].reshape(x.shape[1], *model.input_shape))
        loss = (nn.functional.cross_entropy(z, y[k], reduction="none") * m[k]).sum()
        loss.backward()
        losses.append(loss.detach())
        outs.append(z.detach())
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.module.parameters()]))
    return torch.stack(losses), torch.stack(grads), torch.stack(outs)


CASES = [("cnn", {"channels": [3, 5], "dense": 7}, (1, 8, 8), 10, "vmap"),
         ("cnn", {"channels": [3, 5], "dense": 7}, (8, 8), 10, "vmap"),
         ("cnn", {"channels": [3, 5], "dense": 7}, (64,), 10, "loop"),
         ("cnn", {"channels": [3, 5], "dense": 7}, (1, 8, 8), 10, "loop"),
         ("cnn", {"channels": [4], "dense": 0, "kernel": 3}, (3, 6, 6), 4, "vmap"),
         ("char_lstm", {"embed": 3, "hidden": [6, 6]}, (7,), 9, "loop"),
         ("char_lstm", {"embed": 3, "hidden": [6]}, (7,), 9, "vmap")]


@pytest.mark.filterwarnings("ignore:There is a performance drop")   # vmap over nn.LSTM
@pytest.mark.parametrize("name,options,shape,classes,batching", CASES)
def test_torch_model_matches_module_per_client(name, options, shape, classes, batching):
    g = torch.Generator().manual_seed(4)
    model = build_model(_spec(name, **options), math.prod(shape), classes, classes, shape)
    model.batching = batching
    c, b, d = 3, 6, math.prod(shape)
    w = torch.stack([model.init(g) for _ in range(c)])
    if name == "char_lstm":
        x = torch.randint(0, classes, (c, b, d), generator=g)
    else:
        x = torch.randn(c, b, d, generator=g)
    y = torch.randint(0, classes, (c, b), generator=g)
    m = torch.rand(c, b, generator=g)
    m[:, -2:] = 0.0                                          # padding rows
    m = m / m.sum(1, keepdim=True)
    loss, grad = model.loss_grad(w, x, y, m)
    ref_loss, ref_grad, z = _reference(model, w, x, y, m)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-6)
    assert float(grad.abs().max()) > 1e-3
    torch.testing.assert_close(model.loss(w, x, y, m), ref_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(model.grad(w, x, y, m), grad, rtol=0, atol=0)
    torch.testing.assert_close(model.forward(w, x), z)
    assert model.correct(w, x, y).tolist() == (z.argmax(-1) == y).float().tolist()


def test_conv_flops_closed_form():
    """One 5x5 'same' convolution: 2 Cin Cout k k Hout Wout; a dense layer 2 n_in n_out."""
    @hierfl.register_model("_conv_only")
    def conv_only(input_shape, num_classes, cout: int = 6):
        return nn.Sequential(nn.Conv2d(input_shape[0], cout, 5, padding=2), nn.Flatten())

    try:
        model = build_model(_spec("_conv_only"), 3 * 9 * 7, 2, 2, (3, 9, 7))
        assert model.fwd_flops == 2 * 3 * 6 * 5 * 5 * 9 * 7
        assert model.n_params == 6 * 3 * 25 + 6
    finally:
        del MODELS["_conv_only"]
    cnn = build_model(_spec("cnn"), 784, 62, 62, (1, 28, 28))    # the FedAvg CNN on FEMNIST
    assert cnn.n_params == 1_690_046
    assert cnn.fwd_flops == 2 * (25 * 32 * 28 * 28 + 25 * 32 * 64 * 14 * 14 + 3136 * 512
                                 + 512 * 62)
    lstm = build_model(_spec("char_lstm"), 80, 80, 80, (80,))    # LEAF's Shakespeare model
    assert lstm.n_params == 819_920
    per_step = 2 * 4 * 256 * ((8 + 256) + (256 + 256))           # two layers' gate products
    assert lstm.fwd_flops == 80 * per_step + 2 * 256 * 80


def test_seeded_init_is_reproducible_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a = build_model(_spec("cnn", channels=[4, 8], dense=16), 64, 10, 10)
    w1 = a.init(torch.Generator().manual_seed(7))
    w2 = build_model(_spec("cnn", channels=[4, 8], dense=16), 64, 10, 10).init(
        torch.Generator().manual_seed(7))
    w3 = a.init(torch.Generator().manual_seed(8))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(w1, w2) and not torch.equal(w1, w3)
    # torch's default rule: conv1 weights uniform(+-1/sqrt(fan_in)), fan_in = 1 x 5 x 5
    conv1 = w1[:4 * 25]
    assert float(conv1.abs().max()) <= 1 / 5 and float(conv1.abs().max()) > 0.15
    assert a.init(torch.Generator().manual_seed(7), zeros=True).abs().sum() == 0


def test_plugin_and_option_errors(tmp_path):
    @hierfl.register_model("_tiny")
    def tiny(input_shape, num_classes, width: int = 4):
        if width > 64:
            raise ModelOptionError("width", "width must be at most 64")
        return nn.Sequential(nn.Linear(math.prod(input_shape), width), nn.Tanh(),
                             nn.Linear(width, num_classes))

    def scenario(model, dim=5):
        doc = {"name": "plug", "topology": {"edges": {"count": 1},
                                            "clients": {"count": 3, "compute_flops": 1e9}},
               "data": {"name": "synthetic", "dim": dim, "classes": 3,
                        "samples": {"dist": "constant", "value": 12}},
               "model": model, "train": {"rounds": 1, "clients_per_round": 2},
               "algorithms": [{"name": "fedavg"}]}
        path = tmp_path / "plug.yaml"
        path.write_text(yaml.safe_dump(doc))
        return load(str(path), out=str(tmp_path / "out"))

    try:
        sc = scenario({"name": "_tiny", "width": 6})
        world = hierfl.build_world(sc)
        assert world.model.n_params == 5 * 6 + 6 + 6 * 3 + 3
        with pytest.raises(ScenarioError, match=r"model.widht = 6: unknown key for model "
                           r"'_tiny' \(did you mean 'width'\?\)"):
            scenario({"name": "_tiny", "widht": 6})
        with pytest.raises(ScenarioError, match="model.hidden"):
            scenario({"name": "_tiny", "hidden": [3]})
        with pytest.raises(ScenarioError, match=r"model.name = '_tyni': unknown model "
                           r"\(did you mean '_tiny'\?\)"):
            scenario({"name": "_tyni"})
        with pytest.raises(ScenarioError, match="model.width = 100: width must be at most 64"):
            hierfl.build_world(scenario({"name": "_tiny", "width": 100}))
        with pytest.raises(ScenarioError, match="model.channels"):
            hierfl.build_world(scenario({"name": "cnn", "channels": [4, 4, 4, 4]}, dim=49))
    finally:
        del MODELS["_tiny"]


def test_builtin_models_keep_their_stacked_path():
    from hierfl.models.functional import Model
    for name, hidden in (("logreg", None), ("mlp", [8]), ("mlp", None)):
        model = build_model(ModelSpec(name=name, hidden=hidden), 6, 3, 3)
        assert type(model) is Model
        widths = [6, *(hidden or ([200, 200] if name == "mlp" else [])), 3]
        assert [(l.n_in, l.n_out) for l in model.layers] == list(zip(widths[:-1], widths[1:]))
    lin = build_model(ModelSpec(name="linear", bias=False), 6, 2, 0)
    assert lin.task == "regression" and lin.n_params == 12
    np.testing.assert_array_equal(lin.init(torch.Generator().manual_seed(1)).shape, (12,))


@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_rows_in_chunks_equal_one_pass(monkeypatch, batching):
    """Large batches (full local data, evaluation) run in chunks of rows that bound the
    activations: the same losses, gradients and outputs as one pass."""
    import hierfl.models.torch_model as tm

    model = build_model(_spec("cnn", channels=[2, 3], dense=5), 64, 4, 4)
    model.batching = batching
    g = torch.Generator().manual_seed(2)
    w = torch.stack([model.init(g) for _ in range(2)])
    x, y = torch.randn(2, 11, 64, generator=g), torch.randint(0, 4, (2, 11), generator=g)
    m = torch.full((2, 11), 1 / 11)
    one = model.loss_grad(w, x, y, m), model.forward(w, x)
    monkeypatch.setattr(tm, "ACT_BUDGET", 3 * model.act_per_sample * 2)   # 3 rows (6 / 2)
    assert model._chunk(2) == 3
    many = model.loss_grad(w, x, y, m), model.forward(w, x)
    torch.testing.assert_close(many[0][0], one[0][0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(many[0][1], one[0][1], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(many[1], one[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("batching", ["vmap", "loop"])
@pytest.mark.parametrize("twice", ["layer", "weight"])
def test_a_layer_used_twice_survives_the_functional_call(batching, twice):
    """A module holding one layer at two places (its weight one parameter): torch's
    functional_call with tie_weights swaps that one slot twice and puts back the swapped-in
    tensor, not the module's own, so that the module used afterwards ran on a stray tensor
    (vmap: "your tensor may have escaped"; traced forward: a client's old row). The gradient
    of both uses is every path's, and the module keeps its parameters. `twice`: the layer
    held at two places, or its weight registered in a second layer (two slots, one tensor)."""
    torch.manual_seed(0)
    shared, other = nn.Linear(4, 4), nn.Linear(4, 4)
    if twice == "weight":
        other.weight = shared.weight
    model = TorchModel(nn.Sequential(shared, nn.Tanh(), shared if twice == "layer" else other),
                       (4,), "regression", "m", batching=batching)
    own = list(model.module.parameters())
    g = torch.Generator().manual_seed(1)
    w = model.init(g).expand(3, -1) + 0.1 * torch.randn(3, model.n_params, generator=g)
    x, y, m = torch.randn(3, 5, 4, generator=g), torch.randn(3, 5, 4, generator=g), \
        torch.ones(3, 5)
    wt = w.clone().requires_grad_()
    traced = model.forward(wt, x)                    # functional_call on one client's views
    _, g_vmap = model._loss_grad_vmap(w, x, y, m, functorch=True)
    assert all(a is b for a, b in zip(model.module.parameters(), own))
    assert shared.weight is own[0] and model.module[2].weight is own[0]
    loss, g_loop = model.loss_grad_autograd(w, x, y, m)
    assert torch.allclose(g_vmap, g_loop, rtol=1e-5, atol=1e-6)
    assert torch.allclose(model.forward(w, x), traced.detach(), rtol=1e-6, atol=1e-7)
    ref = (model.sample_loss(traced, y) * m).sum(1).sum()
    assert torch.allclose(torch.autograd.grad(ref, wt)[0], g_loop, rtol=1e-5, atol=1e-6)


def test_declared_model_options_are_the_factorys():
    """A built-in model declares its options (with docs) without importing torch; they are
    exactly the keyword options of the factory it names."""
    from hierfl.config.fields import keyword_options
    from hierfl.models.registry import model_facts

    declared = [n for n in MODELS if MODELS.declaration(n).code]
    assert {"cnn", "char_lstm"} <= set(declared)
    for name in declared:
        opts = model_facts(name).options
        assert opts and all(doc for doc in opts.values()), name
        assert list(opts) == keyword_options(MODELS[name], skip=2), name
