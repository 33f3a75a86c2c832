"""--resume checks what it resumes: a run whose settings changed since it started (scenario
file, --seed, --rounds) is refused with what changed, exit 2, and OUT untouched; settings that
move no number (threads, report target) may change; OUT/scenario.yaml says what the run did;
stale temp files of an interrupted write go; atomic files get the umask's mode."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import yaml

from hierfl.config.errors import ScenarioError
from hierfl.run import run_scenario
from hierfl.run.fingerprint import FINGERPRINT, differences, run_fingerprint
from hierfl.scenario.load import load
from conftest import CHECKPOINTED, scenario_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _doc(lr=0.05, rounds=6, seed=3):
    return scenario_doc(CHECKPOINTED, **{"seed": seed, "train.rounds": rounds,
                                         "train.local.lr": lr})


def _write(tmp_path, doc) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "hierfl", "run", *args, "--quiet"], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT})


def _files(out):
    return {os.path.relpath(os.path.join(d, f), out): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(out) for f in fs}


def test_differences_name_the_changed_keys():
    a = {"scenario": {"seed": 3, "train": {"local": {"lr": 0.05}}, "algorithms": [{"mu": 1}]},
         "versions": {"torch": "2.13"}}
    b = {"scenario": {"seed": 99, "train": {"local": {"lr": 0.5}}, "algorithms": [{"mu": 1},
                                                                                   {"mu": 2}]},
         "versions": {"torch": "2.14"}, "system": {"data": "x"}}
    assert differences(a, b) == ["algorithms.len 1 -> 2", "algorithms[1].mu (none) -> 2",
                                 "seed 3 -> 99", "train.local.lr 0.05 -> 0.5",
                                 "versions.torch 2.13 -> 2.14"]     # system: only one side has it
    assert differences(a, a) == []


def test_edited_scenario_is_refused_and_out_untouched(tmp_path):
    path = _write(tmp_path, _doc())
    out = tmp_path / "o"
    r = _cli(path, "--out", str(out), "--stop-after", "2")
    assert r.returncode == 0, r.stderr
    before = _files(out)
    _write(tmp_path, _doc(lr=0.5))                # edited between the pause and the resume
    r = _cli(path, "--out", str(out), "--resume")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "train.local.lr 0.05 -> 0.5" in r.stderr
    assert "running" not in r.stderr                # refused before announcing a run
    assert _files(out) == before                    # the checkpoint and outputs as they were
    _write(tmp_path, _doc())                        # undone: it resumes
    r = _cli(path, "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(out / "fedavg" / "checkpoint.npz")


def test_a_renamed_scenario_is_refused_on_resume_as_without_it(tmp_path):
    """Only `name:` changed: a plain run into OUT is refused (its run.json holds scenario 'rc'),
    and --resume was not: it rewrote run.json with the new name and hash while OUT/scenario.yaml
    kept the old one. Resume refuses it too, naming the change, OUT untouched."""
    path = _write(tmp_path, _doc())
    out = tmp_path / "o"
    assert _cli(path, "--out", str(out), "--stop-after", "2").returncode == 0
    before = _files(out)
    _write(tmp_path, dict(_doc(), name="renamed"))
    r = _cli(path, "--out", str(out), "--resume")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "name rc -> renamed" in r.stderr
    assert _files(out) == before
    old = {"scenario": {"seed": 3}}             # a fingerprint from before the name was in it
    assert differences(old, dict(old, name="rc")) == []


DAMPED = """\
from dataclasses import dataclass
import hierfl
from hierfl.algorithms.base import Capabilities, State, stack_start, weighted_mean
from hierfl.learn.solver import TermsProgram

@dataclass(frozen=True)
class P:
    pass

class Damped(hierfl.Algorithm):
    name = "damped"
    Params = P
    caps = Capabilities(linear_aggregate=True, drops_stragglers=True)

    def local(self, state, clients, start, ctx):
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))

    def server_update(self, state, clients, up, ctx):
        if len(clients) == 0:
            return state
        mean = weighted_mean(up.tensors[0], self.weights(clients))
        return State(state.w + ETA * (mean - state.w), state.server, state.clients)

hierfl.register_algorithm(Damped)
"""


def test_edited_plugin_is_refused(tmp_path):
    """A plugin's algorithm edited between the pause and the resume would make a run of two
    algorithms: the fingerprint holds each plugin file's digest."""
    (tmp_path / "damped.py").write_text("ETA = 0.5\n" + DAMPED)
    path = _write(tmp_path, {**_doc(), "plugins": ["damped.py"],
                             "algorithms": [{"name": "damped"}]})
    out = tmp_path / "o"
    r = _cli(path, "--out", str(out), "--stop-after", "2")
    assert r.returncode == 0, r.stderr
    (tmp_path / "damped.py").write_text("ETA = 0.9\n" + DAMPED)
    r = _cli(path, "--out", str(out), "--resume")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "changed since" in r.stderr and "plugins.damped.py " in r.stderr
    (tmp_path / "damped.py").write_text("ETA = 0.5\n" + DAMPED)
    r = _cli(path, "--out", str(out), "--resume")    # undone: it resumes
    assert r.returncode == 0, r.stderr


def test_seed_override_on_resume_is_refused(tmp_path):
    path = _write(tmp_path, _doc())
    out = tmp_path / "o"
    assert _cli(path, "--out", str(out), "--stop-after", "2").returncode == 0
    r = _cli(path, "--out", str(out), "--resume", "--seed", "99")
    assert r.returncode == 2 and "seed 3 -> 99" in r.stderr, r.stderr
    assert yaml.safe_load(open(out / "scenario.yaml"))["seed"] == 3


