"""One declaration per data set (hierfl/data/registry.py): each built-in's spec holds only the
keys it reads, a set declared anywhere with `declare_dataset` is accepted by `hierfl validate`,
listed in the generated reference and loaded like a built-in, and a taken name is refused."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from datasets_util import scenario, validate_exit2 as _exit2
from hierfl.cli import main
from hierfl.config.fields import positive, spec
from hierfl.config.schema import HeldOut, Partitioned
from hierfl.data import load_arrays
from hierfl.data.federated import FederatedData
from hierfl.data.registry import DATASETS, DatasetFacts, Shape, declare_dataset, \
    register_dataset
from hierfl.scenario.load import load

# the keys each built-in reads, as docs/howto/datasets.md lists them
KEYS = {"synthetic": {"alpha", "beta", "dim", "classes", "samples", "max_samples",
                      "test_fraction"},
        "synthetic_iid": {"dim", "classes", "samples", "max_samples", "test_fraction"},
        "digits": {"partition", "shift", "test_fraction"}, "npz": {"path", "test_fraction"},
        "mnist": {"root", "partition", "shift"}, "fashion_mnist": {"root", "partition", "shift"},
        "cifar10": {"root", "partition", "shift"},
        "cifar100": {"root", "partition", "shift", "label"},
        "leaf": {"path", "users"},
        "image_folder": {"root", "test", "transform", "partition", "shift", "test_fraction"}}


@pytest.fixture(autouse=True)
def clean_registry():
    saved = DATASETS.snapshot()
    yield
    DATASETS.restore(saved)


def test_each_builtin_declares_a_spec_of_only_its_keys():
    assert DATASETS.builtin_names() == sorted(KEYS)
    for name, keys in KEYS.items():
        cls = DATASETS.spec(name)
        assert {f.name for f in dataclasses.fields(cls)} == {"name", *keys}, name
        assert cls.__dataclass_params__.frozen and DATASETS.declaration(name).summary, name
        assert issubclass(cls, Partitioned) == ("partition" in keys), name
        assert issubclass(cls, HeldOut) == ("test_fraction" in keys), name
    assert DATASETS.spec("mnist") is DATASETS.spec("fashion_mnist")      # the same keys


@pytest.mark.parametrize("data,needles", [
    ("{name: cifar10, label: coarse}", ("data.label = 'coarse': cifar10 does not use label:",
                                        "(it is for cifar100)")),
    ("{name: mnist, path: x}", ("data.path = 'x': mnist reads the folder root:, not path:",)),
    ("{name: digits, partitions: {kind: iid}}", (
        "data.partitions = {'kind': 'iid'}: unknown key for data set 'digits' (did you mean "
        "'partition'?); allowed: name, partition, shift, test_fraction",)),
    ("{name: leaf, path: lf, options: {a: 1}}", ("data.options = {'a': 1}: leaf is a built-in "
                                                  "data set: options: are for data sets",)),
])
def test_a_key_of_another_set_or_of_none_is_refused_naming_the_set(tmp_path, capsys, data,
                                                                   needles):
    err = _exit2(capsys, scenario(str(tmp_path), data, 4), "1 problem", *needles)
    assert "s.yaml:3:" in err


def test_scenario_data_is_the_sets_own_spec(tmp_path):
    sc = load(scenario(str(tmp_path), "{name: synthetic_iid, dim: 4, classes: 3}", 4))
    assert type(sc.data) is DATASETS.spec("synthetic_iid") and sc.data.dim == 4
    assert not hasattr(sc.data, "alpha") and not hasattr(sc.data, "root")
    sc = load(scenario(str(tmp_path), "{name: digits, partition: {kind: shards}}", 4))
    assert type(sc.data).__name__ == "DigitsSpec" and sc.data.partition.kind == "shards"


# ----------------------------------------------------------------- a set declared at test time
def load_toy(sc, n_clients: int) -> FederatedData:
    """The toy set's loader: `rows` rows of `dim` features per client, label = client % 2."""
    d = sc.data
    g = np.random.default_rng(sc.seed)
    train = [(g.normal(size=(d.rows, 3)).astype(np.float32), np.full(d.rows, k % 2))
             for k in range(n_clients)]
    test = [(x[:1], y[:1]) for x, y in train]
    return FederatedData.from_arrays(train, test, 2)


def _declare_toy() -> type:
    @declare_dataset("toy", code=f"{__name__}:load_toy", facts=DatasetFacts(
        shape=lambda s, n: Shape(s.rows, 3, 2, s.rows)))
    @dataclass_frozen
    class ToySpec(HeldOut):
        """A toy set of a test: `rows` random rows per client."""

        rows: int = spec(8, "rows per client", check=positive)
    return ToySpec


def dataclass_frozen(cls: type) -> type:
    return dataclasses.dataclass(frozen=True)(cls)


def test_a_set_declared_with_the_registry_is_validated_documented_and_loaded(tmp_path, capsys):
    cls = _declare_toy()
    assert "toy" in DATASETS and DATASETS.spec("toy") is cls and not DATASETS.is_builtin("toy")
    path = scenario(str(tmp_path), "{name: toy, rows: 6}", 4)
    assert main(["validate", path]) == 0
    assert "data: toy, 24 training rows (6..6 per client), 4 test rows, dim 3" in \
        capsys.readouterr().out
    sc = load(path)
    assert sc.data == cls(name="toy", rows=6)
    d = load_arrays(sc, 4)
    assert d.counts.tolist() == [6, 6, 6, 6] and d.n_classes == 2
    _exit2(capsys, scenario(str(tmp_path), "{name: toy, rows: 0}", 4), "data.rows = 0: must be > 0")
    _exit2(capsys, scenario(str(tmp_path), "{name: toy, root: r}", 4),
           "data.root = 'r': toy does not use root: (it is for cifar10,")
    _exit2(capsys, scenario(str(tmp_path), "{name: toy, rowz: 5}", 4),
           "data.rowz = 5: unknown key for data set 'toy' (did you mean 'rows'?)")
    from hierfl.cli.docs import generate

    page = generate()
    assert "### data set `toy`" in page and "| `data.rows` | integer | `8` | rows per client |" \
        in page and "A toy set of a test" in page
    DATASETS.restore({k: v for k, v in DATASETS.snapshot().items() if k != "toy"})
    assert "toy" not in generate()


def test_a_taken_name_is_refused_naming_who_has_it():
    def other(n_clients, seed):
        return []

    with pytest.raises(ValueError, match="data set name 'digits' is taken by "
                       "hierfl.data.real:load_digits"):
        register_dataset("digits")(other)
    register_dataset("mine")(other)
    register_dataset("mine")(other)                     # the same loader again: a no-op

    def another(n_clients, seed):
        return []
    with pytest.raises(ValueError, match="'mine' is taken by .*test_data_decl.*other"):
        register_dataset("mine")(another)
    _declare_toy()
    _declare_toy()                                      # the same declaration again
    with pytest.raises(ValueError, match="'toy' is taken by"):
        declare_dataset("toy", code="elsewhere:load")(DATASETS.spec("toy"))


def test_fetch_reads_the_declared_recipes():
    from hierfl.data import fetch

    assert fetch.names() == ("cifar10", "cifar100", "fashion_mnist", "mnist", "leaf")
    assert fetch.NAMES == fetch.names() and set(fetch.SOURCES) == set(fetch.names()[:-1])
    assert fetch.SOURCES["mnist"] == DATASETS.facts("mnist").fetch
    assert "preprocess.sh" in fetch.LEAF_HOWTO and fetch.howto("mnist") is None
