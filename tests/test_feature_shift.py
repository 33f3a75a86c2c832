"""Feature skew (`data.shift`, data/shift.py): the clients of a group (a client, or an edge)
share one rotation; noise grows with the group index as NIID-Bench's sd = noise * g / (G - 1);
the same seed gives the same images; the default leaves every pixel as it was; bad values
exit 2 naming the key."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from datasets_util import scenario, validate_exit2, write_mnist
from hierfl.config.schema import ShiftSpec
from hierfl.data import load_data
from hierfl.data.shift import _shift_rows, group_angles, group_noise
from hierfl.run import build_world
from hierfl.scenario.load import load


def _plain(sc):
    return load_data(dataclasses.replace(sc, data=dataclasses.replace(sc.data,
                                                                      shift=ShiftSpec())), 6)


def test_rotation_shared_by_the_clients_of_an_edge(tmp_path):
    write_mnist(str(tmp_path / "mn"))
    sc = load(scenario(str(tmp_path), "{name: mnist, root: mn, shift: {rotate: 40, by: edge}}",
                       6))
    world = build_world(sc)
    edge_of = world.topo.edge_of
    assert len(set(edge_of.tolist())) == 2
    plain = _plain(sc)
    angles = group_angles(40.0, 2, sc.seed)
    assert abs(angles[0] - angles[1]) > 1 and np.all(np.abs(angles) <= 40)
    x, x0, off = world.data.x.numpy(), plain.x.numpy(), world.data.offsets
    for k in range(6):
        a, b = off[k], off[k + 1]
        want = _shift_rows(x0[a:b], (1, 28, 28), float(angles[edge_of[k]]), 0.0,
                           np.random.default_rng(0))
        assert np.array_equal(x[a:b], want)
        assert not np.array_equal(x[a:b], x0[a:b])
        other = _shift_rows(x0[a:b], (1, 28, 28), float(angles[1 - edge_of[k]]), 0.0,
                            np.random.default_rng(0))
        assert not np.array_equal(x[a:b], other)
    t, t0, toff = world.data.x_test.numpy(), plain.x_test.numpy(), world.data.test_offsets
    k = 0                                          # test rows turned by their client's angle
    want = _shift_rows(t0[toff[k]:toff[k + 1]], (1, 28, 28), float(angles[edge_of[k]]), 0.0,
                       np.random.default_rng(0))
    assert np.array_equal(t[toff[k]:toff[k + 1]], want)


def test_a_turn_by_90_degrees_is_rot90():
    img = np.random.default_rng(1).integers(0, 256, (3, 1, 9, 9)).astype(np.uint8)
    out = _shift_rows(img.reshape(3, -1), (1, 9, 9), 90.0, 0.0, np.random.default_rng(0))
    assert np.array_equal(out.reshape(img.shape), np.rot90(img, 1, axes=(-1, -2))) or \
        np.array_equal(out.reshape(img.shape), np.rot90(img, -1, axes=(-1, -2)))


def test_noise_grows_with_the_client_as_niid_bench(tmp_path):
    write_mnist(str(tmp_path / "mn"))
    sc = load(scenario(str(tmp_path), "{name: mnist, root: mn, shift: {noise: 0.05}}", 6))
    d, plain = load_data(sc, 6), _plain(sc)
    assert np.allclose(group_noise(0.05, 6), 0.05 * np.arange(6) / 5)
    x, x0, off = d.x.numpy().astype(float), plain.x.numpy().astype(float), d.offsets
    assert np.array_equal(x[off[0]:off[1]], x0[off[0]:off[1]])        # group 0: clean
    for k in range(1, 6):
        a, b = off[k], off[k + 1]
        mid = (x0[a:b] > 60) & (x0[a:b] < 195)     # away from the clip at 0 and 255
        sd = (x[a:b] - x0[a:b])[mid].std() / 255
        assert abs(sd - 0.05 * k / 5) < 0.1 * 0.05 * k / 5 + 0.002, (k, sd)
    again = load_data(sc, 6)
    assert np.array_equal(again.x.numpy(), d.x.numpy())
    other = load_data(dataclasses.replace(sc, seed=1), 6)
    assert not np.array_equal(other.x.numpy(), d.x.numpy())


def test_no_shift_leaves_the_pixels(tmp_path):
    write_mnist(str(tmp_path / "mn"))
    sc = load(scenario(str(tmp_path), "{name: mnist, root: mn}", 6))
    assert sc.data.shift == ShiftSpec()
    d = load_data(sc, 6)
    sc2 = load(scenario(str(tmp_path), "{name: mnist, root: mn, shift: {rotate: 0, by: edge}}",
                        6))
    assert np.array_equal(load_data(sc2, 6).x.numpy(), d.x.numpy())


@pytest.mark.parametrize("data,needle", [
    ("{name: digits, shift: {rotate: 200}}", "data.shift.rotate = 200"),
    ("{name: digits, shift: {noise: -1}}", "data.shift.noise = -1"),
    ("{name: digits, shift: {by: tier}}", "data.shift.by"),
    ("{name: synthetic, shift: {rotate: 10}}", "data.shift"),
])
def test_bad_shift_exits_2(tmp_path, capsys, data, needle):
    validate_exit2(capsys, scenario(str(tmp_path), data, 6), needle)


def test_validate_names_the_feature_skew(tmp_path, capsys):
    from hierfl.cli import main

    path = scenario(str(tmp_path), "{name: digits, shift: {rotate: 15, noise: 0.1, by: edge}}",
                    6)
    assert main(["validate", path]) == 0
    assert "; feature skew per edge: rotate 15 degrees, noise 0.1" in capsys.readouterr().out
