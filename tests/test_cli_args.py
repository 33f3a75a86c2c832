"""Command-line arguments and destinations that used to pass or end in a traceback (issue 20):
each is now exit 2 with one `error:` line block naming the option or file, the value and why
(or, for a file-size limit hit while writing, a one-line error naming the file)."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import pytest

from hierfl.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = """\
name: tiny
topology: {edges: {count: 2}, clients: {count: 6}}
data: {name: synthetic, dim: 5, classes: 3, samples: 20}
model: {name: logreg}
train: {rounds: 2, clients_per_round: 3, local: {steps: 2}}
algorithms: [{name: fedavg}]
"""


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    text = err.getvalue()
    assert "Traceback" not in text
    return rc, text


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("args")
    (d / "tiny.yaml").write_text(TINY)
    (d / "afile").write_text("x")
    rc, err = cli("run", str(d / "tiny.yaml"), "--out", str(d / "out"), "--quiet", "--no-report")
    assert rc == 0, err
    return d


@pytest.mark.parametrize("args,words", [
    (["--out", ""], "--out = '': an empty output folder"),
    (["--out", "{d}/afile"], "afile exists and is not a folder"),
    (["--out", "{d}/afile/sub"], "afile is a file, so"),
    (["--out", "/proc/hierfl"], "--out = '/proc/hierfl': /proc/hierfl is a system folder"),
    (["--out", "/etc/hierfl"], "is a system folder"),
    (["--stop-after", "0"], "--stop-after = 0: must be >= 1"),
    (["--stop-after", "-1"], "--stop-after = -1: must be >= 1"),
    # streams are keyed by the seed's 32 bits: 2^32 ran seed 0's run, -1 seed 2^32 - 1's
    (["--seed=4294967296"], "--seed = 4294967296: must be in 0..4294967295"),
    (["--seed=-1"], "--seed = -1: must be in 0..4294967295"),
])
def test_run_arguments(run_dir, args, words):
    args = [a.format(d=run_dir) for a in args]
    rc, err = cli("run", str(run_dir / "tiny.yaml"), *args, "--quiet")
    assert rc == 2 and words in err, err


@pytest.mark.parametrize("args,words", [
    (["--target", "nan"], "--target = nan: expected a finite number"),
    (["--timeline-round", "-7"], "--timeline-round = -7: rounds count from 1"),
])
def test_report_arguments(run_dir, args, words):
    rc, err = cli("report", str(run_dir / "out"), *args)
    assert rc == 2 and words in err, err
    rc, err = cli("compare", str(run_dir / "out"), *args, "--out", str(run_dir / "cmp"))
    assert rc == 2 and words in err, err


def test_compare_out_on_a_file(run_dir):
    rc, err = cli("compare", str(run_dir / "out"), "--out", str(run_dir / "afile"))
    assert rc == 2 and "afile exists and is not a folder" in err


def test_report_on_a_corrupted_metrics_csv(run_dir, tmp_path):
    import shutil

    bad = tmp_path / "run"
    shutil.copytree(run_dir / "out", bad)
    m = bad / "fedavg" / "metrics.csv"
    lines = m.read_text().splitlines()
    m.write_text("\n".join([lines[0].replace("round,", "rnd,", 1)] + lines[1:]) + "\n")
    rc, err = cli("report", str(bad))
    assert rc == 2 and f"{m}:1: header = " in err and "holding round" in err
    m.write_text("\n".join(lines[:2] + ["x" + lines[2]]) + "\n")
    rc, err = cli("report", str(bad))
    assert rc == 2 and f"{m}:3: round = 'x1'" in err and "expected a round number" in err


def test_report_on_a_corrupted_summary_json(run_dir, tmp_path):
    """A damaged summary.json was reported as 'OUT: cannot read the run's files (corrupted?):
    JSONDecodeError ...', not naming the file: now the file itself, for report and compare."""
    import shutil

    bad = tmp_path / "run"
    shutil.copytree(run_dir / "out", bad)
    (bad / "summary.json").write_text("{bad")
    for argv in (["report", str(bad)], ["compare", str(bad), str(run_dir / "out"), "--out",
                                         str(tmp_path / "cmp")]):
        rc, err = cli(*argv)
        assert rc == 2 and f"{bad / 'summary.json'}: cannot read the run's summary" in err, err
        assert "JSONDecodeError" in err


def test_topology_png(tmp_path):
    topo = os.path.join(REPO, "topologies", "three_tier_small.yaml")
    rc, err = cli("topology", topo, "--png", str(tmp_path / "x.txt"))
    assert rc == 2 and "x.txt'" in err and "a figure file ends in .png" in err
    rc, err = cli("topology", topo, "--png", str(tmp_path / "nowhere" / "x.png"))
    assert rc == 2 and f"no such folder: {tmp_path / 'nowhere'}" in err


def test_sweep_out_on_a_file(run_dir):
    (run_dir / "sw.yaml").write_text("base: tiny.yaml\ngrid: {seed: [0, 1]}\n")
    rc, err = cli("sweep", str(run_dir / "sw.yaml"), "--out", str(run_dir / "afile"),
                  "--quiet")
    assert rc == 2 and "--out = " in err and "exists and is not a folder" in err


def test_docs_check_on_a_missing_file(tmp_path):
    rc, err = cli("docs", "--check", "--path", str(tmp_path / "missing.md"))
    assert rc == 1 and "missing.md: not found (no such file)" in err
    assert "out of date" not in err


def test_file_size_limit_while_writing(run_dir, tmp_path):
    """RLIMIT_FSIZE hit while the run writes its files: one error line naming the file, no
    traceback (exit 1: the input is fine, the machine refused the write)."""
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))\n"
            "from hierfl.cli import main\n"
            f"sys.exit(main(['run', {str(run_dir / 'tiny.yaml')!r}, '--out', "
            f"{str(tmp_path / 'o')!r}, '--quiet']))\n")
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: cannot read or write " + str(tmp_path / "o") in proc.stderr
    assert "File too large" in proc.stderr
