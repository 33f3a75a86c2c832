"""The models FL papers run on CIFAR and FEMNIST (lenet5, resnet, vgg, mobilenet): parameter
counts and LeNet-5's FLOPs against hand counts, outputs through hierfl's build path, the norm
choice, options refused naming their key, a short run on digits, the batched executor against
the sequential one on ResNet-8 with GroupNorm, and declarations read without torch."""
from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from hierfl.config.errors import ScenarioError
from hierfl.config.schema import ModelSpec
from hierfl.models.registry import ModelOptionError, build_model
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario, read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CIFAR, FEMNIST = (3, 32, 32), (1, 28, 28)


def _build(name: str, shape=CIFAR, classes: int = 10, **options):
    return build_model(ModelSpec(name=name, options=options), math.prod(shape), classes,
                       classes, shape)


# ------------------------------------------------------------------------ hand counts
def _cifar_resnet(n: int, shortcut: str = "A", c_in: int = 3, classes: int = 10) -> int:
    """A CIFAR ResNet of depth 6n + 2 with a norm of 2 parameters per channel (BatchNorm or
    GroupNorm) and bias-free 3x3 convolutions, counted layer by layer."""
    conv = lambda a, b, k=3: a * b * k * k                    # noqa: E731
    stem = conv(c_in, 16) + 2 * 16
    block = lambda a, b: conv(a, b) + 2 * b + conv(b, b) + 2 * b   # noqa: E731
    stages = n * block(16, 16) + block(16, 32) + (n - 1) * block(32, 32) \
        + block(32, 64) + (n - 1) * block(64, 64)
    project = (conv(16, 32, 1) + 2 * 32 + conv(32, 64, 1) + 2 * 64) if shortcut == "B" else 0
    return stem + stages + project + 64 * classes + classes


def test_hand_counts_of_the_cifar_resnets():
    # ResNet-20, option A, 10 classes: stem 3*16*9 + 32 = 464; stage 1: 3 blocks of
    # 2 * (16*16*9 + 32) = 4,672 -> 14,016; stage 2: (16*32*9 + 64) + (32*32*9 + 64) = 13,952
    # and 2 blocks of 2 * (32*32*9 + 64) = 18,560 -> 51,072; stage 3: (32*64*9 + 128) +
    # (64*64*9 + 128) = 55,552 and 2 of 2 * (64*64*9 + 128) = 73,984 -> 203,520; dense 650.
    assert 464 + 14_016 + 51_072 + 203_520 + 650 == _cifar_resnet(3) == 269_722
    # option B adds the two projections: 16*32 + 64 and 32*64 + 128 (2,752): the 272,474 often
    # quoted for ResNet-20 is this variant's count, not option A's
    assert _cifar_resnet(3, "B") == 269_722 + 576 + 2_176 == 272_474
    assert (_cifar_resnet(1), _cifar_resnet(5), _cifar_resnet(9)) == (75_290, 464_154, 853_018)


# ResNet-18, CIFAR stem, 10 classes: stem 3*64*9 + 128 = 1,856; stage 1: 2 blocks of
# 2 * (64*64*9 + 128) = 73,984 -> 147,968; stage 2: 64*128*9 + 128*128*9 + 512 + projection
# 64*128 + 256 = 230,144, then 2 * 147,456 + 512 = 295,424 -> 525,568; stage 3: 294,912 +
# 589,824 + 1,024 + 32,768 + 512 = 919,040, then 1,180,672 -> 2,099,712; stage 4: 1,179,648 +
# 2,359,296 + 2,048 + 131,072 + 1,024 = 3,673,088, then 4,720,640 -> 8,393,728; dense 5,130.
RESNET18 = 1_856 + 147_968 + 525_568 + 2_099_712 + 8_393_728 + 5_130          # 11,173,962
# VGG-16 (with biases): convolutions 3->64 1,792; 64->64 36,928; 64->128 73,856; 128->128
# 147,584; 128->256 295,168; 2 x 256->256 590,080; 256->512 1,180,160; 5 x 512->512 2,359,808
# (14,714,688); head 2 x (512*512 + 512) + 512*10 + 10 = 530,442.
VGG16 = 1_792 + 36_928 + 73_856 + 147_584 + 295_168 + 2 * 590_080 + 1_180_160 \
    + 5 * 2_359_808 + 530_442                                                 # 15,245,130
