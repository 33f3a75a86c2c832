"""One writer per output folder (issue 42.1): a `--resume`, a second run or a report started
while a run writes to the same folder was accepted (both exit 0; metrics.csv gained NUL bytes
and duplicated rows). Now the second writer is refused, exit 2, naming the holder's pid, and
the first run's outputs are those of an undisturbed run; a crashed holder (kill -9) leaves the
folder free at once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from hierfl.cli import main
from hierfl.config.errors import ScenarioError
from hierfl.outputs.lock import LOCK, holds, output_lock
from conftest import CHECKPOINTED, scenario_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _scenario(tmp_path, rounds: int) -> str:
    doc = scenario_doc(CHECKPOINTED, **{"name": "lock", "train.rounds": rounds,
                                        "train.checkpoint_every": 3, "train.local.steps": 40,
                                        "algorithms": [{"name": "fedavg"}, {"name": "scaffold"}]})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _files(out) -> dict[str, bytes]:
    """Every file of a run's algorithm folders (the top's files name the folder)."""
    return {os.path.relpath(os.path.join(d, f), out): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(out) for f in fs if d != str(out)}


def _holder(script: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


@pytest.mark.parametrize("end", ["finishes", "killed"])
def test_a_second_writer_is_refused_while_a_run_writes(tmp_path, capsys, end):
    path = _scenario(tmp_path, rounds=60)
    ref, out = tmp_path / "ref", tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hierfl", "run", path, "--out", str(out),
                             "--quiet", "--no-report"], cwd=ROOT, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ckpt = out / "fedavg" / "checkpoint.npz"
        deadline = time.time() + 120
        while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        assert ckpt.exists() and proc.poll() is None, "the run ended before it could be raced"
        proc.send_signal(signal.SIGSTOP)     # mid-run (stopped: it holds the folder still)
        capsys.readouterr()
        # this test's process is the second writer: a resume, a fresh run, a report
        for argv in (["run", path, "--out", str(out), "--resume", "--quiet", "--no-report"],
                     ["run", path, "--out", str(out), "--quiet", "--force", "--no-report"],
                     ["report", str(out)]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert f"process {proc.pid} " in err and "in use" in err, err
            assert "hierfl run" in err and "Traceback" not in err, err
        proc.send_signal(signal.SIGKILL if end == "killed" else signal.SIGCONT)
        proc.wait(timeout=120)
        assert end == "killed" or proc.returncode == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert main(["run", path, "--out", str(ref), "--quiet", "--no-report"]) == 0
    # the folder is free again: a crashed run resumes, a finished one keeps its results
    assert main(["run", path, "--out", str(out), "--resume", "--quiet", "--no-report"]) == 0
    assert _files(out) == _files(ref)
    assert not (out / LOCK).exists()


def test_the_refusal_names_the_holder_and_the_folder_is_free_once_it_ends(tmp_path):
    out = tmp_path / "o"
    proc = _holder("import sys, time\nfrom hierfl.outputs.lock import output_lock\n"
                   f"with output_lock({str(out)!r}):\n print('held', flush=True)\n"
                   " sys.stdin and time.sleep(30)\n")
    try:
        assert proc.stdout.readline().strip() == "held"
        info = json.loads((out / LOCK).read_text())
        assert info["pid"] == proc.pid and info["started"] and "-c" in info["command"]
        with pytest.raises(ScenarioError) as e:
            with output_lock(str(out), "s.yaml", "--out"):
                pass
        msg = str(e.value)
        assert msg.startswith("s.yaml: --out = ") and "this output folder is in use: " \
            f"process {proc.pid} on " in msg
        assert "started " + info["started"] in msg
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    with output_lock(str(out)):              # kill -9: the kernel dropped its lock
        assert holds(str(out))
        assert json.loads((out / LOCK).read_text())["pid"] == os.getpid()
    assert sorted(os.listdir(out)) == []     # the stale file taken over, then removed


def test_the_lock_is_reentrant_and_leaves_nothing_behind(tmp_path):
    out = tmp_path / "new"
    with output_lock(str(out)):
        with output_lock(str(out)):          # the CLI's run, then run_scenario inside it
            assert (out / LOCK).is_file()
        assert holds(str(out)) and (out / LOCK).is_file()
    assert not holds(str(out))
    assert not out.exists()                  # made only to be locked: removed again
    (tmp_path / "kept").mkdir()
    with output_lock(str(tmp_path / "kept")):
        (tmp_path / "kept" / "a.txt").write_text("x")
    assert os.listdir(tmp_path / "kept") == ["a.txt"]


def test_a_sweep_and_its_points_take_the_lock(tmp_path):
    """The sweep driver's own lock (`.lock`, "another sweep is running") is this lock: a sweep
    into a folder a run holds is refused naming the holder; a point's folder is held while it
    runs and keeps no lock file."""
    from hierfl.sweep.driver import execute_point

    base = _scenario(tmp_path, rounds=2)
    sweep = tmp_path / "sw.yaml"
    sweep.write_text(yaml.safe_dump({"base": base, "grid": {"seed": [1, 2]},
                                     "output": str(tmp_path / "sw")}))
    with output_lock(str(tmp_path / "sw")):
        proc = subprocess.run([sys.executable, "-m", "hierfl", "sweep", str(sweep)], cwd=ROOT,
                              env=ENV, capture_output=True, text=True)
    assert proc.returncode == 2 and f"process {os.getpid()} " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    point = tmp_path / "point"
    with output_lock(str(point)):            # (this process: reentrant)
        execute_point(open(base).read(), str(point), report=False)
    assert "DONE" in os.listdir(point) and not (point / LOCK).exists()
    with output_lock(str(tmp_path / "q")):
        holder = _holder(f"from hierfl.sweep.driver import execute_point\n"
                         f"execute_point(open({base!r}).read(), {str(tmp_path / 'q')!r})")
        assert holder.wait(timeout=60) != 0
        holder.stdout.close()
    assert not (tmp_path / "q" / "DONE").exists()
