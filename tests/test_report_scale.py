"""The report's reading at city scale (issue 19) gives what the plain readings give: the
vectorised client numbers are str.isdecimal's, the tree's bottom groups are those of a loop over
the nodes, and a report scans each clients.csv once; figures saved and timelines read in forked
children give the bytes of an inline report, and those children never hang or linger."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import hierfl.outputs.cells as cells
from hierfl.outputs.cells import keeping_layouts, read_columns
from hierfl.report.plots.stragglers import _spread, client_numbers
from hierfl.report.plots.system_scale import bottom_groups

def reference_numbers(names):
    ok = [n.startswith("client") and n[6:].isdecimal() and len(n) - 6 <= 18 for n in names]
    return np.array(ok, bool), [int(n[6:]) for n, k in zip(names, ok) if k]


@pytest.mark.parametrize("ascii_only", [True, False])
def test_client_numbers_follow_isdecimal(ascii_only):
    rng = np.random.default_rng(1)
    odd = ["client", "client0", "client007", "clientx", "Client3", "client-1", "client 3",
           "client3a", "edge4", "", "c", "client" + "9" * 18, "client" + "9" * 19,
           "client1\x002", "client12\x00", "xclient1", "client1.5"]
    if not ascii_only:
        odd += ["client٣", "clienté", "手机client2", "client２"]
    names = odd + [f"client{k}" for k in rng.integers(0, 10**6, 300).tolist()] + \
        [f"edge{k}" for k in range(20)]
    order = rng.permutation(len(names))
    names = [names[i] for i in order]
    ok, value = client_numbers(names)
    # numpy's strings drop a trailing NUL: "client12\x00" reads as "client12" either way
    want_ok, want = reference_numbers([n.rstrip("\x00") for n in names])
    assert ok.tolist() == want_ok.tolist()
    assert value[ok].tolist() == want


def test_client_numbers_of_a_very_long_name_widen_nothing():
    """A name too long to be "client" and 18 digits is no client and is not put in the byte
    matrix: one 200,000-character name among 2,000 made a 400 MB one (a reader's review)."""
    import tracemalloc
    names = [f"client{k}" for k in range(2000)] + ["y" * 200_000, "client" + "7" * 18]
    tracemalloc.start()
    ok, value = client_numbers(names)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    want_ok, want = reference_numbers(names)
    assert ok.tolist() == want_ok.tolist() and value[ok].tolist() == want
    assert peak < 20e6


def test_spread_is_more_than_one_distinct_point():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(0, 6))
        b = rng.choice([1.0, 2.0, math.nan, 0.0, -0.0], n)
        s = rng.choice([3.0, math.nan, 0.0, -0.0], n)
        keep = np.isfinite(b) & np.isfinite(s)
        want = len(np.unique(np.stack([b[keep], s[keep]], 1), axis=0)) > 1
        assert _spread({"budget": b, "steps": s}) == want


def loop_groups(nodes):
    """The tree's bottom groups by a loop over every node (the reading before vectorising)."""
    names, parents, roles = nodes["name"], nodes["parent"], nodes["role"]
    aggs = [n for n, r in zip(names, roles) if r != "client" and n != "cloud"]
    par = {n: p for n, p, r in zip(names, parents, roles) if r != "client"}
    dep = {n: int(d) for n, d, r in zip(names, nodes["depth"], roles) if r != "client"}
    dep["cloud"] = 0
    client_parent = [p for p, r in zip(parents, roles) if r == "client"]
    bottom = list(dict.fromkeys(client_parent))
    count = [client_parent.count(a) for a in bottom]
    speed = [sum(f for f, p, r in zip(nodes["flops"], parents, roles)
                 if r == "client" and p == a) / 1e9 / c for a, c in zip(bottom, count)]
    return aggs, par, dep, bottom, count, speed


def test_bottom_groups_are_a_loops():
    rng = np.random.default_rng(4)
    aggs = ["r0", "r1"] + [f"e{k}" for k in range(6)]
    par = {"r0": "cloud", "r1": "cloud", **{f"e{k}": f"r{k % 2}" for k in range(6)}}
    clients = [f"client{k}" for k in range(40)]
    nodes = {"name": aggs + clients,
             "parent": [par[a] for a in aggs] + [f"e{k}" for k in rng.integers(0, 5, 40)],
             "role": ["edge"] * len(aggs) + ["client"] * 40,
             "depth": [1, 1] + [2] * 6 + [3] * 40,
             "flops": rng.lognormal(20, 1, len(aggs) + 40).tolist()}
    got = bottom_groups(nodes)
    want = loop_groups(nodes)
    assert got[:4] == want[:4]               # e5 has no client: not a bottom group
    assert "e5" not in got[3] and got[4].tolist() == want[4]
    np.testing.assert_allclose(got[5], want[5], rtol=1e-12)


