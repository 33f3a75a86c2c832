"""The data loaders fed as a stranger would feed them: keys a set does not read, an IDX file
there both plain and gzipped, LEAF users without test rows, FEMNIST values outside [0, 1],
values beyond float32, a failed sweep point's scenario. Each is a clean exit 2 (or, for the
sweep, a message naming a file that is there) with the file, key and value named."""
from __future__ import annotations

import gzip
import os
import shutil

import numpy as np
import pytest

from datasets_util import (femnist_users, leaf_doc, scenario, validate_exit2 as _exit2,
                           write_cifar_set, write_leaf, write_mnist)
from hierfl.cli import main
from hierfl.scenario.load import load
from hierfl.data import load_arrays


def _arrays(path: str):
    sc = load(path)
    return load_arrays(sc, sc.topology.clients.count)


# ------------------------------------------------------------------ keys a set does not read
@pytest.mark.parametrize("data,key,value,hint", [
    ("{name: cifar10, root: c, label: coarse}", "label", "'coarse'", "(it is for cifar100)"),
    ("{name: cifar10, root: c, test_fraction: 0.3}", "test_fraction", "0.3", "cifar10 reads "
     "root, partition"),
    ("{name: synthetic_iid, alpha: 2.0}", "alpha", "2.0", "(it is for synthetic)"),
    ("{name: digits, users: 3}", "users", "3", "(it is for leaf)"),
    ("{name: synthetic, path: x.npz}", "path", "'x.npz'", "(it is for leaf, npz)"),
    ("{name: digits, root: c}", "root", "'c'", "digits reads partition, shift, test_fraction"),
])
def test_a_key_the_set_does_not_read_is_an_error(tmp_path, capsys, data, key, value, hint):
    write_cifar_set(str(tmp_path / "c"))
    err = _exit2(capsys, scenario(str(tmp_path), data, 4), "1 problem",
                 f"data.{key} = {value}: {data.split(',')[0][7:]} does not use {key}:", hint)
    assert "s.yaml:3:" in err                       # the file and line of data:


def test_path_and_root_swapped_say_which_one_the_set_reads(tmp_path, capsys):
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf, root: lf}", 2),
           "data.root = 'lf': leaf reads the folder path:, not root:")
    _exit2(capsys, scenario(str(tmp_path), "{name: npz, root: d}", 2),
           "data.root = 'd': npz reads the file path:, not root:")


def test_the_keys_a_set_reads_stay_accepted(tmp_path):
    write_cifar_set(str(tmp_path / "c"), "cifar100")
    d = _arrays(scenario(str(tmp_path), "{name: cifar100, root: c, label: coarse, "
                         "partition: {kind: iid}}", 4))
    assert d.n_classes == 20
    assert main(["validate", scenario(str(tmp_path), "{name: synthetic, alpha: 0.5, beta: 0.5, "
                                      "dim: 5, classes: 3, test_fraction: 0.3}", 4)]) == 0


@pytest.mark.parametrize("part,key,value,said", [
    ("{alpha: 0.1}", "alpha", "0.1", "kind: iid (the default: no kind: given) does not use "
     "alpha: (it is for kind: dirichlet, quantity_skew); give kind: dirichlet"),
    ("{kind: iid, alpha: 0.5}", "alpha", "0.5", "kind: iid does not use alpha:"),
    ("{kind: shards, alpha: 0.5}", "alpha", "0.5", "kind: shards does not use alpha:"),
    ("{kind: dirichlet, alpha: 0.3, shards_per_client: 3}", "shards_per_client", "3",
     "kind: dirichlet does not use shards_per_client: (it is for kind: shards)"),
])
def test_a_partition_key_its_kind_does_not_read_is_an_error(tmp_path, capsys, part, key,
                                                             value, said):
    """`partition: {alpha: 0.1}` without kind: dirichlet was an iid split, without a word."""
    _exit2(capsys, scenario(str(tmp_path), f"{{name: digits, partition: {part}}}", 4),
           "1 problem", f"s.yaml:3: data.partition.{key} = {value}: a partition of {said}")


def test_the_partition_keys_a_kind_reads_stay_accepted(tmp_path):
    for part in ("{kind: dirichlet, alpha: 0.3}", "{kind: shards, shards_per_client: 3}",
                 "{kind: iid}", "{}"):
        assert main(["validate", scenario(str(tmp_path), f"{{name: digits, partition: {part}}}",
                                          4)]) == 0, part


