"""The shipped scenarios on data sets that are not shipped (femnist_cnn, cifar10_dirichlet,
shakespeare_lstm, cifar_resnet): without their files `hierfl validate` exits 2 naming `hierfl data fetch`;
with small files in the real formats (LEAF JSON, CIFAR binary) where a copy of the scenario
points, the copy validates and runs a round of every algorithm on a tiny topology, learning
something (the global model moves, every output is finite)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

import golden
from conftest import outputs_of
from datasets_util import femnist_users, leaf_doc, shakespeare_users, write_cifar_set, write_leaf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = ["femnist_cnn", "cifar10_dirichlet", "shakespeare_lstm", "cifar_resnet"]
FETCH = {"femnist_cnn": "hierfl data fetch leaf", "shakespeare_lstm": "hierfl data fetch leaf",
         "cifar10_dirichlet": "hierfl data fetch cifar10",
         "cifar_resnet": "hierfl data fetch cifar10"}


def _hierfl(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "hierfl", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def _files(name: str, folder: str) -> dict:
    """Small files in the real format of the scenario's set; returns its data: overrides."""
    if name in ("cifar10_dirichlet", "cifar_resnet"):
        write_cifar_set(folder, "cifar10", per_file=12)
        return {"root": folder}
    users = femnist_users(6) if name == "femnist_cnn" else shakespeare_users(6)
    half = dict(list(users.items())[:3]), dict(list(users.items())[3:])
    tests = {u: (x[:2], y[:2]) for u, (x, y) in users.items()}
    write_leaf(folder, [leaf_doc(half[0]), leaf_doc(half[1])], [leaf_doc(tests)])
    return {"path": folder, "users": 6}


def _copy(name: str, tmp_path) -> str:
    """The shipped scenario with its data where the small files are, 4 clients under 2 edges,
    one round of 3 clients (LSTM: 2 local steps)."""
    with open(os.path.join(ROOT, "scenarios", f"{name}.yaml")) as fh:
        doc = yaml.safe_load(fh)
    doc["data"].update(_files(name, str(tmp_path / "data")))
    doc["topology"] = {"edges": {"count": 2}, "clients": {"count": 4, "compute_flops": 1.0e9}}
    doc["train"].update(rounds=1, clients_per_round=3, eval_every=1)
    if doc["model"]["name"] == "char_lstm":
        doc["train"]["local"] = {"steps": 2, "batch_size": 4, "lr": 0.5}
    doc["output"] = str(tmp_path / "out")
    path = str(tmp_path / f"{name}.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    return path


@pytest.mark.parametrize("name", REAL)
def test_marked_and_left_out_of_the_fingerprints(name):
    path = os.path.join(ROOT, "scenarios", f"{name}.yaml")
    assert golden.needs_data(path)
    assert os.path.relpath(path, ROOT) not in golden.shipped()
    assert "scenarios/quickstart.yaml" in golden.shipped()


@pytest.mark.parametrize("name", REAL)
def test_without_files_validate_exits_2_naming_fetch(name, tmp_path):
    """The shipped scenario, its data folder pointed at one that does not exist (so the check
    runs on machines that fetched the data too)."""
    with open(os.path.join(ROOT, "scenarios", f"{name}.yaml")) as fh:
        doc = yaml.safe_load(fh)
    key = "path" if "path" in doc["data"] else "root"
    doc["data"][key] = str(tmp_path / "absent")
    if isinstance(doc["topology"], str):
        doc["topology"] = os.path.normpath(os.path.join(ROOT, "scenarios", doc["topology"]))
    scen = tmp_path / f"{name}.yaml"
    scen.write_text(yaml.safe_dump(doc))
    proc = _hierfl("validate", str(scen))
    assert proc.returncode == 2, proc.stderr
    assert FETCH[name] in proc.stderr and "Traceback" not in proc.stderr
    assert ("data.path" if "path" in doc["data"] else "data.root") in proc.stderr


@pytest.mark.parametrize("name", REAL)
def test_with_small_real_files_it_validates_and_runs_a_round(tmp_path, name):
    import hierfl
    from hierfl.run import build_world

    path = _copy(name, tmp_path)
    proc = _hierfl("validate", path)
    assert proc.returncode == 0, proc.stderr
    assert "is valid" in proc.stdout
    sc = hierfl.load(path)
    labels = [e.label for e in sc.algorithms]
    with open(os.path.join(ROOT, "scenarios", f"{name}.yaml")) as fh:
        assert len(labels) == len(yaml.safe_load(fh)["algorithms"])
    w0 = build_world(sc).w0.double().numpy()
    results = hierfl.run_scenario(sc, progress=False)
    out = outputs_of(sc.output, labels, results)
    for label in labels:
        rows = out.metrics[label]
        assert [r["round"] for r in rows] == ["0", "1"]
        assert all(0.0 <= float(r["test_acc"]) <= 1.0 for r in rows)
        final = out.final(label)
        assert final.shape == w0.shape and np.isfinite(final).all()
        assert np.abs(final - w0).max() > 1e-6, label                # it trained
        assert len(out.clients[label]) >= 3            # every selected client trained