def test_a_report_scans_each_file_once(tmp_path, monkeypatch):
    """Inside keeping_layouts a file is scanned once for any number of column readings, with
    the cells of a fresh reading; outside it every reading scans (a rewritten file is seen)."""
    p = tmp_path / "clients.csv"
    p.write_bytes(b"a,b,c\n1,2,x\n3,,y\n")
    scans = []
    real = cells._scan
    monkeypatch.setattr(cells, "_scan", lambda path: scans.append(path) or real(path))
    fresh = {k: v.tolist() for k, v in read_columns(str(p), ["a", "c"])[1].items()}
    with keeping_layouts():
        first = read_columns(str(p), ["a", "c"])[1]
        second = read_columns(str(p), ["c", "b"])[1]
    assert len(scans) == 2                   # one outside, one inside for both readings
    assert {k: v.tolist() for k, v in first.items()} == fresh
    assert second["b"].tolist() == [b"2", b""]
    p.write_bytes(b"a,b,c\n5,6,z\n")
    assert read_columns(str(p), ["a"])[1]["a"].tolist() == [b"5"]


WIDE = """
name: wide
seed: 3
topology:
  edges: {count: 3, link: {latency_s: 0.01, bandwidth_Bps: 1.0e+6}}
  clients:
    count: 70
    compute_flops: {dist: choice, choices: CHOICES}
    link: {latency_s: {dist: uniform, low: 0.01, high: 0.05}, bandwidth_Bps: 1.0e+5}
data: {name: synthetic, dim: 4, classes: 2, samples: {dist: constant, value: 12}}
model: {name: logreg}
train:
  rounds: 2
  clients_per_round: 6
  local: {steps: 2, batch_size: 4, lr: 0.05}
algorithms:
  - {name: fedavg}
  - {name: hierfavg, edge_rounds: 2}
"""


def plain(x):
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x.tolist() if isinstance(x, np.ndarray) else x


def report_digests(folder):
    """`hierfl report FOLDER`, then the SHA-256 of each file it writes (figures, md, html, csv)."""
    import hashlib

    from hierfl.cli import main
    main(["report", str(folder)])
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest()
            for f in sorted(os.listdir(folder)) if f.endswith((".png", ".svg", ".md", ".html",
                                                               ".csv"))}


def test_summary_columns_give_the_jsons_numbers_and_the_same_report(tmp_path, monkeypatch):
    """A run writes its long number and name lists beside summary.json (here lists of 73 count
    as long); reading gives json's values, types and key order, with arrays for those lists; a copied
    folder keeps using them, an edited summary.json or a damaged npz is read as JSON; the
    report's every file is the same bytes with and without the npz."""
    import json
    import shutil

    from hierfl.cli import main
    from hierfl.outputs import comparable, read_summary, summary_columns
    monkeypatch.setattr(summary_columns, "LONG", 70)
    choices = [1.0e6 * (1 + k) for k in range(80)]       # a scenario's long list: stays a list
    (tmp_path / "wide.yaml").write_text(WIDE.replace("CHOICES", str(choices)))
    out = tmp_path / "out"
    main(["run", str(tmp_path / "wide.yaml"), "--out", str(out), "--quiet", "--no-report"])
    npz = out / summary_columns.NAME
    assert npz.is_file()
    want = json.loads((out / "summary.json").read_text())
    got = read_summary(str(out))
    assert isinstance(got["topology"]["nodes"]["flops"], np.ndarray)
    assert isinstance(got["data"]["train_counts"], np.ndarray)
    names = got["topology"]["nodes"]["name"]
    assert isinstance(names, np.ndarray) and names.dtype.kind == "U"  # strings: str arrays
    assert isinstance(got["topology"]["clients"], np.ndarray)
    assert json.dumps(plain(got)) == json.dumps(want)                  # values, types, order
    assert isinstance(got["scenario"]["topology"]["clients"]["compute_flops"]["choices"], list)
    assert comparable(got) == comparable(want)          # seed pooling's key: the same

    copy = tmp_path / "copy"
    shutil.copytree(out, copy, copy_function=shutil.copyfile)          # new times
    assert isinstance(read_summary(str(copy))["topology"]["nodes"]["flops"], np.ndarray)

    with_npz = report_digests(copy)
    (copy / summary_columns.NAME).unlink()
    assert report_digests(copy) == with_npz and len(with_npz) > 20

    text = (out / "summary.json").read_text()
    last = repr(want["topology"]["nodes"]["latency_up_s"][-1])        # a client's: drawn
    at = text.rindex(last)                         # latency_up_s: the last of the node columns
    (out / "summary.json").write_text(text[:at] + "12345.5" + text[at + len(last):])
    edited = read_summary(str(out))
    assert edited["topology"]["nodes"]["latency_up_s"][-1] == 12345.5
    assert isinstance(edited["topology"]["nodes"]["flops"], list)      # read as JSON
    (out / "summary.json").write_text(text)
    npz.write_bytes(npz.read_bytes()[:100])                            # damaged
    assert json.dumps(read_summary(str(out))) == json.dumps(want)
    assert summary_columns.write(str(out), text, []) is None and not npz.exists()


