"""data: {name: image_folder}: an ImageFolder tree of PNGs the test writes with Pillow. Labels
follow the sorted folder names, pixels round-trip as uint8 rows (channels first), resize gives
the asked shape, the split repeats for a seed; each bad tree is a clean exit 2 naming it."""
from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from datasets_util import scenario, validate_exit2
from hierfl.cli import main
from hierfl.data import load_arrays
from hierfl.scenario.load import load

CLASSES = ("cat", "ant", "bee")          # sorted: ant 0, bee 1, cat 2


def write_tree(root: str, n: int = 6, size: tuple[int, int] = (8, 8), seed: int = 0,
               gray_class: str | None = None) -> dict[str, np.ndarray]:
    """root/<class>/<i>.png, random pixels (H, W, 3), or (H, W) for gray_class; path -> pixels."""
    g = np.random.default_rng(seed)
    out = {}
    for c in CLASSES:
        os.makedirs(os.path.join(root, c), exist_ok=True)
        for i in range(n):
            shape = size if c == gray_class else (*size, 3)
            a = g.integers(0, 256, shape, dtype=np.uint8)
            p = os.path.join(root, c, f"{i}.png")
            Image.fromarray(a).save(p)
            out[p] = a
    return out


def _data(path: str, seed: int | None = None):
    sc = load(path, seed=seed)
    return load_arrays(sc, sc.topology.clients.count)


def test_labels_pixels_and_split(tmp_path):
    pix = write_tree(str(tmp_path / "tr"))
    d = _data(scenario(str(tmp_path), "{name: image_folder, root: tr, test_fraction: 0.25}", 3))
    assert d.x.dtype == np.uint8 and d.input_shape == (3, 8, 8) and d.n_classes == 3
    assert len(d.x) + len(d.x_test) == 18 and len(d.x_test) == 3 * 2   # round(0.25 * 6) per client
    rows = np.concatenate([d.x, d.x_test])
    labels = np.concatenate([d.y, d.y_test])
    for p, a in pix.items():                 # every image once, its label its folder's rank
        want = a.transpose(2, 0, 1).reshape(-1)
        hit = np.flatnonzero((rows == want).all(axis=1))
        assert len(hit) == 1
        assert labels[hit[0]] == sorted(CLASSES).index(os.path.basename(os.path.dirname(p)))
    again = _data(str(tmp_path / "s.yaml"))
    assert np.array_equal(again.x, d.x) and np.array_equal(again.offsets, d.offsets)
    other = _data(str(tmp_path / "s.yaml"), seed=7)
    assert not np.array_equal(other.x, d.x)


def test_resize_grayscale_and_a_test_tree(tmp_path):
    write_tree(str(tmp_path / "tr"), gray_class="bee")
    write_tree(str(tmp_path / "te"), n=2, seed=1)
    d = _data(scenario(str(tmp_path), "{name: image_folder, root: tr, test: te, "
                       "transform: {resize: [4, 5], grayscale: true}}", 3))
    assert d.input_shape == (1, 4, 5) and d.x.shape == (18, 20) and d.x_test.shape == (6, 20)
    assert sorted(np.bincount(d.y_test)) == [2, 2, 2]
    mixed = _data(scenario(str(tmp_path), "{name: image_folder, root: tr, "
                           "transform: {resize: [4, 5]}}", 3))
    assert mixed.input_shape == (3, 4, 5)        # one RGB class: all read as RGB


def test_all_gray_images_are_one_channel_and_a_run_works(tmp_path):
    g = np.random.default_rng(3)
    for c in CLASSES:
        os.makedirs(tmp_path / "tr" / c)
        for i in range(6):
            Image.fromarray(g.integers(0, 256, (6, 6), dtype=np.uint8)).save(
                tmp_path / "tr" / c / f"{i}.png")
    path = scenario(str(tmp_path), "{name: image_folder, root: tr}", 3, model="{name: cnn}")
    assert _data(path).input_shape == (1, 6, 6)
    assert main(["run", path, "--quiet", "--no-report"]) == 0
    assert (tmp_path / "out" / "fedavg" / "metrics.csv").is_file()


def _spoil_unreadable(root):
    (root / "bee" / "3.png").write_bytes(b"not a png")
    return "bee/3.png: not an image Pillow can read"


def _spoil_size(root):
    Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(root / "cat" / "2.png")
    return "cat/2.png: is 7 x 5 pixels (width x height)"


def _spoil_empty(root):
    for f in os.listdir(root / "ant"):
        os.remove(root / "ant" / f)
    (root / "ant" / "notes.txt").write_text("x")
    return "ant: a class folder with no images"


def _spoil_gone(root):
    import shutil
    shutil.rmtree(root)
    return "tr: no such folder"


@pytest.mark.parametrize("spoil", [_spoil_unreadable, _spoil_size, _spoil_empty, _spoil_gone])
def test_bad_trees_exit_2_naming_the_file(tmp_path, capsys, spoil):
    write_tree(str(tmp_path / "tr"))
    path = scenario(str(tmp_path), "{name: image_folder, root: tr}", 3)
    needle = spoil(tmp_path / "tr")
    err = validate_exit2(capsys, path, needle, "data.root")
    assert str(tmp_path) in err
    assert main(["run", path, "--quiet", "--no-report"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_test_tree_with_a_class_of_its_own_is_named(tmp_path, capsys):
    write_tree(str(tmp_path / "tr"))
    write_tree(str(tmp_path / "te"), n=1)
    os.makedirs(tmp_path / "te" / "dog")
    validate_exit2(capsys, scenario(str(tmp_path), "{name: image_folder, root: tr, test: te}",
                                    3), "data.test", "dog: a class the training tree does not "
                   "have (its classes: ant, bee, cat)")


def test_a_bad_resize_is_named(tmp_path, capsys):
    write_tree(str(tmp_path / "tr"))
    validate_exit2(capsys, scenario(str(tmp_path), "{name: image_folder, root: tr, "
                                    "transform: {resize: [4]}}", 3), "data.transform.resize",
                   "[height, width]")


def test_sweep_points_get_an_absolute_test_tree():
    from hierfl.sweep.spec import _self_contained

    raw = _self_contained({"topology": {"edges": {"count": 1}}, "data": {
        "name": "image_folder", "root": "../d/tr", "test": "te"}}, "/a/b/s.yaml")
    assert raw["data"]["root"] == "/a/d/tr" and raw["data"]["test"] == "/a/b/te"
