"""train.executor.device: auto | cpu | cuda.

On CPU: auto resolves to cpu, cuda is a validation error naming the key (exit 2), and the
device path of the batched executor (program, model and data copied to the device, the result
back) gives exactly the same bytes as no move at all, checked by forcing that path with the CPU
as its device for every algorithm on a logreg and a small CNN. With CUDA: CPU and CUDA agree
to 1e-4 relative over a few rounds (skipped without it)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import torch

from hierfl.algorithms.registry import REGISTRY
from hierfl.config.errors import ScenarioError
from hierfl.exec.device import OnDevice, resolve, tree_to
from hierfl.exec.factory import executor_for
from hierfl.exec.local import BatchedExecutor
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

from conftest import make_scenario, read_csv

CUDA = torch.cuda.is_available()
ROOT = __import__("os").path.dirname(__import__("os").path.dirname(__file__))


@pytest.mark.skipif(CUDA, reason="auto resolves to cuda here")
def test_auto_is_cpu_without_cuda_and_cuda_is_an_error():
    assert resolve("auto") == torch.device("cpu")
    assert resolve("cpu") == torch.device("cpu")
    with pytest.raises(ScenarioError) as e:
        resolve("cuda", "s.yaml")
    p = e.value.problems[0]
    assert (p.file, p.key, p.value) == ("s.yaml", "train.executor.device", "cuda")


@pytest.mark.skipif(CUDA, reason="needs a machine without CUDA")
def test_validate_cuda_without_cuda_exits_2(tmp_path):
    path = make_scenario(tmp_path, **{"train.executor.device": "cuda"})
    proc = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "train.executor.device" in proc.stderr and "Traceback" not in proc.stderr


def test_default_and_cpu_executors():
    sc_exec = load_default_exec()
    ex = executor_for(dataclasses.replace(sc_exec, device="cpu"))
    assert isinstance(ex, BatchedExecutor) and ex.device == torch.device("cpu")
    assert not ex.on.moves


def load_default_exec():
    from hierfl.config.schema import ExecutorSpec
    spec = ExecutorSpec()
    assert spec.device == "auto"
    return spec


def test_tree_to_moves_every_tensor_and_swaps_the_model():
    from hierfl.learn.solver import TermsProgram
    from hierfl.learn.terms import Linear, Prox
    from hierfl.models.functional import Layer, Model

    model = Model([Layer(3, 2, True)], "classification", "m")
    start = torch.randn(2, model.n_params)
    prog = TermsProgram(model, start, (Prox(0.5, start[0]), Linear(torch.ones(2, 8))))
    other = Model([Layer(3, 2, True)], "classification", "m2")
    moved = tree_to(prog, torch.device("cpu"), model, {"model": other})
    assert moved.model is other and moved is not prog
    assert torch.equal(moved.start, start) and moved.terms[0].mu == 0.5
    assert torch.equal(moved.terms[1].v, torch.ones(2, 8))


class _Forced(OnDevice):
    """The device path with the CPU as its device: every copy and move is made."""

    @property
    def moves(self) -> bool:
        return True


def _scenario(tmp_path, name, model):
    data = {"name": "digits", "partition": {"kind": "iid"}} if model == "cnn" else \
        {"name": "synthetic", "alpha": 0.5, "beta": 0.5, "dim": 5, "classes": 3,
         "samples": {"dist": "uniform", "low": 9, "high": 30}}
    spec = {"name": "cnn", "channels": [2, 3], "dense": 4} if model == "cnn" else \
        {"name": "logreg"}
    path = make_scenario(
        tmp_path, name="dev", seed=2,
        topology={"edges": {"count": 2}, "clients": {"count": 6, "compute_flops": 1.0e9}},
        data=data, model=spec,
        train={"rounds": 2, "clients_per_round": 4,
               "local": {"epochs": 1, "batch_size": 8, "lr": 0.05}},
        algorithms=[{"name": name}])
    return load(path, out=str(tmp_path / "out"))


def _run(sc, world, executor, out):
    run_algorithm(sc, sc.algorithms[0], world, str(out), progress=False, executor=executor)
    return dict(np.load(out / "final_params.npz")), read_csv(out / "clients.csv")


@pytest.mark.parametrize("model", ["logreg", "cnn"])
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_device_path_is_byte_identical_on_cpu(tmp_path, name, model):
    sc = _scenario(tmp_path, name, model)
    world = build_world(sc)
    plain = _run(sc, world, BatchedExecutor("cpu"), tmp_path / "plain")
    forced = BatchedExecutor("cpu")
    forced.on = _Forced("cpu")
    moved = _run(sc, world, forced, tmp_path / "moved")
    assert sorted(plain[0]) == sorted(moved[0])
    for k in plain[0]:
        assert np.array_equal(plain[0][k], moved[0][k]), k
    assert plain[1] == moved[1]
    assert np.abs(plain[0]["global"] - world.w0.double().numpy()).max() > 1e-4   # it trained


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("model", ["logreg", "cnn"])
def test_cuda_agrees_with_cpu(tmp_path, model):
    sc = _scenario(tmp_path, "fedavg", model)
    world = build_world(sc)
    cpu = _run(sc, world, BatchedExecutor("cpu"), tmp_path / "cpu")
    gpu = _run(sc, world, BatchedExecutor("cuda"), tmp_path / "cuda")
    for k in cpu[0]:
        np.testing.assert_allclose(gpu[0][k], cpu[0][k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert [r["steps"] for r in cpu[1]] == [r["steps"] for r in gpu[1]]


@pytest.mark.parametrize("name", ["fedavg", "scaffold", "fedprox"])
def test_loop_path_chunks_are_byte_identical(tmp_path, monkeypatch, name):
    """Loop-path models are solved one client per call (exec/local.py loop_chunk): the same
    bytes as one lock-step call over all clients."""
    import hierfl.exec.local as local

    sc = _scenario(tmp_path, name, "cnn")
    world = build_world(sc)
    world.model.batching = "loop"
    assert local.loop_chunk(world.model, 4) == 1 and local.loop_chunk(world.model, 1) is None
    chunked = _run(sc, world, BatchedExecutor("cpu"), tmp_path / "chunked")
    monkeypatch.setattr(local, "loop_chunk", lambda model, c: None)
    whole = _run(sc, world, BatchedExecutor("cpu"), tmp_path / "whole")
    for k in whole[0]:
        assert np.array_equal(whole[0][k], chunked[0][k]), k
    assert whole[1] == chunked[1]