def test_roles_and_counts_read_as_before_from_a_hand_edited_summary():
    """A role that is not a string is not a client; counts keep Python's sum, min and max."""
    from hierfl.outputs.summary_columns import is_client
    from hierfl.report.model import summary_rows
    assert is_client(["client", None, 3, "edge", "client"]).tolist() == \
        [True, False, False, False, True]
    rows = dict(summary_rows({"scenario": {"data": {"name": "x"}},
                              "data": {"train_counts": np.array([1.5, 2.5]), "dim": 2}}))
    assert rows["data"].startswith("x: 4.0 training samples over 2 clients (1.5–2.5 each), 0 test")


@pytest.fixture
def forking(monkeypatch):
    """Figures saved by forked children whatever else this test process has loaded (Ray, from
    the Ray tests in the same worker, turns them off)."""
    import multiprocessing
    import sys

    from hierfl.report.plots import background
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: None)
    monkeypatch.setenv("HIERFL_REPORT_WORKERS", "2")
    assert background.workers() == 2
    return monkeypatch


def test_figures_saved_aside_are_the_bytes_saved_inline(tmp_path, forking):
    """A report whose figures are written by forked children (2 at once), and whose files are
    read ahead by children too, has every file the same bytes as one written inline; the
    children are all waited for."""
    import shutil

    from hierfl.cli import main
    from hierfl.report.plots import background
    (tmp_path / "wide.yaml").write_text(WIDE.replace("CHOICES", "[1.0e+6, 4.0e+6, 2.0e+7]"))
    out = tmp_path / "out"
    main(["run", str(tmp_path / "wide.yaml"), "--out", str(out), "--quiet", "--no-report"])
    digests, forks, pids = {}, {}, []
    real_fork = os.fork
    forking.setattr(os, "fork", lambda: pids.append(real_fork()) or pids[-1])
    from hierfl.report import build
    big = build.AHEAD_BYTES
    sent = []                                   # values that came back from a child
    real_unpack = background.unpack
    forking.setattr(background, "unpack", lambda data: sent.append(1) or real_unpack(data))
    for n, ahead in (("0", big), ("2", big), ("2", 0)):
        folder = tmp_path / f"w{n}{ahead}" / "run"      # the same name: the report's title
        shutil.copytree(out, folder)
        forking.setenv("HIERFL_REPORT_WORKERS", n)
        forking.setattr(build, "AHEAD_BYTES", ahead)     # 0: every file read ahead, aside
        assert background.workers() == int(n)
        before = len(pids)
        digests[n, ahead] = report_digests(folder)
        forks[n, ahead] = len(pids) - before
    first, *rest = digests.values()
    assert all(d == first for d in rest) and len(first) > 20
    # read ahead: each run's timeline round, one more child a run here
    assert forks["0", big] == 0
    assert forks["2", 0] == forks["2", big] + 2
    assert len(sent) == 2                       # each read in its child, none read again here
    assert len(pids) >= 10                       # one child a figure, with 2 workers only
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)          # each one waited for: none left behind


