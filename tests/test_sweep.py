"""Sweeps without Ray: key paths, point names, up-front validation (errors name the sweep file
and the grid key), the summary's mean and std over seeds, and resume on the local backend."""
from __future__ import annotations

import csv
import os

import numpy as np
import pytest

from hierfl import cli
from hierfl import sweep as sw
from hierfl.run import run_scenario
from hierfl.config.errors import ScenarioError
from hierfl.scenario.load import load
from hierfl.sweep.spec import STAGING

TOPOLOGY = """\
edges: {count: 2, link: {latency_s: 0.05, bandwidth_Bps: 1.0e8}}
clients:
  count: 4
  compute_flops: 1.0e9
  link: {latency_s: 0.02, bandwidth_Bps: 2.0e6}
"""

BASE = """\
name: tiny
seed: 3
topology: topo.yaml
data: {name: synthetic, dim: 8, classes: 3}
model: {name: logreg}
train:
  rounds: 2
  clients_per_round: 3
  local: {steps: 4, batch_size: 5, lr: 0.05}
algorithms:
  - {name: fedavg}
  - {name: hierfavg, edge_rounds: 2}
output: ignored
"""


def _files(tmp_path, grid: str, reports: bool = False) -> str:
    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    (tmp_path / "base.yaml").write_text(BASE)
    f = tmp_path / "sw.yaml"
    f.write_text("base: base.yaml\ngrid:\n" + "".join(f"  {line}\n" for line in
                                                  grid.splitlines()) + "output: out\n"
                 f"point_reports: {str(reports).lower()}\n")
    return str(f)


def _csv(path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ------------------------------------------------------------------------------ key paths
def test_parse_and_set_path():
    assert sw.parse_path("algorithms[1].mu") == ["algorithms", 1, "mu"]
    assert sw.parse_path("seed") == ["seed"]
    assert sw.parse_path("a[0][2].b") == ["a", 0, 2, "b"]
    for bad in ("a..b", "1a", "a[x]", "a.", "a[1"):
        assert sw.parse_path(bad) is None
    raw = {"algorithms": [{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}], "seed": 0}
    assert sw.set_path(raw, ["algorithms", 1, "mu"], 1.0) is None
    assert sw.set_path(raw, ["stragglers", "fraction"], 0.5) is None   # created
    assert raw["algorithms"][1]["mu"] == 1.0 and raw["stragglers"] == {"fraction": 0.5}
    assert "2 item(s)" in sw.set_path(raw, ["algorithms", 2, "mu"], 1.0)
    assert "not a list" in sw.set_path(raw, ["seed", 0], 1)
    assert "not a mapping" in sw.set_path(raw, ["seed", "x"], 1)


def test_point_names_use_last_key_name_and_values():
    keys = ["algorithms[1].mu", "stragglers.fraction", "seed"]
    paths = [sw.parse_path(k) for k in keys]
    names = sw.point_names(keys, paths, [[0, 0.01], [0.5], [1]], [(0, 0, 0), (1, 0, 0)])
    assert names == ["mu=0,fraction=0.5,seed=1", "mu=0.01,fraction=0.5,seed=1"]
    keys = ["algorithms[0].mu", "algorithms[1].mu"]          # same last name: whole path
    names = sw.point_names(keys, [sw.parse_path(k) for k in keys], [[1], [{"a": 1}, [2]]],
                           [(0, 0), (0, 1)])
    assert names == ["algorithms0-mu=1,algorithms1-mu=v0", "algorithms0-mu=1,algorithms1-mu=v1"]


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("grid,key,words", [
    ("algorithms[5].mu: [0.1]", "grid.algorithms[5].mu", "2 item(s)"),
    ("stragglers.fraction: [0, 1.5]", "grid.stragglers.fraction", "must be in [0, 1]"),
    ("train.local.lrr: [0.1]", "grid.train.local.lrr", "did you mean 'lr'"),
    ("seed: []", "grid.seed", "at least one value"),
    ("seed: [1, 1]", "grid.seed", "listed twice"),
    ("train.rounds: [1, true]", "grid.train.rounds", "expected an integer"),   # not "twice"
    ("a..b: [1]", "grid.a..b", "not a key path"),
    ("output: [x]", "grid.output", "output folder"),
    ("topology.clients.count: [4, 0]", "grid.topology.clients.count", "must be > 0"),
])
def test_bad_grid_names_sweep_file_and_key_and_runs_nothing(tmp_path, grid, key, words):
    f = _files(tmp_path, grid)
    with pytest.raises(ScenarioError) as exc:
        sw.load_sweep(f)
    probs = exc.value.problems
    assert any(p.file == f and p.key == key and words in p.message for p in probs), probs
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["grid", "base", "topology"])
def test_a_key_given_twice_in_a_sweep_or_its_base_is_refused(tmp_path, where):
    """YAML keeps the last of two equal keys: a grid key given twice silently lost its first
    values (one point run, not three); the sweep and the files it reads refuse it, like a
    scenario does."""
    f = _files(tmp_path, "train.rounds: [1, 2]\ntrain.rounds: [3]")
    if where != "grid":
        f = _files(tmp_path, "seed: [1, 2]")
        name = "base.yaml" if where == "base" else "topo.yaml"
        (tmp_path / name).write_text((tmp_path / name).read_text() + "seed: 4\nseed: 5\n"
                                     if where == "base" else TOPOLOGY + "edges: {count: 3}\n")
    with pytest.raises(ScenarioError) as exc:
        sw.load_sweep(f)
    key = {"grid": "grid.train.rounds", "base": "seed", "topology": "edges"}[where]
    file = f if where == "grid" else str(tmp_path / name)
    assert any(p.file == file and p.key == key and "key given twice" in p.message and p.line
               for p in exc.value.problems), exc.value.problems
    assert not (tmp_path / "out").exists()


