"""Ray: the ray executor against the batched one, sweeps on Ray against the local backend, and a
sweep whose driver is killed mid-way, on a real one-node Ray cluster started and stopped here."""
from __future__ import annotations

import dataclasses
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (pip install 'hierfl[ray]'; `make test` installs it)")

from hierfl import sweep as sweep_mod  # noqa: E402
from hierfl.exec import ray_exec  # noqa: E402
from hierfl.exec.local import BatchedExecutor  # noqa: E402
from hierfl.learn.batches import full_plan, minibatch_plan  # noqa: E402
from hierfl.learn.solver import TermsProgram  # noqa: E402
from hierfl.learn.terms import Prox  # noqa: E402
from hierfl.models.functional import build_model  # noqa: E402
from hierfl.run import run_scenario  # noqa: E402
from hierfl.scenario.load import load  # noqa: E402
from hierfl.config.schema import ModelSpec  # noqa: E402
from conftest import make_scenario, outputs_of, read_csv, scenario_doc  # noqa: E402

pytestmark = pytest.mark.ray

TINY = scenario_doc(
    name="tiny", seed=3,
    topology={"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.0e8}},
              "clients": {"count": 6,
                          "compute_flops": {"dist": "lognormal", "median": 1.0e9, "sigma": 0.5},
                          "link": {"latency_s": 0.02, "bandwidth_Bps": 2.0e6}}},
    data={"name": "synthetic", "dim": 10, "classes": 3},
    train={"rounds": 3, "clients_per_round": 5, "local": {"steps": 6, "batch_size": 5, "lr": 0.05}},
    algorithms=[{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])


@pytest.fixture(scope="module")
def cluster():
    """A private one-node Ray cluster for this module (2 CPUs, no dashboard)."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 1024 * 1024)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _close(a: str, b: str) -> bool:
    if a == b:
        return True
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)


# ------------------------------------------------------------------------------ executor
def test_executor_chunks_equal_batched_on_a_hand_made_round(cluster):
    """6 clients in chunks of 4 (uneven), different budgets (one zero), a prox term and gamma
    stops: every field of the result equals the batched executor's."""
    g = torch.Generator().manual_seed(7)
    n, d, k = 6, 5, 3
    counts = np.array([10, 7, 12, 9, 11, 8])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    x = torch.randn(int(counts.sum()), d, generator=g)
    y = torch.randint(0, k, (int(counts.sum()),), generator=g)
    model = build_model(ModelSpec(name="logreg"), d, k, k)
    w0 = torch.randn(model.n_params, generator=g) * 0.1
    start = w0.repeat(n, 1) + 0.01 * torch.randn(n, model.n_params, generator=g)
    prog = TermsProgram(model, start, (Prox(0.1, w0),))
    sel = np.arange(n)
    budgets = np.array([3, 7, 10, 10, 1, 0])
    plan = minibatch_plan(offsets, sel, 4, budgets, 0, 1, 0, x, y)
    full = full_plan(offsets, sel, x, y).at(0)
    args = (torch.from_numpy(budgets), 0.3, 0.6, 2)
    ref = BatchedExecutor().run(prog, plan, full, *args)
    ex = ray_exec.RayExecutor(address="local", clients_per_task=4)
    puts = ray_exec.DATA.puts
    got = ex.run(prog, plan, full, *args)
    got2 = ex.run(prog, plan, full, *args)
    assert ex.tasks == 4                               # ceil(6 / 4) tasks per call
    assert ray_exec.DATA.puts - puts == 2              # x and y put once, not per call
    for r in (got, got2):
        torch.testing.assert_close(r.state[0], ref.state[0], atol=1e-5, rtol=0)
        assert torch.equal(r.steps, ref.steps)
        assert torch.equal(r.grad_evals, ref.grad_evals)
        assert torch.equal(r.full_evals, ref.full_evals)
        torch.testing.assert_close(r.gamma, ref.gamma, atol=1e-5, rtol=0, equal_nan=True)
    assert ref.steps.tolist()[5] == 0 and int(ref.steps.max()) <= 10
    # the run is not trivial: some client stopped early on gamma, parameters moved
    assert bool((ref.steps < torch.from_numpy(budgets)).any())
    assert float((ref.state[0] - start).abs().max()) > 1e-3


def test_scenario_with_ray_executor_equals_batched(cluster, tmp_path):
    f = make_scenario(tmp_path, TINY, name="tiny", **{"train.executor": {
        "kind": "ray", "address": "local", "clients_per_task": 2}})
    sc = load(f, out=str(tmp_path / "ray"))
    assert sc.train.executor.kind == "ray"
    puts = ray_exec.DATA.puts
    run_scenario(sc, progress=False)
    assert ray_exec.DATA.puts - puts == 2          # data shipped once for both algorithms
    ex = dataclasses.replace(sc.train.executor, kind="batched")
    b = dataclasses.replace(sc, output=str(tmp_path / "batched"),
                            train=dataclasses.replace(sc.train, executor=ex))
    run_scenario(b, progress=False)
    labels = ["fedavg", "hierfavg"]
    o_ray, o_b = (outputs_of(str(tmp_path / side), labels) for side in ("ray", "batched"))
    for label in labels:
        pr, pb = o_ray.params[label], o_b.params[label]
        assert sorted(pr) == sorted(pb)
        for key in pb:
            np.testing.assert_allclose(pr[key], pb[key], atol=1e-5, rtol=0)
        for rr, rb in ((o_ray.metrics[label], o_b.metrics[label]),
                       (o_ray.clients[label], o_b.clients[label])):
            assert len(rr) == len(rb) > 0
            for a, c in zip(rr, rb):
                assert a.keys() == c.keys()
                assert all(_close(a[k], c[k]) for k in a), (label, a, c)
        acc = [float(r["test_acc"]) for r in o_ray.metrics[label]]
        assert acc[-1] > acc[0]                        # it trained


# ------------------------------------------------------------------------------ sweeps
def _sweep_files(tmp_path, grid: str, name: str = "sw.yaml") -> str:
    make_scenario(tmp_path, TINY, name="base", **{"train.executor": {"kind": "batched"}})
    f = tmp_path / name
    f.write_text("base: base.yaml\ngrid:\n" + textwrap.indent(grid, "  ") +
                 "\noutput: out\npoint_reports: false\n")
    return str(f)


def _points(out: str) -> list[str]:
    return sorted(p for p in os.listdir(out) if os.path.isdir(os.path.join(out, p))
                  and not p.startswith("."))


def test_sweep_on_ray_equals_local_backend(cluster, tmp_path):
    f = _sweep_files(tmp_path, "algorithms[1].edge_rounds: [1, 2]\nseed: [0, 1]")
    sw_local = sweep_mod.load_sweep(f, out=str(tmp_path / "local"))
    sw_ray = sweep_mod.load_sweep(f, out=str(tmp_path / "ray"))
    assert len(sw_local.points) == 4
    assert sweep_mod.run_sweep(sw_local, "local", workers=2, progress=False) == {}
    assert sweep_mod.run_sweep(sw_ray, "ray", address="local", progress=False) == {}
    names = _points(str(tmp_path / "local"))
    assert names == _points(str(tmp_path / "ray")) == sorted(p.name for p in sw_local.points)
    finals = set()
    for pt in names:
        for side in ("local", "ray"):
            assert os.path.isfile(tmp_path / side / pt / "DONE")
        for label in ("fedavg", "hierfavg"):
            a = (tmp_path / "local" / pt / label / "metrics.csv").read_text()
            b = (tmp_path / "ray" / pt / label / "metrics.csv").read_text()
            assert a == b
            finals.add(read_csv(str(tmp_path / "ray" / pt / label / "metrics.csv"))[-1]
                       ["test_acc"])
    assert len(finals) > 1                                 # the grid values changed the runs
    # fedavg does not read edge_rounds: run once per seed, copied (on Ray: sent to the task)
    import json
    done = json.loads((tmp_path / "ray" / "edge_rounds=2,seed=1" / "DONE").read_text())
    assert done["reused"] == {"fedavg": "edge_rounds=1,seed=1"}
    assert (tmp_path / "local" / "sweep.csv").read_text() == \
        (tmp_path / "ray" / "sweep.csv").read_text()


def test_killed_sweep_keeps_finished_points_and_resumes(cluster, tmp_path):
    """The sweep driver (on Ray, one point at a time) is SIGKILLed after the first point's DONE;
    the rerun skips the finished points (files untouched) and completes the others."""
    f = _sweep_files(tmp_path, "seed: [0, 1]")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "hierfl", "sweep", f, "--backend", "ray", "--address",
           cluster, "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 150
    finished: list[str] = []
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if out.is_dir():
                finished = [p for p in _points(str(out)) if (out / p / "DONE").is_file()]
                if finished:
                    break
            time.sleep(0.05)
        assert finished, f"no point finished: {proc.stderr.read().decode() if proc.poll() else ''}"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    finished = [p for p in _points(str(out)) if (out / p / "DONE").is_file()]
    assert len(finished) == 1
    before = {}
    for p in finished:
        for root, _, files in os.walk(out / p):
            for name in files:
                full = os.path.join(root, name)
                before[full] = os.stat(full).st_mtime_ns
    killed_at = time.time_ns()
    rc = sweep_mod.main(f, backend="ray", address="local", progress=False)
    assert rc == 0
    pts = _points(str(out))
    assert len(pts) == 2 and all((out / p / "DONE").is_file() for p in pts)
    after = {path: os.stat(path).st_mtime_ns for path in before}
    assert after == before                             # finished points were not rerun
    for p in set(pts) - set(finished):
        assert os.stat(out / p / "DONE").st_mtime_ns >= killed_at
    assert not (out / ".staging").exists()
    rows = read_csv(str(out / "points.csv"))
    assert sorted({r["point"] for r in rows}) == pts


def test_failed_point_on_ray_names_its_kept_scenario(cluster, tmp_path):
    """A point that fails in a Ray worker (its folder there is a temporary one, gone): the error
    names OUTPUT/<point>/point.yaml, which the driver keeps (without DONE)."""
    from datasets_util import femnist_users, leaf_doc, scenario, write_leaf

    users = femnist_users(4)
    u = sorted(users)[0]
    write_leaf(str(tmp_path / "lf"), [leaf_doc({**users, u: (users[u][0][:1], [99])})],
               [leaf_doc(users)])                    # found only when the data are loaded
    scenario(str(tmp_path), "{name: leaf, path: lf}", 4, rounds=1)
    (tmp_path / "sw.yaml").write_text("base: s.yaml\ngrid:\n  seed: [2]\noutput: out\n")
    sw = sweep_mod.load_sweep(str(tmp_path / "sw.yaml"))
    failed = sweep_mod.run_sweep(sw, "ray", address="local", progress=False)
    kept = tmp_path / "out" / "seed=2" / "point.yaml"
    assert list(failed) == ["seed=2"] and f"ScenarioError: {kept}: data.path" in failed["seed=2"]
    assert "label 99 is out of range" in failed["seed=2"]
    assert kept.read_text() == sw.points[0].text and not (kept.parent / "DONE").exists()


def test_an_address_with_no_cluster_is_refused_at_once():
    """A host:port with nothing behind it: ray.init retried its GCS without end (a reader's
    run and sweep were still waiting after 100 s); refused now, naming the key."""
    import socket
    import time

    from hierfl.config.errors import ScenarioError
    from hierfl.exec.ray_exec import _reachable
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # a port nobody listens on
    t0 = time.monotonic()
    with pytest.raises(ScenarioError, match="no Ray cluster answers there") as exc:
        _reachable(f"127.0.0.1:{port}", "train.executor.address")
    assert exc.value.problems[0].key == "train.executor.address"
    assert time.monotonic() - t0 < 10