def test_a_figure_that_fails_aside_becomes_a_note(tmp_path, forking):
    """A save that raises in its child is listed with its error; the report drops the figure
    (and its files) and says so in its notes, as it does for a figure that fails inline."""
    import matplotlib.pyplot as plt

    from hierfl.cli import main
    from hierfl.report import plots
    from hierfl.report.plots import background, style
    monkeypatch = forking
    with background.background_saves() as failed:
        ok, bad = plt.figure(), plt.figure()
        bad.savefig = lambda *a, **k: (_ for _ in ()).throw(ValueError("no ink"))
        style.save(ok, str(tmp_path / "ok.png"))
        style.save(bad, str(tmp_path / "bad.png"))
    assert failed == [(str(tmp_path / "bad.png"), "ValueError: no ink")]
    assert (tmp_path / "ok.png").is_file() and (tmp_path / "ok.svg").is_file()

    (tmp_path / "wide.yaml").write_text(WIDE.replace("CHOICES", "[1.0e+6, 4.0e+6]"))
    out = tmp_path / "out"
    main(["run", str(tmp_path / "wide.yaml"), "--out", str(out), "--quiet", "--no-report"])
    real = plots.loss_figure

    def broken(*args):
        path = args[-1]
        fig = plt.figure()
        fig.savefig = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("broken axes"))
        style.save(fig, path)
        return path
    monkeypatch.setattr(plots, "loss_figure", broken)
    main(["report", str(out)])
    md = (out / "report.md").read_text()
    assert "The figure loss_vs_round.png could not be drawn: RuntimeError: broken axes" in md
    assert "loss_vs_round.png)" not in md and not (out / "loss_vs_round.png").exists()
    assert (out / "accuracy_vs_time.png").is_file()
    monkeypatch.setattr(plots, "loss_figure", real)


def test_ray_a_pool_worker_one_core_or_zero_save_inline(forking):
    import multiprocessing
    import sys

    from hierfl.report.plots import background
    monkeypatch = forking
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.delenv("HIERFL_REPORT_WORKERS", raising=False)
    assert background.workers() == 3
    for n, want in (("0", 0), ("x", 0), ("5", 5)):
        monkeypatch.setenv("HIERFL_REPORT_WORKERS", n)
        assert background.workers() == want
    monkeypatch.setitem(sys.modules, "ray", object())          # whatever the variable says
    assert background.workers() == 0
    monkeypatch.delitem(sys.modules, "ray")
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert background.workers() == 0
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.delenv("HIERFL_REPORT_WORKERS", raising=False)
    assert background.workers() == 0


def test_removing_a_figure_waits_for_its_child_and_a_failed_fork_saves_inline(tmp_path,
                                                                              forking):
    """A figure replaced during the report (levels.py) is not written back by a late child;
    an interrupted child is a failed figure, not an interrupted report; a fork that fails
    (no memory) saves inline and leaks no pipe."""
    import time

    import matplotlib.pyplot as plt

    from hierfl.report.plots import background, style
    monkeypatch = forking
    slow = str(tmp_path / "slow.png")
    with background.background_saves() as failed:
        fig = plt.figure()
        real = fig.savefig
        fig.savefig = lambda *a, **k: (time.sleep(0.3), real(*a, **k))
        style.save(fig, slow)
        background.forget(slow)
        assert os.path.isfile(slow)                  # written, and waited for
        os.unlink(slow)
        os.unlink(slow[:-4] + ".svg")
        stop = plt.figure()
        stop.savefig = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt())
        style.save(stop, str(tmp_path / "stop.png"))
    assert not os.path.exists(slow) and failed == [(str(tmp_path / "stop.png"), "interrupted")]

    fds = len(os.listdir("/proc/self/fd"))

    def no_memory():
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(os, "fork", no_memory)
    with background.background_saves() as failed:
        style.save(plt.figure(), str(tmp_path / "inline.png"))
    assert failed == [] and (tmp_path / "inline.png").is_file()
    assert len(os.listdir("/proc/self/fd")) == fds


def _pid_and(x):
    return {"pid": os.getpid(), "x": x}


def _fails_aside(parent: int):
    if os.getpid() != parent:
        raise RuntimeError("only in a child")
    return {"worked out": "here"}


def _always_fails():
    raise ValueError("bad trace")