# VGG-11: 3->64, 64->128, 128->256, 256->256, 256->512, 3 x 512->512, and the same head
VGG11 = 1_792 + 73_856 + 295_168 + 590_080 + 1_180_160 + 3 * 2_359_808 + 530_442
# BatchNorm: 2 per channel of every convolution (VGG-16: 2 x (2*64 + 2*128 + 3*256 + 6*512))
VGG16_BN = VGG16 + 2 * (2 * 64 + 2 * 128 + 3 * 256 + 6 * 512)
# MobileNet: stem 3*32*9 + 64 = 928; a block c -> d: depthwise 9c + 2c, pointwise c*d + 2d
MOBILE_BLOCKS = [(32, 64), (64, 128), (128, 128), (128, 256), (256, 256), (256, 512),
                 *[(512, 512)] * 5, (512, 1024), (1024, 1024)]
MOBILENET = 928 + sum(11 * c + c * d + 2 * d for c, d in MOBILE_BLOCKS) + 1024 * 10 + 10
# LeNet-5 on 32x32x3: conv 3*6*25 + 6 = 456; conv 6*16*25 + 16 = 2,416; dense 16*5*5 = 400
# -> 120: 48,120; 120 -> 84: 10,164; 84 -> 10: 850
LENET_CIFAR = 456 + 2_416 + 48_120 + 10_164 + 850                             # 62,006
# on 28x28x1 (first convolution padded by 2, so again 16 x 5 x 5), 62 classes: conv 156
LENET_FEMNIST = 156 + 2_416 + 48_120 + 10_164 + 84 * 62 + 62                  # 66,126


@pytest.mark.parametrize("name,options,shape,classes,count", [
    ("lenet5", {}, CIFAR, 10, LENET_CIFAR),
    ("lenet5", {}, FEMNIST, 62, LENET_FEMNIST),
    ("resnet", {}, CIFAR, 10, 269_722),
    ("resnet", {"shortcut": "B"}, CIFAR, 10, 272_474),
    ("resnet", {"depth": 8, "norm": "group"}, CIFAR, 10, 75_290),
    ("resnet", {"depth": 56}, CIFAR, 10, 853_018),
    # no norm: the 2 x 16 + 6 x 2 x 16 + ... norm parameters go, every convolution gains a bias
    ("resnet", {"norm": "none"}, CIFAR, 10, 269_722 - 2 * (7 * 16 + 6 * 32 + 6 * 64)
     + (7 * 16 + 6 * 32 + 6 * 64)),
    ("resnet", {"depth": 18}, CIFAR, 10, RESNET18),
    ("vgg", {}, CIFAR, 10, VGG16),
    ("vgg", {"depth": 11}, CIFAR, 10, VGG11),
    ("vgg", {"batch_norm": True}, CIFAR, 10, VGG16_BN),
    ("mobilenet", {}, CIFAR, 10, MOBILENET),
])
def test_parameter_counts(name, options, shape, classes, count):
    assert _build(name, shape, classes, **options).n_params == count
    assert (RESNET18, VGG16, VGG11, MOBILENET) == (11_173_962, 15_245_130, 9_750_922,
                                                   3_217_226)


def test_lenet5_flops_are_its_products_counted_twice():
    """flops.py counts a product of m n k as 2 m n k (multiply and add; biases, ReLU and
    pooling not counted): a convolution 2 Cin Cout 25 Hout Wout, a dense layer 2 n_in n_out."""
    model = _build("lenet5")
    assert model.fwd_flops == 2 * (3 * 6 * 25 * 28 * 28 + 6 * 16 * 25 * 10 * 10
                                   + 400 * 120 + 120 * 84 + 84 * 10) == 1_303_440
    model = _build("lenet5", FEMNIST, 62)         # padded: the first maps are 28x28 again
    assert model.fwd_flops == 2 * (1 * 6 * 25 * 28 * 28 + 6 * 16 * 25 * 10 * 10
                                   + 400 * 120 + 120 * 84 + 84 * 62)