def test_cli_sweep_bad_input_exits_2(tmp_path, capsys):
    f = _files(tmp_path, "stragglers.fraction: [2]")
    assert cli.main(["sweep", f, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f in err and "grid.stragglers.fraction = 2" in err


def test_points_are_self_contained_scenarios(tmp_path):
    s = sw.load_sweep(_files(tmp_path, "algorithms[1].edge_rounds: [1, 3]\nseed: [5]"))
    assert [p.name for p in s.points] == ["edge_rounds=1,seed=5", "edge_rounds=3,seed=5"]
    assert s.output == str(tmp_path / "out") and s.labels == ("fedavg", "hierfavg")
    # each point's text loads on its own, from another folder: topology inlined
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "p.yaml").write_text(s.points[1].text)
    sc = load(str(other / "p.yaml"))
    assert sc.seed == 5 and sc.algorithms[1].edge_rounds == 3 and sc.algorithms[0].name == "fedavg"


# ------------------------------------------------------------------------------ summary
def test_summary_uses_the_report_statistics(tmp_path):
    """Two finished seeds of one grid point, metrics written by hand: the final accuracy's mean
    and sample std; only seed 1 reaches the target, so its time stands alone (std undefined:
    an empty cell, as in a report's table.csv) and the cells say (1/2)."""
    out = tmp_path / "out"
    runs = {0: [(0, 0.0, 0.2), (1, 1.5, 0.5), (2, 3.0, 0.6)],
            1: [(0, 0.0, 0.2), (1, 2.0, 0.9), (2, 4.0, 0.7)]}        # round, time, accuracy
    points = []
    for seed, rows in runs.items():
        folder = out / f"seed={seed}"
        (folder / "fedavg").mkdir(parents=True)
        (folder / "fedavg" / "metrics.csv").write_text(
            "round,sim_time_s,bytes_up,bytes_down,test_acc\n"
            + "".join(f"{t},{s},{100 * t},{50 * t},{a}\n" for t, s, a in rows))
        (folder / sw.DONE).write_text("{}\n")
        points.append(sw.Point(folder.name, (("seed", seed),), "", 1))
    s = sw.Sweep(str(tmp_path / "sw.yaml"), ("seed",), tuple(points), str(out), 0.8, ("fedavg",))
    sw.summarize(s)
    (row,) = _csv(out / "sweep.csv")
    assert float(row["final_acc_mean"]) == pytest.approx(0.65, abs=1e-12)
    assert float(row["final_acc_std"]) == pytest.approx(np.std([0.6, 0.7], ddof=1), abs=1e-12)
    assert (row["seeds"], row["reached"]) == ("2", "1")
    assert float(row["time_to_target_s_mean"]) == 2.0 and row["time_to_target_s_std"] == ""
    assert float(row["bytes_to_target_mean"]) == 150.0 and row["bytes_to_target_std"] == ""
    pts = _csv(out / "points.csv")
    assert [(r["point"], r["time_to_target_s"], r["rounds"]) for r in pts] == [
        ("seed=0", "", "2.0"), ("seed=1", "2.0", "2.0")]
    md = (out / "sweep.md").read_text()
    assert "| fedavg | 2 | 0.650 ± 0.071 | 2.0 (1/2) | 150 B (1/2) | 1.0 (1/2) | 1/2 |" in md


# ------------------------------------------------------------------------------ running
def test_local_sweep_summary_and_resume(tmp_path):
    f = _files(tmp_path, "seed: [0, 1]")
    s = sw.load_sweep(f)
    out = tmp_path / "out"
    assert sw.run_sweep(s, "local", workers=1, progress=False) == {}
    a, b = (out / p.name for p in s.points)
    # a point is the full scenario run: the same metrics as running its scenario directly
    sc = load(str(b / sw.POINT_FILE), out=str(tmp_path / "direct"))
    assert sc.seed == 1
    run_scenario(sc, progress=False)
    for label in ("fedavg", "hierfavg"):
        assert (b / label / "metrics.csv").read_text() == \
            (tmp_path / "direct" / label / "metrics.csv").read_text()
    # summary: mean and sample std over the two seeds, from the points' own metrics.csv
    rows = {r["algorithm"]: r for r in _csv(out / "sweep.csv")}
    for label in ("fedavg", "hierfavg"):
        finals = [float(_csv(p / label / "metrics.csv")[-1]["test_acc"]) for p in (a, b)]
        assert float(rows[label]["seeds"]) == 2
        assert float(rows[label]["final_acc_mean"]) == pytest.approx(np.mean(finals), abs=1e-12)
        assert float(rows[label]["final_acc_std"]) == pytest.approx(
            abs(finals[0] - finals[1]) / np.sqrt(2), abs=1e-12)
    md = (out / "sweep.md").read_text()
    assert "±" in md and "sweep_test_acc.png" in md and (out / "sweep_test_acc.png").is_file()
    # resume: b is lost (only a partial folder without DONE is left); a must not be touched
    keep = (b / "fedavg" / "metrics.csv").read_text()
    mt = {p: os.stat(p).st_mtime_ns for p in a.rglob("*")}
    for p in sorted(b.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (b / "fedavg").mkdir()
    (b / "fedavg" / "metrics.csv").write_text("round\n0\n")
    f = _files(tmp_path, "seed: [0, 1]", reports=True)      # the rerun point writes its report
    s2 = sw.load_sweep(f)
    assert [p for p in s2.points if not sw.is_done(str(out), p)] == [s2.points[1]]
    assert sw.run_sweep(s2, "local", workers=1, progress=False) == {}
    assert {p: os.stat(p).st_mtime_ns for p in a.rglob("*")} == mt
    assert (b / "DONE").is_file() and (b / "fedavg" / "metrics.csv").read_text() == keep
    assert (b / "report.md").is_file() and not (a / "report.md").exists()
    # its title names the point's folder, not the staging folder it was written in
    # ("<point>.<random>": a title that changed with every run)
    assert (b / "report.md").read_text().splitlines()[0] == \
        f"# hierfl report: {sc.name} ({b.name})"
    # a changed base with finished points in the output is refused, not mixed in
    (tmp_path / "base.yaml").write_text(BASE.replace("rounds: 2", "rounds: 3"))
    with pytest.raises(ScenarioError, match="different scenario"):
        sw.run_sweep(sw.load_sweep(f), "local", progress=False)


def test_killed_local_worker_loses_no_finished_point(tmp_path):
    """SIGKILL the pool's worker process while it runs the second point: the first point stays,
    the second is rerun in a fresh worker (another pid) and the sweep completes."""
    import json
    import multiprocessing
    import signal
    import threading
    import time

    s = sw.load_sweep(_files(tmp_path, "seed: [0, 1]"))
    out = tmp_path / "out"
    first = out / s.points[0].name
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (first / "DONE").is_file():
            time.sleep(0.02)
        for proc in multiprocessing.active_children():   # the pool's one worker, ours
            os.kill(proc.pid, signal.SIGKILL)
            killed.append(proc.pid)

    t = threading.Thread(target=killer)
    t.start()
    try:
        failed = sw.run_sweep(s, "local", workers=1, progress=False)
    finally:
        t.join()
    assert failed == {} and len(killed) == 1
    pid = [json.loads((out / p.name / "DONE").read_text())["pid"] for p in s.points]
    assert pid[0] == killed[0] and pid[1] != killed[0]    # point 2 ran again, elsewhere
    assert all(sw.is_done(str(out), p) for p in s.points)


def test_sweep_over_data_name_leaves_out_base_keys_for_the_other_sets(tmp_path):
    """The base's alpha:/beta: are for its synthetic points: a synthetic_iid point (which reads
    neither) is written without them instead of failing validation (quickstart over
    data.name: [synthetic, synthetic_iid] ran before data: keys were checked)."""
    f = _files(tmp_path, "data.name: [synthetic, synthetic_iid]")
    base = (tmp_path / "base.yaml").read_text().replace(
        "data: {name: synthetic, dim: 8, classes: 3}",
        "data: {name: synthetic, alpha: 0.5, beta: 0.25, dim: 8, classes: 3}")
    (tmp_path / "base.yaml").write_text(base)
    s = sw.load_sweep(f)
    other = tmp_path / "elsewhere"
    other.mkdir()
    got = {}
    for pt in s.points:                       # each point's scenario validates on its own
        (other / "p.yaml").write_text(pt.text)
        got[pt.name] = load(str(other / "p.yaml")).data
    syn, iid = got["name=synthetic"], got["name=synthetic_iid"]
    assert (syn.alpha, syn.beta, syn.dim) == (0.5, 0.25, 8)
    assert iid.name == "synthetic_iid" and iid.dim == 8 and "alpha" not in \
        s.points[1].text and "beta" not in s.points[1].text


def test_sweep_over_partition_kind_leaves_out_base_keys_for_the_other_kinds(tmp_path):
    """A base partition {kind: dirichlet, alpha: 0.3} swept over kind [iid, dirichlet, shards]:
    the iid and shards points are written without alpha: (which they do not read) instead of
    failing validation; a grid's own shards_per_client stays; a key no swept kind reads is
    still an error."""
    f = _files(tmp_path, "data.partition.kind: [iid, dirichlet, shards]\n"
                         "data.partition.shards_per_client: [3]")
    base = (tmp_path / "base.yaml").read_text().replace(
        "data: {name: synthetic, dim: 8, classes: 3}",
        "data: {name: digits, partition: {kind: dirichlet, alpha: 0.3}}")
    (tmp_path / "base.yaml").write_text(base)
    with pytest.raises(ScenarioError, match="does not use shards_per_client"):
        sw.load_sweep(f)              # the dirichlet point gets the grid's shards_per_client
    f = _files(tmp_path, "data.partition.kind: [iid, dirichlet, shards]")
    (tmp_path / "base.yaml").write_text(base)
    s = sw.load_sweep(f)
    other = tmp_path / "elsewhere"
    other.mkdir()
    got = {}
    for pt in s.points:
        (other / "p.yaml").write_text(pt.text)
        got[pt.name] = load(str(other / "p.yaml")).data.partition
    assert [(p.kind, p.alpha) for p in got.values()] == [("iid", 0.5), ("dirichlet", 0.3),
                                                          ("shards", 0.5)]
    assert "alpha" in s.points[1].text and "alpha" not in s.points[0].text + s.points[2].text
    (tmp_path / "base.yaml").write_text(base.replace("alpha: 0.3", "alpha: 0.3, "
                                                     "shards_per_client: 4"))
    f = _files(tmp_path, "data.partition.kind: [iid, dirichlet]")
    (tmp_path / "base.yaml").write_text(base.replace("alpha: 0.3", "alpha: 0.3, "
                                                     "shards_per_client: 4"))
    with pytest.raises(ScenarioError, match="does not use shards_per_client"):
        sw.load_sweep(f)


def test_sweep_over_partition_kind_leaves_a_plugin_sets_partition_alone(tmp_path):
    """A registered (plugin) set's `partition:` is its loader's own option, not the built-in
    split: a sweep over data.partition.kind removes none of its keys (as a sweep over data.name
    removes none of a plugin's keys)."""
    from hierfl.sweep.spec import point_raw
    base = {"data": {"name": "blobs", "partition": {"kind": "dirichlet", "alpha": 0.1}}}
    paths = [["data", "partition", "kind"]]
    raw = point_raw(base, str(tmp_path / "b.yaml"), (("kind", "iid"),), paths, None,
                    ["iid", "dirichlet"])
    assert raw["data"]["partition"] == {"kind": "iid", "alpha": 0.1}
    base["data"]["name"] = "digits"                   # a built-in set's: alpha left out
    raw = point_raw(base, str(tmp_path / "b.yaml"), (("kind", "iid"),), paths, None,
                    ["iid", "dirichlet"])
    assert raw["data"]["partition"] == {"kind": "iid"}


def test_sweep_over_data_name_still_refuses_a_key_no_swept_set_reads(tmp_path):
    f = _files(tmp_path, "data.name: [synthetic_iid, digits]")
    base = (tmp_path / "base.yaml").read_text().replace(
        "data: {name: synthetic, dim: 8, classes: 3}", "data: {name: synthetic_iid, alpha: 0.5}")
    (tmp_path / "base.yaml").write_text(base)
    with pytest.raises(ScenarioError, match="does not use alpha"):
        sw.load_sweep(f)


def test_points_finished_in_staging_by_an_interrupted_driver_are_kept(tmp_path):
    """A driver stopped (Ctrl-C, SIGKILL) after points wrote DONE in staging but before they
    were moved into place: the rerun moves them in (nothing left to run: no pool is started)
    instead of deleting staging and running them again. A staging folder whose point.yaml is
    another point's text is not taken."""
    import shutil

    from hierfl.sweep.driver import execute_point

    f = _files(tmp_path, "seed: [0, 1]")
    s = sw.load_sweep(f)
    out = tmp_path / "out"
    staging = out / STAGING
    done = {}
    for pt, tag in zip(s.points, ("11111111", "22222222")):
        folder = staging / f"{pt.name}.{tag}"
        execute_point(pt.text, str(folder), report=False)
        done[pt.name] = (folder / "DONE").read_text()
    a = s.points[0].name
    other = staging / f"{a}.00000000"                   # sorted first: must be passed over
    shutil.copytree(staging / f"{a}.11111111", other)
    (other / sw.POINT_FILE).write_text(s.points[1].text)
    (other / "DONE").write_text("{}\n")
    assert sw.run_sweep(sw.load_sweep(f), "local", workers=1, progress=False) == {}
    for pt in s.points:
        assert (out / pt.name / "DONE").read_text() == done[pt.name]
        assert (out / pt.name / sw.POINT_FILE).read_text() == pt.text
    assert not staging.exists() and (out / "sweep.csv").is_file()


def _marked(mark: str) -> list[int]:
    """The pids of live processes whose environment holds `mark`."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as fh:
                    if mark.encode() in fh.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_a_stopped_driver_leaves_no_worker_behind(tmp_path, sig):
    """SIGKILL of the sweep driver: its pool workers exit (they waited forever for work,
    orphaned). SIGINT: the driver stops its workers (they went on with the queued points) and
    exits 130 promptly, keeping what had finished."""
    import signal
    import subprocess
    import sys
    import time
    import uuid

    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    f = _files(tmp_path, "seed: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]")
    mark = f"HIERFL_TEST_MARK={uuid.uuid4().hex}"
    env = dict(os.environ, HIERFL_TEST_MARK=mark.split("=")[1])
    proc = subprocess.Popen([sys.executable, "-m", "hierfl", "sweep", f, "--workers", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = tmp_path / "out"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(out.glob("*/DONE")):
        time.sleep(0.05)
    assert any(out.glob("*/DONE")), proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, getattr(signal, sig))
    rc = proc.wait(timeout=30)
    assert rc == (-9 if sig == "SIGKILL" else 130)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and [p for p in _marked(mark) if p != proc.pid]:
        time.sleep(0.1)
    assert not _marked(mark)
    if sig == "SIGINT":             # the workers stopped: they did not go on with the queue
        staged = list((out / STAGING).glob("*/DONE")) if (out / STAGING).exists() else []
        assert len(list(out.glob("*/DONE"))) + len(staged) < 12
        assert all((p.parent / sw.POINT_FILE).is_file() for p in staged)   # salvageable


def test_a_topology_naming_files_sweeps_from_any_folder(tmp_path):
    """A topology file in its own folder naming a devices trace, an availability trace and a
    moves file (relative to it), and an entry's own moves file (relative to the scenario):
    every point failed, the path named inside a deleted temporary folder. Each point now runs
    and equals the scenario run directly."""
    sub = tmp_path / "sys"
    sub.mkdir()
    (sub / "dev.csv").write_text("client,compute_flops,uplink_Bps,downlink_Bps,latency_s\n"
                                 + "".join(f"{k},1e9,1e5,1e5,0.1\n" for k in range(4)))
    (sub / "avail.csv").write_text("client,start_s,end_s\n"
                                   + "".join(f"{k},0,1000\n" for k in range(4)))
    (sub / "mob.csv").write_text("time_s,client,node\n0.5,client0,edge1\n")
    (tmp_path / "own.csv").write_text("time_s,client,node\n0.3,client1,edge0\n")
    (sub / "t.yaml").write_text(
        "edges: {count: 2, link: {latency_s: 0.05, bandwidth_Bps: 1.0e8}}\n"
        "clients: {trace: dev.csv}\navailability: {kind: trace, path: avail.csv}\n"
        "mobility: {kind: trace, path: mob.csv}\n")
    (tmp_path / "base.yaml").write_text(BASE.replace("topology: topo.yaml",
                                                     "topology: sys/t.yaml").replace(
        "  - {name: hierfavg, edge_rounds: 2}",
        "  - {name: hierfavg, edge_rounds: 2, mobility: {kind: trace, path: own.csv}}"))
    f = tmp_path / "sw.yaml"
    f.write_text("base: base.yaml\ngrid:\n  seed: [0, 1]\noutput: out\npoint_reports: false\n")
    s = sw.load_sweep(str(f))
    assert sw.run_sweep(s, "local", workers=1, progress=False) == {}
    point = tmp_path / "out" / s.points[1].name
    sc = load(str(tmp_path / "base.yaml"), seed=1, out=str(tmp_path / "direct"))
    run_scenario(sc, progress=False)
    for label in ("fedavg", "hierfavg"):
        assert (point / label / "metrics.csv").read_text() == \
            (tmp_path / "direct" / label / "metrics.csv").read_text()