# ------------------------------------------------------------- an IDX file plain and gzipped
def test_same_data_plain_and_gzipped_reads_the_plain_one_with_a_note(tmp_path, capsys):
    write_mnist(str(tmp_path / "gz"), gz=True)
    want = _arrays(scenario(str(tmp_path), "{name: mnist, root: gz}", 4))
    write_mnist(str(tmp_path / "both"), gz=True)
    write_mnist(str(tmp_path / "both"), gz=False)
    # a gzip file of two members: its trailer covers only the second, the bytes are the same
    name = str(tmp_path / "both" / "t10k-labels-idx1-ubyte")
    with open(name, "rb") as f:
        raw = f.read()
    with open(name + ".gz", "wb") as f:
        f.write(gzip.compress(raw[:100]) + gzip.compress(raw[100:]))
    capsys.readouterr()
    got = _arrays(scenario(str(tmp_path), "{name: mnist, root: both}", 4))
    assert np.array_equal(got.x, want.x) and np.array_equal(got.y_test, want.y_test)
    err = capsys.readouterr().err
    assert f"note: {name} and t10k-labels-idx1-ubyte.gz hold the same data; reading " \
           "t10k-labels-idx1-ubyte" in err
    assert err.count("note:") == 4


@pytest.mark.parametrize("how,needle", [
    ("byte", "they first differ at byte 20"),
    ("shorter", "train-labels-idx1-ubyte.gz is longer: the other ends at byte 1000"),
])
def test_different_data_plain_and_gzipped_is_an_error_naming_both(tmp_path, capsys, how, needle):
    root = tmp_path / "mn"
    write_mnist(str(root), gz=True)
    labels = root / "train-labels-idx1-ubyte"
    with gzip.open(str(labels) + ".gz", "rb") as f:
        raw = bytearray(f.read())
    if how == "byte":
        raw[20] = (raw[20] + 1) % 10          # another label: still a well-formed file
    else:
        raw = raw[:1000]
    labels.write_bytes(bytes(raw))
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: mn}", 4), "data.root",
           f"{labels}: both it and train-labels-idx1-ubyte.gz are here and they hold different "
           f"data ({needle}); hierfl does not guess")


def test_a_damaged_gzip_twin_is_named(tmp_path, capsys):
    root = tmp_path / "mn"
    write_mnist(str(root), gz=True)
    write_mnist(str(root))
    packed = root / "t10k-images-idx3-ubyte.gz"
    packed.write_bytes(packed.read_bytes()[:5])        # too short to have a gzip trailer
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: mn}", 4),
           f"{packed}: cannot read (Compressed file ended")


def test_cifar_files_in_root_and_in_the_archive_folder(tmp_path, capsys):
    """`hierfl data fetch` writes the .bin files in root; a hand-unpacked archive left them in
    cifar-10-batches-bin/ too: the same bytes are read once, different ones are an error."""
    files = write_cifar_set(str(tmp_path / "c"))
    shutil.copytree(tmp_path / "c", tmp_path / "c" / "cifar-10-batches-bin")
    path = scenario(str(tmp_path), "{name: cifar10, root: c}", 4)
    capsys.readouterr()
    d = _arrays(path)
    assert len(d.y) + len(d.y_test) == sum(len(v[0]) for v in files.values())
    assert capsys.readouterr().err.count("note:") == 6
    other = tmp_path / "c" / "cifar-10-batches-bin" / "data_batch_4.bin"
    with open(other, "r+b") as f:
        f.seek(3073 * 3 + 100)
        f.write(b"\x00\x01")
    _exit2(capsys, path, f"{tmp_path / 'c' / 'data_batch_4.bin'}: both it and "
           "cifar-10-batches-bin/data_batch_4.bin are here and they hold different data (they "
           "first differ at byte 9319")


def test_root_that_is_a_file(tmp_path, capsys):
    (tmp_path / "mn").write_text("not a folder")
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: mn}", 4),
           "mn: is a file, not a folder")


# ------------------------------------------------------------------------------ LEAF
def test_a_leaf_user_without_test_rows_is_named(tmp_path, capsys):
    users = femnist_users(4)
    names = sorted(users)
    test = {u: users[u] for u in names if u != names[2]}
    write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(test)])
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf}", 4), "data.path",
           f"lf/train/part_0.json: user {names[2]!r} has training rows here but none in ",
           "lf/test/*.json (1 of the 4 users drawn lack them)", "-t sample")


def test_leaf_split_by_user_is_refused(tmp_path, capsys):
    write_leaf(str(tmp_path / "lf"), [leaf_doc(femnist_users(4))],
               [leaf_doc(femnist_users(3, seed=1, prefix="t"))])
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf}", 4),
           "lf/test: holds no rows of the 4 users drawn", "-t user split")


@pytest.mark.parametrize("split,scale,shift,found", [("train", 255.0, 0.0, "[0, 255]"),
                                                      ("test", 1.0, -0.5, "[-0.5, 0.5]")])
def test_femnist_values_outside_0_1_are_an_error(tmp_path, capsys, split, scale, shift, found):
    users = femnist_users(4)
    u = sorted(users)[1]
    bad = dict(users)
    bad[u] = ((np.array(users[u][0]) * scale + shift).tolist(), users[u][1])
    write_leaf(str(tmp_path / "lf"), [leaf_doc(bad if split == "train" else users)],
               [leaf_doc(bad if split == "test" else users)])
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf}", 4),
           f"lf/{split}/part_0.json: user {u!r}: values in {found}, but FEMNIST's pixels are in "
           "[0, 1]")