# ------------------------------------------------------------------------ outputs and norms
@pytest.mark.parametrize("name,options,shape", [
    ("lenet5", {}, (3072,)), ("lenet5", {}, FEMNIST), ("lenet5", {}, (28, 28)),
    ("resnet", {"depth": 8}, (3072,)), ("resnet", {"depth": 8, "norm": "group"}, FEMNIST),
    ("resnet", {"depth": 8, "norm": "none", "width": 0.5}, (64,)),
    ("vgg", {"depth": 11}, (3072,)), ("vgg", {"depth": 11, "batch_norm": True}, (3, 40, 40)),
    ("mobilenet", {"width": 0.25}, (3072,)), ("mobilenet", {"width": 0.25}, FEMNIST),
])
def test_one_score_per_class_through_the_build_path(name, options, shape):
    model = _build(name, shape, 7, **options)
    assert tuple(model.out_shape) == (1, 7)
    g = torch.Generator().manual_seed(0)
    w = model.init(g)[None]
    assert torch.isfinite(w).all() and w.shape == (1, model.n_params)
    out = model.forward(w, torch.randn(1, 2, math.prod(shape), generator=g))
    assert out.shape == (1, 2, 7) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_norm_choice(name):
    small = {"depth": 8} if name == "resnet" else {"width": 0.25}

    def norms(**options):
        mods = list(_build(name, CIFAR, 10, **small, **options).module.modules())
        return mods, [m for m in mods if isinstance(m, (nn.BatchNorm2d, nn.GroupNorm))]

    mods, found = norms(norm="group")
    assert found and all(type(m) is nn.GroupNorm and m.num_groups == 2 for m in found)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in mods)
    _, found = norms(norm="group", groups=4)
    assert {m.num_groups for m in found} == {4}
    mods, found = norms()
    assert found and all(type(m) is nn.BatchNorm2d for m in found)
    assert all(m.bias is None for m in mods if isinstance(m, nn.Conv2d))
    mods, found = norms(norm="none")
    assert not found and all(m.bias is not None for m in mods if isinstance(m, nn.Conv2d))


def test_group_norm_parameters_start_as_torch_leaves_them():
    """init_values: GroupNorm weight 1, bias 0; convolutions uniform(+-1/sqrt(fan_in))."""
    model = _build("resnet", (1, 8, 8), 10, depth=8, norm="group")
    w = model.unflatten(model.init(torch.Generator().manual_seed(1)))
    assert torch.equal(w["norm1.weight"], torch.ones(16))
    assert torch.equal(w["norm1.bias"], torch.zeros(16))
    assert 0.25 < float(w["conv1.weight"].abs().max()) <= 1 / 3          # fan_in 1 x 3 x 3


# ------------------------------------------------------------------------ option errors
@pytest.mark.parametrize("name,options,key,message", [
    ("resnet", {"depth": 19}, "depth", "depth must be one of 8, 20, 32, 56, 18, not 19"),
    ("resnet", {"depth": True}, "depth", "depth must be one of"),
    ("resnet", {"norm": "layer"}, "norm", "norm must be one of batch, group, none"),
    ("resnet", {"norm": "group", "groups": 3}, "groups", "groups (3) must divide"),
    ("resnet", {"groups": 0}, "groups", "positive integer"),
    ("resnet", {"width": 0}, "width", "width must be a number in (0, 64]"),
    ("resnet", {"shortcut": "C"}, "shortcut", "shortcut must be A or B"),
    ("vgg", {"depth": 19}, "depth", "depth must be one of 11, 16, not 19"),
    ("vgg", {"batch_norm": "yes"}, "batch_norm", "batch_norm must be true or false"),
    ("vgg", {"dropout": -0.1}, "dropout", "dropout must be a number in [0, 1)"),
    ("lenet5", {"dropout": 1.0}, "dropout", "dropout must be a number in [0, 1)"),
    ("mobilenet", {"width": -1}, "width", "width must be"),
    ("mobilenet", {"norm": "group", "groups": 5}, "groups", "must divide"),
])
def test_bad_options_name_their_key(name, options, key, message):
    with pytest.raises(ModelOptionError) as err:
        _build(name, CIFAR, 10, **options)
    assert err.value.key == key and message in str(err.value)


def test_images_too_small_are_refused():
    with pytest.raises(ValueError, match="vgg needs images of at least 32x32 pixels"):
        _build("vgg", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="lenet5 needs images of at least 10x10"):
        _build("lenet5", (64,), 10)