def test_work_started_ahead_gives_what_an_inline_call_gives(forking):
    """`ahead` works a value out in a child (another pid) and gives it back; a child that fails
    leaves it to the report (the same value, or the same error, as inline); work never asked
    for is dropped without waiting on a child that blocks on a full pipe; outside a report it
    runs inline when asked for."""
    from hierfl.report.plots import background
    me, pids = os.getpid(), []
    real_fork = os.fork
    forking.setattr(os, "fork", lambda: pids.append(real_fork()) or pids[-1])
    with background.background_saves():
        job = background.ahead(_pid_and, np.arange(300_000))      # > a pipe's buffer
        fallback = background.ahead(_fails_aside, me)
        unsent = background.ahead(_pid_and, np.array(["a"], object))   # no way back: inline
        background.ahead(_pid_and, np.arange(300_000))             # never asked for
        error = background.ahead(_always_fails)     # a fifth: past 2 a core, worked out here
        assert error.pid is None and len(pids) == 4
        got = job.result()
        assert got["pid"] != me and np.array_equal(got["x"], np.arange(300_000))
        assert fallback.result() == {"worked out": "here"}
        with pytest.raises(ValueError, match="bad trace"):
            error.result()
        assert unsent.result()["pid"] == me
    assert len(pids) == 4
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)                             # every child reaped
    lazy = background.ahead(_pid_and, 1)
    assert lazy.result() == {"pid": me, "x": 1}


def test_values_come_back_as_they_went_without_pickle():
    """`pack` / `unpack`: arrays of each dtype and shape with their exact bytes (NaN, -0.0),
    writable; JSON values as json reads them; object arrays refused; a cut transfer caught."""
    import math

    from hierfl.report.plots.background import pack, unpack
    value = {"b": np.array([True, False, True]), "f": np.array([1.5, -0.0, math.nan, math.inf]),
             "i": np.arange(6).reshape(2, 3), "u": np.zeros((0, 4), np.uint8),
             "n": None, "s": ["a", None, "é"], "x": math.nan, "k": 3, "m": [[0.5, "edge0"]]}
    back = unpack(bytearray(pack(value)))
    for k in ("f", "i", "b", "u"):
        assert back[k].dtype == value[k].dtype and back[k].shape == value[k].shape
        assert back[k].tobytes() == value[k].tobytes() and back[k].flags.aligned
    back["i"][0, 0] = 7                                              # writable
    assert back["n"] is None and back["s"] == ["a", None, "é"] and math.isnan(back["x"])
    assert back["k"] == 3 and back["m"] == [[0.5, "edge0"]]
    with pytest.raises(TypeError):
        pack({"o": np.array([{}], object)})
    with pytest.raises(ValueError):
        unpack(bytearray(pack(value))[:-1])


AHEAD_SCRIPT = r"""
import os, signal, sys, threading, time
import numpy as np
sys.modules.pop("ray", None)
os.environ["HIERFL_REPORT_WORKERS"] = "2"
from hierfl.report.plots import background as B
assert B.workers() == 2, B.workers()

def big(n):                       # more than a pipe holds: the child blocks writing it
    return {"x": np.zeros(n, np.uint8)}

def slow(n):
    time.sleep(1.5)
    return {"n": n}

if sys.argv[1] == "unasked":      # two children blocked writing, then the report fails
    try:
        with B.background_saves():
            a, b = B.ahead(big, 10_000_000), B.ahead(big, 10_000_001)
            time.sleep(0.3)
            raise RuntimeError("report failed")
    except RuntimeError:
        print("left", flush=True)
else:                             # Ctrl-C while the report waits for a value
    threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        with B.background_saves():
            job = B.ahead(slow, 7)
            pid = job.pid
            job.result()
    except KeyboardInterrupt as exc:
        print("interrupted", type(exc.__context__).__name__, flush=True)
    try:
        os.waitpid(pid, os.WNOHANG)
        print("child left behind")
    except ChildProcessError:
        print("child reaped")
"""


@pytest.mark.parametrize("case,want", [("unasked", "left"),
                                       ("interrupt", "interrupted NoneType\nchild reaped")])
def test_work_ahead_never_hangs_or_leaks_a_child(tmp_path, case, want):
    """Values never asked for end their children (each child closes its copies of the other
    pipes: a sibling holding one kept a child writing forever, and the report waiting on it);
    a Ctrl-C while a value is read is a KeyboardInterrupt, and the child is reaped."""
    import subprocess
    import sys
    script = tmp_path / "ahead.py"
    script.write_text(AHEAD_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": root})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == want