def test_femnist_in_range_but_not_pixels_stays_float(tmp_path):
    users = {u: ((np.array(x) * 0.999).tolist(), y) for u, (x, y) in femnist_users(4).items()}
    write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(users)])
    d = _arrays(scenario(str(tmp_path), "{name: leaf, path: lf}", 4))
    assert d.x.dtype == np.float32 and d.input_shape == (1, 28, 28)
    assert 0 <= d.x.min() and d.x.max() <= 0.999


def test_leaf_values_beyond_float32_and_bad_user_names(tmp_path, capsys):
    g = np.random.default_rng(0)
    users = {f"u{i}": (g.normal(size=(5, 60)).tolist(), g.integers(0, 10, 5).tolist())
             for i in range(4)}
    bad = {**users, "u2": ([[1e300] * 60] * 5, users["u2"][1])}
    write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(bad)])
    path = scenario(str(tmp_path), "{name: leaf, path: lf}", 4)
    _exit2(capsys, path, "lf/test/part_0.json: user 'u2': x holds values up to 1e+300, beyond "
           "float32's range")
    doc = leaf_doc(users)
    doc["users"][0] = 7
    write_leaf(str(tmp_path / "lf"), [doc], [leaf_doc(users)])
    _exit2(capsys, path, "lf/train/part_0.json: user names must be strings (users holds 7)")


def test_a_user_listed_twice_and_a_path_that_is_a_file(tmp_path, capsys):
    users = femnist_users(4)
    doc = leaf_doc(users)
    doc["users"].append(doc["users"][2])
    doc["num_samples"].append(doc["num_samples"][2])
    write_leaf(str(tmp_path / "lf"), [doc], [leaf_doc(users)])
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf}", 4),
           f"lf/train/part_0.json: user {doc['users'][2]!r} is listed twice in users")
    (tmp_path / "file").write_text("{}")
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: file}", 4),
           "file: is a file, not a folder: path: names the folder")


def test_a_test_label_out_of_range_names_its_file(tmp_path, capsys):
    users = femnist_users(4)
    u = sorted(users)[0]
    bad = {**users, u: (users[u][0], [70] * len(users[u][1]))}
    shutil.rmtree(tmp_path / "lf", ignore_errors=True)
    write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(bad)])
    _exit2(capsys, scenario(str(tmp_path), "{name: leaf, path: lf}", 4),
           f"lf/test/part_0.json: user {u!r}: label 70 is out of range 0..61")


# ------------------------------------------------------------------------- a failed point
def test_a_failed_sweep_point_names_a_file_that_is_there(tmp_path, capsys):
    users = femnist_users(4)
    u = sorted(users)[3]
    bad = {**users, u: (users[u][0], [99] * len(users[u][1]))}   # found only when loading
    write_leaf(str(tmp_path / "lf"), [leaf_doc(bad)], [leaf_doc(users)])
    scenario(str(tmp_path), "{name: leaf, path: lf}", 4, rounds=1)
    (tmp_path / "sw.yaml").write_text("base: s.yaml\ngrid:\n  seed: [5]\noutput: swout\n")
    assert main(["sweep", str(tmp_path / "sw.yaml"), "--workers", "1"]) == 1
    err = capsys.readouterr().err
    kept = tmp_path / "swout" / "seed=5" / "point.yaml"
    assert f"point seed=5 failed: ScenarioError: {kept}: data.path" in err, err
    assert "label 99 is out of range" in err and ".staging" not in err
    assert kept.is_file() and not (kept.parent / "DONE").exists()
    assert main(["validate", str(kept)]) == 2          # the kept scenario shows the error again
    assert "label 99 is out of range" in capsys.readouterr().err
    write_leaf(str(tmp_path / "lf"), [leaf_doc(users)], [leaf_doc(users)])
    assert main(["sweep", str(tmp_path / "sw.yaml"), "--workers", "1"]) == 0   # runs it again
    assert (kept.parent / "DONE").is_file()


def test_a_directory_where_a_set_file_belongs_says_what_it_is(tmp_path, capsys):
    """A data file that is there but is not a file (issue 42: a directory, a FIFO) is named as
    such, not "file not found"."""
    root = tmp_path / "m"
    (root / "train-images-idx3-ubyte").mkdir(parents=True)
    _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: m}", 4),
           "train-images-idx3-ubyte: is a directory, not a regular file: mnist reads")
    os.rmdir(root / "train-images-idx3-ubyte")
    os.mkfifo(root / "train-images-idx3-ubyte.gz")
    err = _exit2(capsys, scenario(str(tmp_path), "{name: mnist, root: m}", 4),
                 "is a FIFO (named pipe), not a regular file")
    assert "file not found" not in err