# ------------------------------------------------------------------------ runs
def _digits(tmp_path, model: dict, name: str = "zoo", **overrides) -> str:
    return make_scenario(
        tmp_path, name=name, seed=1,
        topology={"edges": {"count": 2}, "clients": {"count": 4, "compute_flops": 1.0e9}},
        data={"name": "digits", "partition": {"kind": "iid"}, "test_fraction": 0.2},
        model=model,
        train={"rounds": 2, "clients_per_round": "all",
               "local": {"steps": 5, "batch_size": 10, "lr": 0.1}},
        algorithms=[{"name": "fedavg"}], **overrides)


def _run(sc, world, kind: str, out):
    ex = dataclasses.replace(sc.train.executor, kind=kind)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False)
    return dict(np.load(out / "final_params.npz")), read_csv(out / "metrics.csv")


def test_resnet8_group_norm_trains_and_the_batched_executor_equals_the_sequential(tmp_path):
    """Two rounds of FedAvg on digits: the loss falls, the accuracy is finite, and the batched
    executor (all clients at once through torch.func.vmap: 1.5 MFLOP per 8x8 image, below the
    2 MFLOP of "auto") gives the sequential executor's per-client autograd models to 1e-5.

    Compared with oneDNN's CPU convolutions off: with them (torch 2.13, AVX-512) the sequential
    executor's first step of client 1 here is 4.8e-3 off a float64 reference in
    blocks.1.conv2.weight's gradient (the 32 -> 32 convolution on 4x4 maps) where the vmap
    path is 2e-7 off, and the two final models differ by 1e-2; without oneDNN both are within
    2e-7 of float64 and the models agree to 1.2e-7. The loop path's accuracy is oneDNN's, not
    the model's."""
    sc = load(_digits(tmp_path, {"name": "resnet", "depth": 8, "norm": "group"}),
              out=str(tmp_path / "out"))
    world = build_world(sc)
    assert world.model.n_params == _cifar_resnet(1, c_in=1) and world.model.batching == "vmap"
    with torch.backends.mkldnn.flags(enabled=False):
        pb, mb = _run(sc, world, "batched", tmp_path / "batched")
        ps, ms = _run(sc, world, "sequential", tmp_path / "sequential")
    loss = [float(r["train_loss"]) for r in mb]
    acc = [float(r["test_acc"]) for r in mb]
    assert len(loss) == 3 and loss[-1] < loss[0] and all(map(math.isfinite, acc))
    assert np.abs(pb["global"] - world.w0.double().numpy()).max() > 1e-3
    assert sorted(pb) == sorted(ps)
    for key in pb:
        np.testing.assert_allclose(pb[key], ps[key], rtol=0, atol=1e-5, err_msg=key)


def test_a_bad_option_in_a_scenario_names_the_model_key(tmp_path):
    sc = load(_digits(tmp_path, {"name": "resnet", "depth": 19}), out=str(tmp_path / "out"))
    with pytest.raises(ScenarioError, match=r"model\.depth = 19: depth must be one of 8, 20, "
                                            r"32, 56, 18"):
        build_world(sc)


# the declarations and the option check of a scenario, in a fresh process: no torch
TORCH_FREE = """
import sys
from hierfl.config.schema import ModelSpec
from hierfl.models.registry import MODELS, model_facts, option_problems
facts = {n: model_facts(n) for n in ("lenet5", "resnet", "vgg", "mobilenet")}
assert all(f.inputs == "images" and f.task == "classification" for f in facts.values())
assert sorted(facts["resnet"].options) == ["depth", "groups", "norm", "shortcut", "width"]
print(option_problems(ModelSpec(name="resnet", options={"depht": 20}))[0][1])
print("torch-imported:", "torch" in sys.modules)
"""


def test_declarations_and_a_misspelt_option_need_no_torch(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", TORCH_FREE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "torch-imported: False", proc.stdout + proc.stderr
    assert "unknown key for model 'resnet' (did you mean 'depth'?)" in proc.stdout
    # `hierfl validate` refuses the key before any model is built: no torch either
    path = _digits(tmp_path, {"name": "resnet", "depht": 20})
    probe = ("import runpy, sys\nsys.argv = ['hierfl', 'validate', sys.argv[1]]\n"
             "try:\n    runpy.run_module('hierfl', run_name='__main__')\n"
             "except SystemExit as exc:\n    print('exit:', exc.code)\n"
             "print('torch-imported:', 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", probe, path], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-2:] == ["exit: 2", "torch-imported: False"], \
        proc.stdout + proc.stderr
    assert "model.depht" in proc.stderr and "did you mean 'depth'" in proc.stderr
