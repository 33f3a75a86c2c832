"""Malformed scenarios through the command line: exit status 2, a message that names the file,
the key and the bad value, and no Python traceback. A good scenario validates.

Every case runs through `hierfl.cli.main` (what `python -m hierfl` calls) for both `validate`
and `run`; a few also run as real `python -m hierfl` subprocesses (each costs seconds of
torch import, so not all of them)."""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GOOD = """\
name: bad
topology: topo.yaml
data: {name: synthetic, dim: 5, classes: 3, samples: 30}
model: {name: logreg}
train: {rounds: 1, clients_per_round: 2, local: {steps: 1, batch_size: 5}}
algorithms: [{name: fedavg}]
"""
TOPO = """\
edges: {count: 2}
clients: {count: 4}
"""

# case: (scenario text, topology text, file named in the message ("scenario" | "topology"),
#        key, what else the same message line must show: the value, a did-you-mean)
CASES = {
    "unknown_key": (GOOD.replace("train:", "trian:"), TOPO, "scenario", "trian",
                    ("'rounds': 1", "did you mean 'train'")),
    "wrong_type": (GOOD.replace("rounds: 1", "rounds: ten"), TOPO, "scenario", "train.rounds",
                   "'ten'"),
    "wrong_type_in_topology": (GOOD, TOPO.replace("count: 2", "count: two"), "topology",
                               "edges.count", "'two'"),
    "missing_topology_file": (GOOD.replace("topo.yaml", "nowhere.yaml"), TOPO, "scenario",
                              "topology", "'nowhere.yaml'"),
    "missing_npz_file": (GOOD.replace("{name: synthetic, dim: 5, classes: 3, samples: 30}",
                                      "{name: npz, path: nope.npz}"), TOPO, "scenario",
                         "data.path", "'nope.npz'"),
    "npz_client_count": (GOOD.replace("{name: synthetic, dim: 5, classes: 3, samples: 30}",
                                      "{name: npz, path: three.npz}"), TOPO, "scenario",
                         "data.path", "three.npz"),
    "unknown_algorithm": (GOOD.replace("{name: fedavg}", "{name: fedavgg}"), TOPO, "scenario",
                          "algorithms[0].name", ("'fedavgg'", "did you mean 'fedavg'")),
    "too_many_clients_per_round": (GOOD.replace("clients_per_round: 2", "clients_per_round: 50"),
                                   TOPO, "scenario", "train.clients_per_round", "50"),
}


def _hierfl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "hierfl", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def _case_dir(base, name: str):
    scenario, topo, *_ = CASES[name]
    d = base / name
    d.mkdir()
    (d / "scenario.yaml").write_text(scenario)
    (d / "topo.yaml").write_text(topo)
    g = np.random.default_rng(0)
    np.savez(d / "three.npz", **{f"{a}_{k}": g.normal(size=(4, 2)) if a == "x" else
                                 g.integers(0, 2, 4) for k in range(3) for a in "xy"})
    return d


def _args(command: str, d) -> list[str]:
    path = str(d / "scenario.yaml")
    return ["validate", path] if command == "validate" else \
        ["run", path, "--out", str(d / "out"), "--quiet"]


def _check(case: str, scenario: str, code: int, out: str, err: str) -> None:
    _, _, which, key, value = CASES[case]
    shows = (value,) if isinstance(value, str) else value
    file = scenario if which == "scenario" else os.path.join(os.path.dirname(scenario),
                                                             "topo.yaml")
    assert code == 2, (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines()
             if file in ln and key in ln and all(v in ln for v in shows)]
    assert lines, f"no line names {file}, {key} and {shows}:\n{err}"


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_scenario_exits_2_and_names_file_key_value(tmp_path, capsys, case, command):
    """hierfl.cli.main, the function behind `python -m hierfl` (in this process: each
    subprocess costs seconds of torch import; the subprocess tests below cover the wiring)."""
    from hierfl.cli import main

    d = _case_dir(tmp_path, case)
    code = main(_args(command, d))
    cap = capsys.readouterr()
    _check(case, str(d / "scenario.yaml"), code, cap.out, cap.err)


SUBPROCESS = [("unknown_key", "validate"), ("npz_client_count", "run")]


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    """A few cases and the shipped quickstart through `python -m hierfl`, 3 at a time."""
    base = tmp_path_factory.mktemp("cli")
    jobs = {key: _args(key[1], _case_dir(base, key[0])) for key in SUBPROCESS}
    jobs["quickstart", "validate"] = ["validate", "scenarios/quickstart.yaml"]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(_hierfl, *args) for key, args in jobs.items()}
        return {key: (f.result(), jobs[key]) for key, f in futures.items()}


@pytest.mark.parametrize("key", SUBPROCESS, ids=["-".join(k) for k in SUBPROCESS])
def test_cli_subprocess_exits_2_without_traceback(processes, key):
    proc, args = processes[key]
    _check(key[0], args[1], proc.returncode, proc.stdout, proc.stderr)


def test_quickstart_validates(processes):
    proc, _ = processes["quickstart", "validate"]
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "quickstart" in proc.stdout and "30 clients" in proc.stdout


def test_a_scenario_error_crosses_processes_whole():
    """A sweep point's error comes back from its worker process pickled: it kept its problems
    (it came back as one problem per character of the message, printed a character a line)."""
    import pickle

    from hierfl.config.errors import NO_VALUE, Problem, ScenarioError
    exc = ScenarioError([Problem("p.yaml", "model.name", "m", "gives (1, 6)", 5),
                         Problem("p.yaml", "seed", NO_VALUE, "is required", 2)])
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is ScenarioError and back.problems == exc.problems
    assert back.problems[1].value is NO_VALUE
    assert str(back) == str(exc) == "p.yaml:5: model.name = 'm': gives (1, 6)\n" \
        "p.yaml:2: seed: is required"


@pytest.mark.parametrize("role", ["scenario", "plugin", "trace", "data"])
@pytest.mark.parametrize("kind, says", [("dir", "a directory"), ("fifo", "a FIFO (named pipe)"),
                                        ("loop", "a symlink loop")])
def test_a_directory_fifo_or_symlink_loop_is_named_not_missing(tmp_path, capsys, role, kind,
                                                               says):
    """Each was 'not found'; now it says what is there, for every kind of input file (and
    never opens the FIFO, which would block)."""
    from conftest import make_scenario
    from hierfl import cli
    odd = tmp_path / f"odd.{ {'scenario': 'yaml', 'plugin': 'py', 'trace': 'csv'}.get(role, 'npz') }"
    if kind == "dir":
        odd.mkdir()
    elif kind == "fifo":
        os.mkfifo(odd)
    else:
        os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
        os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
        os.symlink(tmp_path / "loop_a", odd)
    keys = {"plugin": {"plugins": [odd.name]},
            "trace": {"topology.availability": {"kind": "trace", "path": odd.name}},
            "data": {"data": {"name": "npz", "path": odd.name}}}.get(role, {})
    path = str(odd) if role == "scenario" else make_scenario(tmp_path, **keys)
    assert cli.main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert f"is {says}, not a regular file" in err and "not found" not in err, err
    assert odd.name in err and "Traceback" not in err, err
