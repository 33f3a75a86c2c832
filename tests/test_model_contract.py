"""A model factory breaking its contract (returning no nn.Module, a module that fails on one
input or gives other than one score per class, a name that is taken) and char_lstm's widths:
each a validation error naming the model key, exit 2, no traceback."""
from __future__ import annotations

import types

import pytest
from torch import nn

import hierfl
from conftest import make_scenario, scenario_doc
from hierfl import cli, plugins
from hierfl.models.registry import MODELS

FACTORIES = '''\
import math
from torch import nn
import hierfl

@hierfl.register_model("text")
def text(input_shape, num_classes):
    return "a string"

@hierfl.register_model("wrong_in")
def wrong_in(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape) + 2, num_classes))

@hierfl.register_model("wrong_out")
def wrong_out(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes + 3))
'''

TOPO = {"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.0e8}},
        "clients": {"count": 6, "compute_flops": 1.0e9,
                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2.0e6}}}


@pytest.fixture(autouse=True)
def clean_registries():
    saved, loaded = MODELS.snapshot(), dict(plugins._LOADED)
    plugins._LOADED.clear()
    yield
    MODELS.restore(saved)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


def _validate(tmp_path, capsys, model, plugin=FACTORIES, data=None):
    (tmp_path / "factories.py").write_text(plugin)
    doc = scenario_doc(name="m", seed=2, topology=TOPO, model=model, plugins=["factories.py"],
                       data=data or {"name": "synthetic", "dim": 5, "classes": 3,
                                     "samples": 30},
                       train={"rounds": 1, "clients_per_round": 2})
    rc = cli.main(["validate", make_scenario(tmp_path, doc, name="m")])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("name, says", [
    ("text", "model.name = 'text': model factory 'text' returned str, not a torch.nn.Module"),
    ("wrong_in", "model.name = 'wrong_in': model 'wrong_in' fails on one input of shape "
                 "(1, 5): RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    ("wrong_out", "model.name = 'wrong_out': model 'wrong_out' gives outputs of shape (1, 6) "
                  "for one input, not (1, 3): one score per class"),
])
def test_a_factory_breaking_its_contract_is_a_validation_error(tmp_path, capsys, name, says):
    rc, err = _validate(tmp_path, capsys, {"name": name})
    assert rc == 2 and "Traceback" not in err
    assert says in err


def test_a_model_name_is_registered_once(tmp_path, capsys):
    rc, err = _validate(tmp_path, capsys, {"name": "logreg"}, plugin=(
        "import hierfl\nfrom torch import nn\n\n@hierfl.register_model('cnn')\n"
        "def cnn(input_shape, num_classes):\n    return nn.Linear(5, num_classes)\n"))
    assert rc == 2 and "Traceback" not in err
    assert "factories.py:4" in err and "model name 'cnn' is taken by hierfl.models.cnn.net:cnn" \
        "; choose another name" in err

    def factory(input_shape, num_classes):
        return nn.Linear(5, num_classes)
    hierfl.register_model("_once")(factory)
    hierfl.register_model("_once")(factory)                     # the same factory again: fine

    again = types.FunctionType(factory.__code__, factory.__globals__)   # a new function from
    hierfl.register_model("_once")(again)                       # the same line: a re-import
    with pytest.raises(ValueError, match="'_once' is taken by .*test_model_contract"):
        hierfl.register_model("_once")(lambda input_shape, num_classes: None)
    hierfl.register_model("cnn")(MODELS["cnn"])           # the built-in, imported


@pytest.mark.parametrize("model, says", [
    ({"hidden": [16, 32]}, "model.hidden = [16, 32]: char_lstm layers share one width: give "
                           "equal widths, one per layer (e.g. [256, 256])"),
    ({"hidden": [16], "layers": 3}, "model.layers = 3: hidden [16] gives 1 layer(s): give "
                                    "layers or one width per layer, not both"),
])
def test_char_lstm_widths(tmp_path, capsys, model, says):
    data = {"name": "npz", "path": "text.npz"}
    import numpy as np
    g = np.random.default_rng(0)
    arrays = {}
    for k in range(6):
        arrays[f"x_{k}"] = g.integers(0, 10, (4, 12))
        arrays[f"y_{k}"] = g.integers(0, 10, 4)
    np.savez(tmp_path / "text.npz", **arrays)
    rc, err = _validate(tmp_path, capsys, {"name": "char_lstm", "embed": 4, **model},
                        data=data)
    assert rc == 2 and "Traceback" not in err
    assert says in err


def _npz(tmp_path, x_of, y_hi: int, test: bool = True) -> dict:
    import numpy as np
    g = np.random.default_rng(0)
    arrays = {}
    for k in range(6):
        arrays[f"x_{k}"], arrays[f"y_{k}"] = x_of(g, 4), g.integers(0, y_hi, 4)
        if test and k == 0:
            arrays["x_test_0"], arrays["y_test_0"] = x_of(g, 0), g.integers(0, y_hi, 0)
    np.savez(tmp_path / "rows.npz", **arrays)
    return {"name": "npz", "path": "rows.npz"}


def test_char_lstm_embeds_the_datas_vocabulary_not_its_classes(tmp_path, capsys):
    """Index rows 0..199 with 5 classes: the embedding was sized by the classes (an
    IndexError in the first step); it is the data's vocabulary, the output one score per
    class. One client's empty test set (0 rows) is read (it was a reshape error)."""
    import numpy as np
    from hierfl.config.schema import ModelSpec
    from hierfl.models.registry import build_model
    data = _npz(tmp_path, lambda g, n: g.integers(0, 200, (n, 12)), 5)
    rc, err = _validate(tmp_path, capsys, {"name": "char_lstm", "embed": 4, "hidden": [8]},
                        data=data)
    assert rc == 0, err
    model = build_model(ModelSpec(name="char_lstm", options={"embed": 4, "hidden": 8}),
                        12, 5, 5, (12,), vocab=200)
    assert model.module.embed.num_embeddings == 200 and model.module.out.out_features == 5
    rc, err = _validate(tmp_path, capsys, {"name": "char_lstm", "embed": 4, "hidden": [8],
                                           "vocab": 100}, data=data)
    assert rc == 2 and "model.vocab = 100: the rows of npz hold indices up to 199" in err
    assert np.load(tmp_path / "rows.npz")["x_test_0"].shape == (0, 12)


@pytest.mark.parametrize("model, rows, says", [
    # floats in [0, 1) were cast to index 0 (it trained on nothing, exit 0)
    ({"name": "char_lstm", "embed": 4, "hidden": [8]}, "uniform",
     "model.name = 'char_lstm': char_lstm embeds integer indices; the rows of npz are "
     "features or pixels"),
    ({"name": "char_lstm", "embed": 4, "hidden": [8]}, "synthetic",
     "the rows of synthetic are features or pixels"),
])
def test_an_embedding_model_given_features_is_refused(tmp_path, capsys, model, rows, says):
    data = {"name": "synthetic", "dim": 5, "classes": 3, "samples": 30} if rows == "synthetic" \
        else _npz(tmp_path, lambda g, n: g.random((n, 12)), 3)
    rc, err = _validate(tmp_path, capsys, model, data=data)
    assert rc == 2 and says in err and "Traceback" not in err, err