def test_more_rounds_on_a_finished_run_is_refused_not_ignored(tmp_path):
    """A finished 6-round run and `--resume --rounds 9`: refused (round 6 of a 6-round run is
    evaluated, of a 9-round run it may not be), never "9 rounds" with 6 kept."""
    doc = _doc()
    doc["train"]["eval_every"] = 4
    path = _write(tmp_path, doc)
    out = tmp_path / "o"
    assert _cli(path, "--out", str(out)).returncode == 0
    before = _files(out)
    r = _cli(path, "--out", str(out), "--resume", "--rounds", "9")
    assert r.returncode == 2, r.stderr
    assert "train.rounds 6 -> 9" in r.stderr and "new --out" in r.stderr
    assert "9 rounds" not in r.stderr
    assert _files(out) == before


def test_checkpoint_carries_the_fingerprint(tmp_path):
    """Without OUT/fingerprint.json (lost, or a checkpoint copied from elsewhere) the
    checkpoint's own fingerprint still refuses a changed run."""
    path = _write(tmp_path, _doc())
    sc = load(path, out=str(tmp_path / "o"))
    run_scenario(sc, progress=False, stop_after=2)
    with np.load(tmp_path / "o" / "fedavg" / "checkpoint.npz") as z:
        meta = json.loads(bytes(z["meta"]).decode())
    assert meta["fingerprint"]["scenario"]["train"]["local"]["lr"] == 0.05
    assert set(meta["fingerprint"]["system"]) == {"topology", "data", "model"}
    os.unlink(tmp_path / "o" / FINGERPRINT)
    sc2 = load(_write(tmp_path, _doc(lr=0.07)), out=str(tmp_path / "o"))
    with pytest.raises(ScenarioError, match=r"train\.local\.lr 0\.05 -> 0\.07"):
        run_scenario(sc2, progress=False, resume=True)


def test_settings_that_move_no_number_may_change(tmp_path):
    """Threads, the report target and the checkpoint interval are not in the fingerprint; a
    resume with them changed gives the uninterrupted run's outputs."""
    path = _write(tmp_path, _doc())
    ref = tmp_path / "ref"
    assert _cli(path, "--out", str(ref)).returncode == 0
    out = tmp_path / "o"
    assert _cli(path, "--out", str(out), "--stop-after", "3").returncode == 0
    doc = _doc()
    doc["train"]["checkpoint_every"] = 3
    doc["report"] = {"target_accuracy": 0.5}
    _write(tmp_path, doc)
    r = _cli(path, "--out", str(out), "--resume", "--threads", "2")
    assert r.returncode == 0, r.stderr
    for label in ("fedavg", "hierfavg"):
        for f in ("metrics.csv", "clients.csv", "trace.csv", "final_params.npz"):
            assert open(ref / label / f, "rb").read() == open(out / label / f, "rb").read()


def test_fingerprint_sees_the_drawn_system(tmp_path):
    sc = load(_write(tmp_path, _doc()), out=str(tmp_path / "o"))
    from hierfl.run import build_world
    a = run_fingerprint(sc, build_world(sc))
    doc = _doc()
    doc["topology"]["clients"]["compute_flops"] = 2e6
    sc2 = load(_write(tmp_path, doc), out=str(tmp_path / "o"))
    changed = differences(a, run_fingerprint(sc2, build_world(sc2)))
    assert "system.topology" in " ".join(changed)
    assert any(c.startswith("topology.clients.compute_flops") for c in changed)


def test_scenario_copy_shows_command_line_overrides(tmp_path):
    path = _write(tmp_path, _doc())
    out = tmp_path / "o"
    r = _cli(path, "--out", str(out), "--seed", "7", "--rounds", "2", "--threads", "2")
    assert r.returncode == 0, r.stderr
    text = open(out / "scenario.yaml").read()
    assert text.startswith("# s.yaml as run: the command line overrode seed 3 -> 7, "
                           "train.rounds 6 -> 2, train.executor.threads 1 -> 2")
    copy = yaml.safe_load(text)
    assert (copy["seed"], copy["train"]["rounds"], copy["train"]["executor"]["threads"]) == \
        (7, 2, 2)
    assert copy["train"]["local"]["lr"] == 0.05
    out2 = tmp_path / "plain"
    assert _cli(path, "--out", str(out2), "--rounds", "6").returncode == 0
    assert open(out2 / "scenario.yaml").read() == open(path).read()   # nothing overridden


def test_resume_removes_stale_temp_files(tmp_path):
    path = _write(tmp_path, _doc())
    sc = load(path, out=str(tmp_path / "o"))
    run_scenario(sc, progress=False, stop_after=2)
    stale = tmp_path / "o" / "fedavg" / ".tmp-k1ll3dcheckpoint.npz"
    stale.write_bytes(b"half a checkpoint")
    top = tmp_path / "o" / ".tmp-x9summary.json"
    top.write_text("{")
    run_scenario(sc, progress=False, resume=True)
    assert not stale.exists() and not top.exists()
    assert not [f for d, _, fs in os.walk(tmp_path / "o") for f in fs if f.startswith(".tmp-")]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_files_honour_the_umask(tmp_path, umask):
    from hierfl.outputs import CsvLog, atomic_npz, atomic_text
    old = os.umask(umask)
    try:
        atomic_text(str(tmp_path / "a.json"), "{}")
        atomic_npz(str(tmp_path / "b.npz"), {"x": np.zeros(2)})
        CsvLog(str(tmp_path / "c.csv"), ["x"]).close()
    finally:
        os.umask(old)
    modes = {f: stat.S_IMODE(os.stat(tmp_path / f).st_mode) for f in ("a.json", "b.npz", "c.csv")}
    assert set(modes.values()) == {0o666 & ~umask}, modes
