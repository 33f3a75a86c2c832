"""Crash safety: a run interrupted (paused, or SIGKILLed) and resumed gives byte-identical
outputs to an uninterrupted run, for every registered algorithm."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from hierfl.algorithms.registry import REGISTRY
from hierfl.run import run_scenario
from hierfl.scenario.load import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _scenario(tmp_path, algorithms, rounds=6, every=2, extra_topo=None, train=None):
    topo = {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
            "clients": {"count": 6, "compute_flops": {"dist": "uniform", "low": 1e6, "high": 4e6},
                        "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}}}
    topo.update(extra_topo or {})
    doc = {"name": "resume", "seed": 3, "topology": topo,
           "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 40},
                    "dim": 8, "classes": 3},
           "model": {"name": "logreg"},
           "train": {"rounds": rounds, "clients_per_round": 4, "checkpoint_every": every,
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.05}, **(train or {})},
           "algorithms": algorithms}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _outputs(out, label):
    d = os.path.join(out, label)
    files = {k: open(os.path.join(d, f"{k}.csv"), "rb").read()
             for k in ("metrics", "clients", "trace", "clients_eval")}
    with np.load(os.path.join(d, "final_params.npz")) as z:
        files.update({k: z[k].tobytes() for k in z.files})
    return files


def _hier_entry(name):
    cls = REGISTRY[name]
    entry = {"name": name}
    if cls.hierarchical:
        entry["edge_rounds"] = 2
    return entry


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_pause_and_resume_is_bit_identical(tmp_path, name):
    path = _scenario(tmp_path, [_hier_entry(name)])
    sc = load(path, out=str(tmp_path / "ref"))
    run_scenario(sc, progress=False)
    sc2 = load(path, out=str(tmp_path / "cut"))
    res = run_scenario(sc2, progress=False, stop_after=3)
    assert next(iter(res.values())).paused_at == 3
    assert not os.path.exists(tmp_path / "cut" / name / "final_params.npz")
    run_scenario(sc2, progress=False, resume=True)
    assert _outputs(str(tmp_path / "ref"), name) == _outputs(str(tmp_path / "cut"), name)
    assert not os.path.exists(tmp_path / "cut" / name / "checkpoint.npz")


def test_resume_keeps_finished_algorithms(tmp_path):
    path = _scenario(tmp_path, [{"name": "fedavg"}, {"name": "fedavg", "label": "second"}])
    sc = load(path, out=str(tmp_path / "o"))
    run_scenario(sc, progress=False)
    before = os.path.getmtime(tmp_path / "o" / "fedavg" / "metrics.csv")
    time.sleep(0.05)
    run_scenario(sc, progress=False, resume=True)
    assert os.path.getmtime(tmp_path / "o" / "fedavg" / "metrics.csv") == before


def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path):
    """A real crash: SIGKILL the CLI once a checkpoint exists, resume, compare everything."""
    path = _scenario(tmp_path, [{"name": "fedavg"}, {"name": "scaffold"}], rounds=40, every=3,
                     train={"local": {"steps": 40, "batch_size": 5, "lr": 0.05}})
    cli = [sys.executable, "-m", "hierfl", "run", path, "--quiet"]
    subprocess.run(cli + ["--out", str(tmp_path / "ref")], check=True, cwd=ROOT,
                   capture_output=True)
    out = tmp_path / "cut"
    proc = subprocess.Popen(cli + ["--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt = out / "scaffold" / "checkpoint.npz"
    deadline = time.time() + 120
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert ckpt.exists(), "the run finished or stalled before a checkpoint could be taken"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "scaffold" / "final_params.npz").exists()
    r = subprocess.run(cli + ["--out", str(out), "--resume"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    for label in ("fedavg", "scaffold"):
        assert _outputs(str(tmp_path / "ref"), label) == _outputs(str(out), label)


def test_background_checkpoint_owns_its_snapshot(tmp_path):
    """Checkpoints are written in a thread while the next rounds run and change the state in
    place (SCAFFOLD's control variates): the snapshot must be a copy taken at its round."""
    import torch

    from hierfl.exec import make_executor
    from hierfl.run import build_world, checkpoint_arrays, make_algorithm, make_simulation
    from hierfl.sim.trace import Trace

    sc = load(_scenario(tmp_path, [{"name": "scaffold"}]), out=str(tmp_path / "o"))
    world = build_world(sc)
    algo = make_algorithm(sc, sc.algorithms[0], world)
    sim = make_simulation(sc, sc.algorithms[0], world, algo, make_executor("batched"), Trace())
    arrays = checkpoint_arrays(2, algo, sim, {"metrics": 0, "clients": 0, "trace": 0})
    before = {k: v.copy() for k, v in arrays.items()}
    state = algo.state_tensors()
    assert any(v.numel() > 1 for v in state.values())
    with torch.no_grad():
        for v in state.values():
            v.add_(1.0)                                   # the next round, in place
    for k, v in arrays.items():
        assert np.array_equal(v, before[k]), k


def test_background_checkpoint_error_is_raised(tmp_path):
    """A checkpoint that cannot be written fails the run, though written in a thread."""
    path = _scenario(tmp_path, [{"name": "fedavg"}], rounds=4, every=2)
    sc = load(path, out=str(tmp_path / "o"))
    os.makedirs(tmp_path / "o" / "fedavg" / "checkpoint.npz")   # os.replace onto a folder fails
    with pytest.raises(IsADirectoryError):
        run_scenario(sc, progress=False)
    assert not os.path.exists(tmp_path / "o" / "fedavg" / "final_params.npz")


@pytest.mark.parametrize("damage", ["metrics", "trace", "checkpoint"])
def test_a_damaged_file_is_refused_on_resume_not_padded(tmp_path, capsys, damage):
    """A file shorter than its checkpoint says (its tail lost: a crash before it reached the
    disk, or a hand) was padded with NUL bytes and appended to, exit 0; a cut checkpoint was a
    zipfile traceback. Both are refused now, naming the file, and nothing is changed."""
    from hierfl.cli import main
    path = _scenario(tmp_path, [{"name": "fedavg"}])
    out = tmp_path / "cut"
    assert main(["run", path, "--out", str(out), "--stop-after", "4", "--no-report",
                 "--quiet"]) == 0
    f = out / "fedavg" / ("checkpoint.npz" if damage == "checkpoint" else f"{damage}.csv")
    data = f.read_bytes()
    f.write_bytes(data[:-30])
    before = {p.name: p.read_bytes() for p in (out / "fedavg").iterdir()}
    capsys.readouterr()
    assert main(["run", path, "--out", str(out), "--resume", "--no-report", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f.name in err and "--resume" in err and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in (out / "fedavg").iterdir()} == before
    assert b"\0" not in (out / "fedavg" / "metrics.csv").read_bytes()
