"""The benchmark data sets read from files in their real formats, written here in temporary
folders (tests/datasets_util.py): MNIST-like IDX (scikit-learn's digits padded to 28 x 28),
CIFAR-10/100 binary records, LEAF JSON (FEMNIST, Shakespeare). The loaded arrays must equal what
was written, pixel for pixel, in the clients' partition; uint8 rows must give the same batches
and metrics as the same rows stored as float x / 255; a run must learn; every malformed or
missing file must exit 2 naming the file, with no traceback. Nothing is downloaded."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch

from datasets_util import (digits_28, femnist_users, leaf_doc, scenario, shakespeare_users,
                           validate_exit2 as _exit2, write_cifar_set, write_leaf, write_mnist)
from hierfl import seeding
from hierfl.cli import main
from hierfl.config.schema import PartitionSpec
from hierfl.data.registry import data_spec
from hierfl.data import load_data
from hierfl.data.federated import FederatedData
from hierfl.data.images import deal_test_rows
from hierfl.data.leaf import ALL_LETTERS, load as load_leaf
from hierfl.data.real import partition
from hierfl.learn.batches import full_plan, minibatch_plan
from hierfl.learn.evaluate import global_metrics
from hierfl.models.functional import build_model
from hierfl.config.schema import ModelSpec
from hierfl.scenario.load import load


def _data(path: str) -> FederatedData:
    sc = load(path)
    return load_data(sc, sc.topology.clients.count)


# ----------------------------------------------------------------------------- IDX
@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx_pixels_labels_and_partition(tmp_path, gz):
    files = write_mnist(str(tmp_path / "mn"), gz=gz)
    kind = "{kind: dirichlet, alpha: 0.5}"
    d = _data(scenario(str(tmp_path), f"{{name: mnist, root: mn, partition: {kind}}}", 6))
    x, y = files["train-images-idx3-ubyte"], files["train-labels-idx1-ubyte"]
    xt, yt = files["t10k-images-idx3-ubyte"], files["t10k-labels-idx1-ubyte"]
    assert d.x.dtype == torch.uint8 and d.input_shape == (1, 28, 28) and d.dim == 784
    assert d.n_classes == 10
    parts = partition(y.astype(np.int64), 6, PartitionSpec("dirichlet", 0.5),
                      seeding.rng(0, "data/partition"))
    for k, rows in enumerate(parts):            # client k holds exactly its partition's images
        lo, hi = d.offsets[k], d.offsets[k + 1]
        assert np.array_equal(d.x[lo:hi].numpy(), x[rows].reshape(len(rows), 784))
        assert np.array_equal(d.y[lo:hi].numpy(), y[rows])
    # the given test set, whole: every test image once, with its label
    got = np.concatenate([d.x_test.numpy(), d.y_test.numpy()[:, None]], axis=1)
    want = np.concatenate([xt.reshape(len(xt), 784), yt[:, None]], axis=1)
    assert np.array_equal(got[np.lexsort(got.T)], want[np.lexsort(want.T)])


def test_test_rows_follow_each_clients_label_mix():
    # client 0 trains on labels 0,0,0,1 and client 1 on 0,1,1,1; four test rows of each class:
    # class 0 is cut at floor(3/4 * 4) = 3, class 1 at floor(1/4 * 4) = 1
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1])
    parts = [np.arange(4), np.arange(4, 8)]
    yt = np.array([0, 1] * 4)
    tp = deal_test_rows(parts, y, yt, 2, np.random.default_rng(0))
    assert [np.bincount(yt[p], minlength=2).tolist() for p in tp] == [[3, 1], [1, 3]]
    assert sorted(np.concatenate(tp).tolist()) == list(range(8))


def test_uint8_rows_give_the_float_batches_and_metrics(tmp_path):
    write_mnist(str(tmp_path / "mn"))
    d = _data(scenario(str(tmp_path), "{name: mnist, root: mn}", 4))
    f = FederatedData(d.x.float() / 255, d.y, d.offsets, d.x_test.float() / 255, d.y_test,
                      d.test_offsets, d.n_classes, d.input_shape)
    clients, steps = np.arange(4), np.full(4, 3)
    for a, b in ((minibatch_plan(d.offsets, clients, 8, steps, 0, 1, 0, d.x, d.y),
                  minibatch_plan(f.offsets, clients, 8, steps, 0, 1, 0, f.x, f.y)),
                 (full_plan(d.offsets, clients, d.x, d.y), full_plan(f.offsets, clients, f.x, f.y))):
        for got, want in ((a.at(1), b.at(1)), (a.span(0, 2), b.span(0, 2))):
            assert got.x.dtype == torch.float32 and got.m.dtype == torch.float32
            assert torch.equal(got.x, want.x) and torch.equal(got.m, want.m)
    model = build_model(ModelSpec("logreg"), d.dim, d.out_dim, d.n_classes)
    w = model.init(seeding.torch_gen(0, "model-init"))
    assert global_metrics(model, w, d) == global_metrics(model, w, f)


def test_mnist_run_learns(tmp_path, capsys):
    write_mnist(str(tmp_path / "mn"))
    path = scenario(str(tmp_path), "{name: mnist, root: mn}", 6, rounds=6,
                    train=", eval_every: 2")    # unmeasured rounds (no full batch) too
    assert main(["run", path, "--quiet", "--no-report"]) == 0
    rows = np.genfromtxt(tmp_path / "out" / "fedavg" / "metrics.csv", delimiter=",",
                         names=True)
    assert rows["test_acc"][-1] > rows["test_acc"][0] + 0.3
    assert rows["train_loss"][-1] < rows["train_loss"][0]


# ----------------------------------------------------------------------------- CIFAR
@pytest.mark.parametrize("name,label,subdir", [("cifar10", "fine", ""),
                                               ("cifar10", "fine", "cifar-10-batches-bin"),
                                               ("cifar100", "fine", ""),
                                               ("cifar100", "coarse", "")])
def test_cifar_records_pixel_for_pixel(tmp_path, name, label, subdir):
    files = write_cifar_set(str(tmp_path / "c" / subdir), name)
    given = f", label: {label}" if name == "cifar100" else ""     # cifar10 has one label
    d = _data(scenario(str(tmp_path), f"{{name: {name}, root: c{given}}}", 4))
    train = [f for f in files if f not in ("test_batch.bin", "test.bin")]
    lab = np.concatenate([files[f][0] for f in train])
    pix = np.concatenate([files[f][1] for f in train]).reshape(-1, 3072)
    y = lab if lab.ndim == 1 else lab[:, 0 if label == "coarse" else 1]
    assert d.x.dtype == torch.uint8 and d.input_shape == (3, 32, 32)
    assert d.n_classes == {"cifar10": 10, "fine": 100, "coarse": 20}[
        "cifar10" if name == "cifar10" else label]
    # record i's bytes 1024..2047 are its green plane: row 5 of green = pixels 1024+160..
    assert np.array_equal(files[train[0]][1][0, 1, 5], pix[0, 1024 + 160:1024 + 192])
    parts = partition(y.astype(np.int64), 4, PartitionSpec(), seeding.rng(0, "data/partition"))
    for k, rows in enumerate(parts):
        lo, hi = d.offsets[k], d.offsets[k + 1]
        assert np.array_equal(d.x[lo:hi].numpy(), pix[rows])
        assert np.array_equal(d.y[lo:hi].numpy(), y[rows])
    assert len(d.x_test) == len(files["test_batch.bin" if name == "cifar10" else "test.bin"][0])


# ----------------------------------------------------------------------------- LEAF
def _femnist(tmp_path, users=(5, 4)) -> tuple[dict, dict]:
    train = {**femnist_users(users[0]), **femnist_users(users[1], 1, prefix="g")}
    test = {**femnist_users(users[0], 2, (2, 4)), **femnist_users(users[1], 3, (2, 4), "g")}
    names = list(train)
    write_leaf(str(tmp_path / "fem"),
               [leaf_doc({u: train[u] for u in names[:users[0]]}),
                leaf_doc({u: train[u] for u in names[users[0]:]})],
               [leaf_doc(test)])
    return train, test


@pytest.mark.parametrize("n_users", [6, 9])
def test_femnist_one_sampled_user_per_client(tmp_path, n_users):
    train, test = _femnist(tmp_path)
    d = _data(scenario(str(tmp_path), f"{{name: leaf, path: fem, users: {n_users}}}", 6))
    assert d.x.dtype == torch.uint8 and d.input_shape == (1, 28, 28) and d.n_classes == 62
    index = list(train)                         # file order: part_0's users, then part_1's
    pick = seeding.rng(0, "data/leaf/users").permutation(len(index))[:n_users]
    chosen = [index[i] for i in pick]
    for k in range(6):
        users = chosen[k::6]                    # dealt round-robin
        x = np.concatenate([np.rint(np.array(train[u][0]) * 255) for u in users])
        y = np.concatenate([train[u][1] for u in users])
        lo, hi = d.offsets[k], d.offsets[k + 1]
        assert np.array_equal(d.x[lo:hi].numpy(), x.astype(np.uint8))
        assert np.array_equal(d.y[lo:hi].numpy(), y)
        tlo, thi = d.test_offsets[k], d.test_offsets[k + 1]
        assert np.array_equal(d.y_test[tlo:thi].numpy(),
                              np.concatenate([test[u][1] for u in users]))


def test_femnist_run_and_users_below_clients(tmp_path, capsys):
    _femnist(tmp_path)
    path = scenario(str(tmp_path), "{name: leaf, path: fem}", 6, rounds=2)
    assert main(["run", path, "--quiet"]) == 0
    capsys.readouterr()
    path = scenario(str(tmp_path), "{name: leaf, path: fem, users: 4}", 6)
    _exit2(capsys, path, "data.users = 4", "must be >= the topology's 6 clients")
    path = scenario(str(tmp_path), "{name: leaf, path: fem, users: 10}", 6)
    _exit2(capsys, path, "train: holds 9 users, fewer than the 10 asked for")


def test_shakespeare_characters_as_indices(tmp_path, capsys):
    train = shakespeare_users(6)
    test = shakespeare_users(6, 1, (2, 3))
    write_leaf(str(tmp_path / "sh"), [leaf_doc(train)], [leaf_doc(test)])
    d = load_leaf(str(tmp_path / "sh"), 6, 6, 0).as_tensors()  # (the scenario's logreg refuses it)
    assert d.x.dtype == torch.int64 and d.input_shape == (80,)
    assert d.vocab == 80 == d.n_classes == len(ALL_LETTERS)
    pick = seeding.rng(0, "data/leaf/users").permutation(6)
    users = list(train)
    for k in range(6):
        xs, ys = train[users[pick[k]]]
        lo, hi = d.offsets[k], d.offsets[k + 1]
        assert d.x[lo:hi].tolist() == [[ALL_LETTERS.index(c) for c in s] for s in xs]
        assert d.y[lo:hi].tolist() == [ALL_LETTERS.index(c) for c in ys]
    # a model of feature vectors cannot read character indices
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: sh}", 6),
           "model.name = 'logreg'", "character indices")


# ----------------------------------------------------------------------------- bad files
def _cut(path: str, keep: int) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:keep])


def _poke(path: str, at: int, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([value]))


MNIST_BAD = {
    "truncated": (False, lambda r: _cut(os.path.join(r, "train-images-idx3-ubyte"), 5000),
                  "train-images-idx3-ubyte: truncated"),
    "truncated_gz": (True, lambda r: _cut(os.path.join(r, "t10k-images-idx3-ubyte.gz"), 3000),
                     "t10k-images-idx3-ubyte.gz: cannot read"),
    "wrong_magic": (False, lambda r: _poke(os.path.join(r, "train-labels-idx1-ubyte"), 2, 0x0D),
                    "train-labels-idx1-ubyte: wrong magic number 0x00000d01"),
    "not_idx": (False, lambda r: _poke(os.path.join(r, "t10k-labels-idx1-ubyte"), 0, 0x50),
                "wrong magic number 0x50000801: not an IDX file"),
    "label_out_of_range": (False, lambda r: _poke(os.path.join(r, "train-labels-idx1-ubyte"),
                                                  8 + 17, 12),
                           "train-labels-idx1-ubyte: label 12 at row 17 is out of range 0..9"),
    "missing": (False, lambda r: os.remove(os.path.join(r, "t10k-labels-idx1-ubyte")),
                "t10k-labels-idx1-ubyte: file not found (nor t10k-labels-idx1-ubyte.gz); "
                "download the files with `hierfl data fetch fashion_mnist --root"),
}


@pytest.mark.parametrize("case", sorted(MNIST_BAD))
def test_bad_idx_file_exits_2_naming_it(tmp_path, capsys, case):
    gz, spoil, needle = MNIST_BAD[case]
    write_mnist(str(tmp_path / "mn"), gz=gz)
    spoil(str(tmp_path / "mn"))
    err = _exit2(capsys, scenario(str(tmp_path), "{name: fashion_mnist, root: mn}"), needle,
                 "data.root")
    assert str(tmp_path / "mn") in err


def test_bad_cifar_files_exit_2_naming_them(tmp_path, capsys):
    write_cifar_set(str(tmp_path / "c"))
    path = scenario(str(tmp_path), "{name: cifar10, root: c}")
    _poke(str(tmp_path / "c" / "data_batch_3.bin"), 3073 * 7, 10)
    _exit2(capsys, path, "data_batch_3.bin: label 10 of record 7 is out of range 0..9")
    _cut(str(tmp_path / "c" / "test_batch.bin"), 3073 * 5 + 100)
    _exit2(capsys, path, "test_batch.bin: truncated", "15465 bytes")
    os.remove(tmp_path / "c" / "data_batch_5.bin")
    _exit2(capsys, path, "data_batch_5.bin: file not found;",
           "`hierfl data fetch cifar10 --root")
    shutil.rmtree(tmp_path / "c")
    _exit2(capsys, path, "no such folder; download the files with `hierfl data fetch cifar10")


def test_bad_leaf_files_exit_2_naming_them(tmp_path, capsys):
    path = scenario(str(tmp_path), "{name: leaf, path: lf}", 2)
    base = {"a": ([[0.5] * 784], [3]), "b": ([[0.25] * 784] * 2, [1, 2])}
    cases = [
        ({"a": ([], []), "b": base["b"]}, "user 'a' has no samples"),
        ({"a": ([[0.5] * 784], [62]), "b": base["b"]}, "user 'a': label 62 is out of range "
         "0..61"),
        ({"a": ([[0.5] * 784, [0.5] * 783], [1, 2]), "b": base["b"]}, "user 'a': x must be"),
        ({"a": ([""], ["a"]), "b": base["b"]}, "user 'a': x strings must be non-empty"),
        ({"a": (["ab"], ["c"]), "b": base["b"]}, "user 'b': samples of 784 values, others of 2 "
         "characters"),
    ]
    for users, needle in cases:
        shutil.rmtree(tmp_path / "lf", ignore_errors=True)
        write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(base)])
        _exit2(capsys, path, "part_0.json", needle)
    with open(tmp_path / "lf" / "train" / "part_0.json", "w") as f:
        f.write('{"users": ["a"], "user_data": {"a": {"x": [')
    _exit2(capsys, path, "part_0.json: not a readable JSON file")
    doc = leaf_doc(base)
    del doc["user_data"]["b"]
    write_leaf(str(tmp_path / "lf"), [doc], [leaf_doc(base)])
    _exit2(capsys, path, "user 'b' has no samples (no x and y lists")
    shutil.rmtree(tmp_path / "lf" / "test")
    _exit2(capsys, path, "lf/test: no such folder", "hierfl data fetch leaf")
    bad = {"a": (["x" * 80], ["~"]), "b": (["y" * 80], ["z"])}
    write_leaf(str(tmp_path / "lf"), [leaf_doc(bad)], [leaf_doc(bad)])
    _exit2(capsys, path, "character '~' is not in LEAF's 80-character vocabulary")


def test_root_and_path_are_asked_for(tmp_path, capsys):
    _exit2(capsys, scenario(str(tmp_path), "{name: cifar100}"), "data.root",
           "cifar100 needs root:", "hierfl data fetch cifar100 --root DIR")
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, path: x}"),
           "mnist reads the folder root:, not path:")
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf}"), "leaf needs path:")
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: mn}", model="{name: linear}"),
           "mnist data are labelled classes")


def test_mnist_too_many_clients(tmp_path, capsys):
    write_mnist(str(tmp_path / "mn"))
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: mn}", 800),
           "data.name = 'mnist'", "1500 training images: at most 750 clients")


def test_digits_28_is_the_digits():
    x, y = digits_28()
    from sklearn.datasets import load_digits
    d = load_digits()
    assert x.shape == (1797, 28, 28) and np.array_equal(y, d.target)
    assert np.array_equal(x[:, 2:26:3, 2:26:3], (d.images * (255 / 16)).round())


def test_each_set_spec_holds_its_keys_with_their_defaults():
    spec = data_spec("digits")
    assert spec.partition == PartitionSpec() and spec.test_fraction == 0.2
    assert not any(hasattr(spec, k) for k in ("root", "users", "label", "path"))
    assert data_spec("cifar100").label == "fine" and data_spec("leaf").users is None


def test_sweep_points_get_absolute_data_folders():
    from hierfl.sweep.spec import _self_contained

    raw = _self_contained({"topology": {"edges": {"count": 1}}, "output": "o",
                           "data": {"name": "mnist", "root": "../data/mn"}}, "/a/b/s.yaml")
    assert raw["data"]["root"] == "/a/data/mn" and "output" not in raw


def test_executors_agree_on_uint8_images(tmp_path):
    """The sequential reference (autograd, one client at a time) and the batched executor read
    the same scaled pixels: their metrics agree to 1e-5 on an MLP over MNIST-like images."""
    write_mnist(str(tmp_path / "mn"))
    got = {}
    for kind in ("batched", "sequential"):
        d = tmp_path / kind
        d.mkdir()
        path = scenario(str(d), "{name: mnist, root: ../mn}", 4, "{name: mlp, hidden: [16]}",
                        rounds=2, train=f", executor: {{kind: {kind}}}")
        assert main(["run", path, "--quiet", "--no-report"]) == 0
        got[kind] = np.genfromtxt(d / "out" / "fedavg" / "metrics.csv", delimiter=",",
                                  names=True)
    for col in ("train_loss", "test_acc"):
        assert np.allclose(got["batched"][col], got["sequential"][col], atol=1e-5)


def test_a_torchvision_mnist_root_is_read_at_its_raw_folder(tmp_path, capsys):
    """torchvision.datasets.MNIST(root, download=True) leaves root/MNIST/raw with each IDX file
    plain and gzipped: root: names that raw folder (docs/howto/datasets.md)."""
    raw = str(tmp_path / "tv" / "MNIST" / "raw")
    files = write_mnist(raw)
    write_mnist(raw, gz=True)
    d = _data(scenario(str(tmp_path), "{name: mnist, root: tv/MNIST/raw}", 4))
    assert len(d.x) == len(files["train-images-idx3-ubyte"]) and d.input_shape == (1, 28, 28)
    capsys.readouterr()
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: tv}", 4),
           "train-images-idx3-ubyte: file not found")


@pytest.mark.parametrize("name,sub,pickle", [("cifar10", "cifar-10-batches-py", "data_batch_1"),
                                             ("cifar100", "", "train")])
def test_cifar_pickles_torchvision_downloads_are_refused_by_name(tmp_path, capsys, name, sub,
                                                                 pickle):
    os.makedirs(tmp_path / "c" / sub)
    (tmp_path / "c" / sub / pickle).write_bytes(b"\x80\x04not read")
    _exit2(capsys, scenario(str(tmp_path), f"{{name: {name}, root: c}}"),
           f"{pickle}: is the Python version of {name} (pickles", "never read",
           f"hierfl data fetch {name} --root")
