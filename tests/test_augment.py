"""Training augmentation (train.local.augment: random crop with zero padding, horizontal flip):
seeded per (seed, client, round, edge round, step, row), so the same seed gives the same
images, a client's images do not depend on the clients sharing the call, and the batched
executor equals the sequential one; off by default (tests/test_golden.py pins every number)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import torch

from hierfl.learn.batches import Augment, augment_keys, minibatch_plan
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario

SHAPE = (3, 8, 8)


def _data(n_clients=6, rows=12):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (n_clients * rows, int(np.prod(SHAPE))), generator=g,
                      dtype=torch.uint8)
    y = torch.arange(n_clients * rows) % 10
    return np.arange(n_clients + 1) * rows, x, y


def _plan(clients, seed=0, pad=2, flip=True):
    off, x, y = _data()
    clients = np.asarray(clients)
    plan = minibatch_plan(off, clients, 4, np.full(len(clients), 5), seed, 1, 0, x, y)
    aug = Augment(augment_keys(seed, 1, 0, clients), pad, flip, SHAPE)
    return dataclasses.replace(plan, aug=aug), plan


def test_same_seed_same_images_other_seed_differs():
    a, plain = _plan([0, 1, 2])
    b, _ = _plan([0, 1, 2])
    c, _ = _plan([0, 1, 2], seed=1)
    assert torch.equal(a.at(3).x, b.at(3).x)
    assert not torch.equal(a.at(3).x, plain.at(3).x)
    # another seed: other draws (and other batches)
    assert not np.array_equal(a.aug.draws(np.arange(3), 4)[0], c.aug.draws(np.arange(3), 4)[0])
    assert not torch.equal(a.at(3).x, c.at(3).x)


def test_client_images_do_not_depend_on_the_call():
    full, _ = _plan([0, 1, 2, 3, 4, 5])
    alone, _ = _plan([3])
    pair, _ = _plan([5, 3])
    for step in range(5):
        assert torch.equal(full.at(step).x[3], alone.at(step).x[0])
        assert torch.equal(full.at(step).x[3], pair.at(step).x[1])
        assert torch.equal(full.select(torch.tensor([3])).at(step).x[0], alone.at(step).x[0])
    sp = full.span(1, 4).x
    for i, step in enumerate(range(1, 4)):
        assert torch.equal(sp[:, i], full.at(step).x)


def _one(pad, flip, dx, dy, flip_bit):
    """An Augment whose single row draws (dx, dy, flip_bit): the draws patched."""
    class Fixed(Augment):
        def draws(self, steps, width):
            shape = (1, len(steps), width)
            return (np.full(shape, dx), np.full(shape, dy), np.full(shape, flip_bit))
    return Fixed(np.zeros(1, np.uint64), pad, flip, SHAPE)


def test_flip_equals_torch_flip():
    img = torch.arange(int(np.prod(SHAPE)), dtype=torch.float32).reshape(1, 1, 1, -1)
    out = _one(0, True, 0, 0, True).apply(img, np.array([0]))
    assert torch.equal(out.reshape(SHAPE), torch.flip(img.reshape(SHAPE), dims=[2]))


@pytest.mark.parametrize("dx,dy", [(2, -1), (-2, 2), (0, 1), (1, 0)])
def test_crop_equals_shifted_image_with_zero_fill(dx, dy):
    p = 2
    img = torch.arange(1, int(np.prod(SHAPE)) + 1, dtype=torch.float32).reshape(SHAPE)
    want = torch.zeros(SHAPE)
    _, h, w = SHAPE
    for yy in range(h):
        for xx in range(w):
            sy, sx = yy + dy, xx + dx
            if 0 <= sy < h and 0 <= sx < w:
                want[:, yy, xx] = img[:, sy, sx]
    out = _one(p, False, dx, dy, False).apply(img.reshape(1, 1, 1, -1), np.array([0]))
    assert torch.equal(out.reshape(SHAPE), want)
    both = _one(p, True, dx, dy, True).apply(img.reshape(1, 1, 1, -1), np.array([0]))
    assert torch.equal(both.reshape(SHAPE), torch.flip(want, dims=[2]))   # crop, then flip


def test_draws_cover_the_range():
    a = Augment(augment_keys(0, 1, 0, np.arange(50)), 4, True, SHAPE)
    dx, dy, fl = a.draws(np.arange(4), 32)
    assert dx.min() == -4 and dx.max() == 4 and dy.min() == -4 and dy.max() == 4
    assert 0.4 < fl.mean() < 0.6
    assert abs(np.corrcoef(dx.ravel(), dy.ravel())[0, 1]) < 0.05


def _cnn(tmp_path, augment):
    local = {"epochs": 2, "batch_size": 5, "lr": 0.05}
    if augment is not None:
        local["augment"] = augment
    path = make_scenario(
        tmp_path, name="aug", seed=3,
        topology={"edges": {"count": 2}, "clients": {"count": 6, "compute_flops": 1.0e9}},
        data={"name": "digits", "test_fraction": 0.2},
        model={"name": "cnn", "channels": [4, 8], "dense": 16},
        train={"rounds": 2, "clients_per_round": 4, "local": local},
        stragglers={"fraction": 0.5, "drop": "never"},
        algorithms=[{"name": "fedavg"}])
    return load(path, out=str(tmp_path / "out"))


def _final(sc, world, kind, out):
    ex = dataclasses.replace(sc.train.executor, kind=kind)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False)
    return dict(np.load(out / "final_params.npz"))


def test_batched_equals_sequential_on_a_cnn(tmp_path):
    sc = _cnn(tmp_path, {"crop": 2, "flip": True})
    world = build_world(sc)
    pb = _final(sc, world, "batched", tmp_path / "b")
    ps = _final(sc, world, "sequential", tmp_path / "s")
    assert sorted(pb) == sorted(ps)
    for k in pb:
        np.testing.assert_allclose(pb[k], ps[k], atol=1e-6, rtol=0)
    plain = _cnn(tmp_path / "plain", None)
    p0 = _final(plain, build_world(plain), "batched", tmp_path / "p")
    assert any(not np.array_equal(pb[k], p0[k]) for k in pb)    # augmentation did something
    again = _final(sc, build_world(sc), "batched", tmp_path / "b2")
    assert all(np.array_equal(pb[k], again[k]) for k in pb)      # same seed, same run


def test_non_image_data_refused_by_validate(tmp_path):
    path = make_scenario(
        tmp_path, name="aug", seed=0,
        topology={"edges": {"count": 2}, "clients": {"count": 4}},
        data={"name": "synthetic", "alpha": 0.5, "beta": 0.5, "dim": 5, "classes": 3},
        train={"rounds": 1, "clients_per_round": 2,
               "local": {"steps": 2, "augment": {"crop": 2, "flip": True}}},
        algorithms=[{"name": "fedavg"}])
    res = subprocess.run([sys.executable, "-m", "hierfl", "validate", str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "train.local.augment" in res.stderr + res.stdout
    assert "image" in res.stderr + res.stdout


def test_off_by_default():
    from hierfl.config.schema import LocalSpec
    assert LocalSpec().augment is None


def test_plugin_batches_see_the_same_images():
    """A local training plugin's minibatches (learn/plugin_program.ClientBatches) are the
    batched plan's augmented rows of the client, its padding left out."""
    from hierfl.learn.plugin_program import ClientBatches

    plan, _ = _plan([0, 1, 2])
    got = list(ClientBatches(plan, 1, 5, None, None, 1, lambda: 0.0))
    for i, (x, _) in enumerate(got):
        b = plan.at(i)
        assert torch.equal(x, b.x[1][b.m[1] > 0])
