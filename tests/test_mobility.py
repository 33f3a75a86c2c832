"""Client mobility (issue 21): clients hand over between edges in simulated time.

The hand-computed system: 2 edges, client0 under edge0 and client1 under edge1 (round robin),
models of 72 bytes (logreg, 5 features + bias, 3 classes, float32), every link 72 B/s (1 s of
transmission), client links 0.5 s of latency, edge links none, compute ~0 s (1e30 FLOP/s).
HierFAVG, 2 edge rounds per cloud round, without mobility: cloud -> edge 0..1; edge round 0:
download 1..2.5, upload 2.5..4; edge round 1: 4..5.5..7; edge -> cloud 7..8; round 2 8..16."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import make_scenario, run_outputs
from hierfl.config.errors import ScenarioError
from hierfl.config.mobility import MobilitySpec
from hierfl.sim.mobility import Mobility, _neighbours
from hierfl.topology.moves import read_moves

TOPO = {"edges": {"count": 2, "link": {"latency_s": 0.0, "bandwidth_Bps": 72.0}},
        "clients": {"count": 2, "compute_flops": 1e30,
                    "link": {"latency_s": 0.5, "bandwidth_Bps": 72.0}}}
HIER = {"name": "hierfavg", "edge_rounds": 2}


def _run(tmp_path, algo: dict, mobility: dict | None, moves: str | None = None, **kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if moves is not None:
        (tmp_path / "moves.csv").write_text("time_s,client,node\n" + moves)
    extra = {"topology.mobility": mobility} if mobility else {}
    path = make_scenario(tmp_path, topology=TOPO, algorithms=[algo],
                         **{"train.rounds": 2, **extra, **kw})
    out = run_outputs(path)
    label = algo["name"]
    return out, label, list(out.results[label].trace.events)


def _rows(out, label):
    return [(int(r["round"]), int(r["edge_round"]), int(r["client"]), int(r["failed"]),
             r["edge"]) for r in out.clients[label]]


def _metric(out, label, key):
    return [float(r[key]) for r in out.metrics[label]][1:]


def test_trace_moves_decide_which_edge_aggregates_and_drop_wastes_the_bytes(tmp_path):
    """client0 moves to edge1 at 3 s, inside its upload of edge round 0 (2.5..4): the upload is
    lost at 3 s (72 bytes wasted); edge0's round closes at 3 s with nobody, its edge round 1
    finds nobody under it and it reports nothing; edge1's edge round 1 (from 4 s) trains both;
    round 2 (from 8 s) has both under edge1 only."""
    out, lab, ev = _run(tmp_path, HIER, {"kind": "trace", "path": "moves.csv"},
                        "3.0,client0,edge1\n")
    assert _rows(out, lab) == [(1, 0, 0, 1, "edge0"), (1, 0, 1, 0, "edge1"),
                               (1, 1, 0, 0, "edge1"), (1, 1, 1, 0, "edge1"),
                               (2, 0, 0, 0, "edge1"), (2, 0, 1, 0, "edge1"),
                               (2, 1, 0, 0, "edge1"), (2, 1, 1, 0, "edge1")]
    assert (3.0, "client0", "handover", "edge0->edge1", 1) in ev
    assert (3.0, "edge0", "lost", "client0", 72.0) in ev
    assert [e for e in ev if e[1] == "edge0" and e[2] == "aggregate"] == \
        [(3.0, "edge0", "aggregate", "", 0)] * 2
    assert (5.5, "client0", "recv", "edge1", 72.0) in ev      # edge1's round 1: 4 .. 5.5 .. 7
    assert (7.0, "edge1", "recv", "client0", 72.0) in ev
    assert not any(e[1] == "cloud" and e[3] == "edge0" and e[2] == "recv" for e in ev)
    assert _metric(out, lab, "sim_time_s") == [8.0, 16.0]
    assert _metric(out, lab, "bytes_wasted") == [72.0, 72.0]
    assert _metric(out, lab, "reported") == [2.0, 2.0]   # edge1 aggregated both in round 1


def test_resume_delivers_the_transfer_handover_s_later(tmp_path):
    """resume, handover_s 0.25: client0's upload (2.5..4) meets the handover at 3 s and arrives
    at edge0 at 4.25; edge0 aggregates it, finds nobody for edge round 1 and uploads 4.25..5.25;
    edge1 trains both clients in its edge round 1 (4..7) and uploads 7..8."""
    out, lab, ev = _run(tmp_path, HIER, {"kind": "trace", "path": "moves.csv",
                                          "on_handover": "resume", "handover_s": 0.25},
                        "3.0,client0,edge1\n")
    assert (4.25, "edge0", "recv", "client0", 72.0) in ev
    assert (4.25, "edge0", "aggregate", "", 1) in ev
    assert (5.25, "cloud", "recv", "edge0", 72.0) in ev
    assert (8.0, "cloud", "recv", "edge1", 72.0) in ev
    assert sorted(r for r in _rows(out, lab) if r[0] == 1) == [
        (1, 0, 0, 0, "edge0"), (1, 0, 1, 0, "edge1"), (1, 1, 0, 0, "edge1"),
        (1, 1, 1, 0, "edge1")]
    assert _metric(out, lab, "bytes_wasted") == [0.0, 0.0]
    assert _metric(out, lab, "sim_time_s") == [8.0, 16.0]
    # client0 was aggregated under edge0 and then edge1 in round 1: reported once
    assert _metric(out, lab, "reported") == [2.0, 2.0]
    assert _metric(out, lab, "failed") == [0.0, 0.0]


def test_flat_upload_takes_the_new_edges_path(tmp_path):
    """FedAvg (edges relay), resume with handover_s 0.25: client0 moves to edge1 at 2 s, inside
    its download (1..2.5), which arrives at 2.75; its upload goes to edge1 (2.75..4.25), whose
    link to the cloud carries client1's upload first (4..5), then client0's (5..6)."""
    out, lab, ev = _run(tmp_path, {"name": "fedavg"},
                        {"kind": "trace", "path": "moves.csv", "on_handover": "resume",
                         "handover_s": 0.25}, "2.0,client0,edge1\n")
    assert (2.75, "client0", "recv", "edge0", 72.0) in ev
    assert (4.25, "edge1", "recv", "client0", 72.0) in ev
    ups = [e[0] for e in ev if e[1] == "cloud" and e[2] == "recv" and e[0] < 6.5]
    assert ups == [5.0, 6.0]
    assert not any(e[2] == "send" and e[1] == "edge0" and e[3] == "cloud" for e in ev)
    assert _metric(out, lab, "sim_time_s")[0] == 6.0
    assert {r["edge"] for r in out.clients[lab]} == {"edge1"}


def test_markov_is_deterministic_and_rate_zero_is_no_mobility(tmp_path):
    algos = [{"name": "hierfavg", "label": "h", "edge_rounds": 2}, {"name": "fedavg"}]
    kw = {"topology.edges.count": 2, "topology.clients.count": 6, "train.rounds": 3,
          "algorithms": algos}
    mob = {"kind": "markov", "handover_rate_per_s": 2e4, "neighbours": "all"}
    a = run_outputs(make_scenario(tmp_path / "a", **kw, **{"topology.mobility": mob}))
    b = run_outputs(make_scenario(tmp_path / "b", **kw, **{"topology.mobility": mob}))
    for lab in ("h", "fedavg"):
        assert a.metrics[lab] == b.metrics[lab] and a.clients[lab] == b.clients[lab]
        assert a.results[lab].trace.events == b.results[lab].trace.events
        assert any(e[2] == "handover" for e in a.results[lab].trace.events)
    zero = {"kind": "markov", "handover_rate_per_s": 0.0}
    z = run_outputs(make_scenario(tmp_path / "z", **kw, **{"topology.mobility": zero}))
    n = run_outputs(make_scenario(tmp_path / "n", **kw))
    for lab in ("h", "fedavg"):
        assert z.metrics[lab] == n.metrics[lab]
        assert [dict(r, edge="") for r in z.clients[lab]] == n.clients[lab]
        assert z.results[lab].trace.events == n.results[lab].trace.events
        assert (z.final(lab) == n.final(lab)).all()
    assert {r["edge"] for r in z.clients["fedavg"]} == {"edge0", "edge1"}


def test_an_entrys_own_mobility_overrides_the_topologys(tmp_path):
    algos = [{"name": "fedavg", "label": "still"},
             {"name": "fedavg", "label": "moving",
              "mobility": {"kind": "markov", "handover_rate_per_s": 2e4}}]
    out = run_outputs(make_scenario(tmp_path, algorithms=algos,
                                    **{"topology.edges.count": 2}))
    assert not any(e[2] == "handover" for e in out.results["still"].trace.events)
    assert any(e[2] == "handover" for e in out.results["moving"].trace.events)


def test_handover_rate_statistics_and_neighbours():
    """Exponential holding times of rate r: about r T handovers per client over T seconds."""
    edges = tuple(f"edge{i}" for i in range(4))
    parent = {e: "cloud" for e in edges}
    rate, horizon, n = 0.05, 20_000.0, 40
    for kind in ("ring", "all"):
        mob = Mobility(MobilitySpec(kind="markov", handover_rate_per_s=rate, neighbours=kind),
                       7, edges, np.arange(n) % 4, parent)
        counts, steps = [], []
        for k in range(n):
            t, e = mob._moves(k, horizon)
            inside = [i for i, x in enumerate(t) if x <= horizon]
            counts.append(len(inside))
            path = [k % 4] + [e[i] for i in inside]
            steps += [(b - a) % 4 for a, b in zip(path, path[1:])]
        assert abs(np.mean(counts) / (rate * horizon) - 1) < 0.03, np.mean(counts)
        share = np.bincount(steps, minlength=4) / len(steps)
        want = [0, 0.5, 0, 0.5] if kind == "ring" else [0, 1 / 3, 1 / 3, 1 / 3]
        assert np.allclose(share, want, atol=0.02), share
    # the same seed, the same moves; a move at exactly t has happened at t
    a = Mobility(MobilitySpec(kind="markov", handover_rate_per_s=1.0), 3, edges,
                 np.zeros(2, int), parent)
    t0 = a.next_move(1, 0.0)
    assert a.edge_id(1, t0) != 0 and a.edge_id(1, np.nextafter(t0, 0)) == 0
    assert Mobility(MobilitySpec(kind="markov", handover_rate_per_s=1.0), 3, edges,
                    np.zeros(2, int), parent).next_move(1, 0.0) == t0
    assert _neighbours("graph", ("e0", "e1", "e2"), {"e0": "r0", "e1": "r0", "e2": "r1"}) == \
        [[1], [0], []]
    assert _neighbours("ring", ("e0", "e1"), {}) == [[1], [0]]


@pytest.mark.parametrize("body, line, needle", [
    ("1,client0,edge1\n0.5,client1,edge0\n", 3, "unsorted"),
    ("1,client9,edge1\n", 2, "unknown client"),
    ("1,client0,edge7\n", 2, "unknown node"),
    ("-1,client0,edge1\n", 2, "expected a finite number >= 0"),
    ("1,client0,edge1\n1,client0,edge0\n", 3, "moves twice"),
    ("1,client0,edge0\n1,client0,edge1\n", 3, "moves twice"),   # the first line moves nothing
    ("abc,client0,edge1\n", 2, "expected a number"),
    ("1,client0,edge1\n2,client0,edge0,9\n", 3, "4 columns, more than the header's 3"),
])
def test_bad_moves_lines_name_file_and_line(tmp_path, body, line, needle):
    path = tmp_path / "moves.csv"
    path.write_text("time_s,client,node\n" + body)
    with pytest.raises(ScenarioError) as err:
        read_moves(str(path), ["client0", "client1"], ["edge0", "edge1"], [0, 1])
    assert f"{path}:{line}:" in str(err.value) and needle in str(err.value), str(err.value)


def test_bad_mobility_exits_2_without_traceback(tmp_path):
    """A bad moves file (its header) and bad keys (collected in one list): exit 2."""
    (tmp_path / "moves.csv").write_text("when,who,where\n1,client0,edge1\n")
    bad_file = make_scenario(tmp_path, name="f", **{
        "topology.mobility": {"kind": "trace", "path": "moves.csv"}, "topology.edges.count": 2})
    bad_keys = make_scenario(tmp_path, name="k", **{
        "topology.mobility": {"kind": "markov", "handover_rate_per_s": -1},
        "algorithms": [{"name": "fedavg", "mobility": {"kind": "trace"}},
                       {"name": "fedavg", "label": "b",
                        "mobility": {"kind": "markov", "path": "m.csv"}}]})
    for path, needles in ((bad_file, [f"{tmp_path / 'moves.csv'}:1:", "time_s,client,node"]),
                          (bad_keys, ["handover_rate_per_s", "must be >= 0", "needs path",
                                      "algorithms[1].mobility", "path does not apply"])):
        r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                           capture_output=True, text=True)
        assert r.returncode == 2 and all(n in r.stderr for n in needles), r.stderr
        assert "Traceback" not in r.stderr


def test_mobility_with_an_asynchronous_cloud_is_refused(tmp_path):
    path = make_scenario(tmp_path, **{
        "topology.edges.count": 2, "topology.mobility": {"kind": "markov",
                                                         "handover_rate_per_s": 1.0},
        "algorithms": [{"name": "fedavg", "round": {"policy": "fedbuff", "k": 2}}]})
    with pytest.raises(ScenarioError, match="mobility runs with synchronous rounds only"):
        run_outputs(path)


@pytest.mark.parametrize("case", ["entry_round", "edge_round"])
def test_mobility_with_asynchrony_is_refused_before_anything_runs(tmp_path, case):
    """validate said valid; run refused an asynchronous cloud only when its entry's turn came
    (after the entries before it had run and written), and asynchronous edges with moving
    clients never finished a round (an edge re-sent to a client that had moved away)."""
    moving = {"kind": "markov", "handover_rate_per_s": 5.0}
    if case == "entry_round":
        algos = [{"name": "hierfavg", "label": "ok", "edge_rounds": 2},
                 {"name": "hierfavg", "label": "bad", "edge_rounds": 2,
                  "round": {"policy": "fedbuff", "k": 2}, "mobility": moving}]
        kw, key = {}, "algorithms[1].mobility.kind = 'markov'"
    else:
        algos = [{"name": "hierfavg", "label": "bad", "edge_rounds": 2}]
        kw = {"topology.mobility": moving, "train.edge_round": {"policy": "fedbuff", "k": 2}}
        key = "topology.mobility.kind = 'markov'"
    path = make_scenario(tmp_path, topology=TOPO, algorithms=algos,
                         **{"train.rounds": 2, **kw})
    for cmd in (["validate", path], ["run", path, "--out", str(tmp_path / "out")]):
        r = subprocess.run([sys.executable, "-m", "hierfl", *cmd], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert key in r.stderr and "synchronous rounds only" in r.stderr
        assert "bad:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "ok").exists()


def test_timeline_keeps_handovers_and_ends_a_lost_transfer_where_it_was_lost():
    from hierfl.report.timeline import build
    ev = [(0.0, "cloud", "round_start", "", 1), (0.0, "edge0", "send", "client0", 72.0),
          (1.0, "client0", "handover", "edge0->edge1", 1), (1.0, "client0", "lost", "edge0", 72.0),
          (2.0, "cloud", "round_end", "", 1)]
    tl = build(ev, 1)
    assert tl.handovers == [(1.0, "client0", "edge0->edge1")]
    assert [(b.node, b.kind, b.start, b.end) for b in tl.bars] == [
        ("client0", "download", 0.0, 1.0), ("edge0", "upload", 0.0, 1.0)]
    assert tl.in_flight == 0 and "client0" in tl.clients


def test_resume_with_mobility_is_bit_identical_and_sees_a_changed_moves_file(tmp_path):
    from hierfl import load, run_scenario
    from test_resume import _outputs, _scenario
    path = _scenario(tmp_path, [{"name": "hierfavg", "edge_rounds": 2}], rounds=4,
                     extra_topo={"mobility": {"kind": "markov", "handover_rate_per_s": 3.0}})
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    run_scenario(sc, progress=False, stop_after=2)
    run_scenario(sc, progress=False, resume=True)
    ref = _outputs(str(tmp_path / "ref"), "hierfavg")
    assert ref == _outputs(str(tmp_path / "cut"), "hierfavg")
    assert ref["trace"].count(b"handover") > 0
    (tmp_path / "moves.csv").write_text("time_s,client,node\n0.001,client0,edge1\n")
    path = _scenario(tmp_path, [{"name": "hierfavg", "edge_rounds": 2}], rounds=4,
                     extra_topo={"mobility": {"kind": "trace", "path": "moves.csv"}})
    sc = load(path, out=str(tmp_path / "moved"))
    run_scenario(sc, progress=False, stop_after=2)
    (tmp_path / "moves.csv").write_text("time_s,client,node\n0.002,client0,edge1\n")
    with pytest.raises(ScenarioError, match="moves_trace"):
        run_scenario(sc, progress=False, resume=True)


def test_too_many_markov_handovers_is_a_work_guard_error(tmp_path):
    from hierfl import load
    path = make_scenario(tmp_path, **{"topology.edges.count": 2, "topology.mobility": {
        "kind": "markov", "handover_rate_per_s": 1e15}})
    with pytest.raises(ScenarioError, match="handovers, more than 1e"):
        load(path)


def test_resumed_transfers_that_can_never_finish_are_refused_within_seconds(tmp_path):
    """rate 2/s, handover_s 1: each handover delays a transfer 1 s, in which it meets two more
    on average: the round never ended (a hang). Refused at validate and run, naming the keys;
    run in a subprocess with a timeout so that a regression cannot hang the tests."""
    bad = {"kind": "markov", "handover_rate_per_s": 2.0, "on_handover": "resume",
           "handover_s": 1.0}
    path = make_scenario(tmp_path, topology=TOPO, algorithms=[HIER],
                         **{"train.rounds": 2, "topology.mobility": bad})
    for cmd in (["validate", path], ["run", path, "--out", str(tmp_path / "out"), "--quiet"]):
        r = subprocess.run([sys.executable, "-m", "hierfl", *cmd], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "topology.mobility" in r.stderr and "handover_rate_per_s x handover_s = " \
            "2 x 1 = 2 >= 1" in r.stderr and "never arrives" in r.stderr, r.stderr


def test_a_transfer_meeting_too_many_handovers_is_an_error_not_a_hang(tmp_path, monkeypatch):
    """rate x handover_s < 1 finishes; the run-time guard (handovers met by one transfer)
    names the keys where that count is exceeded (here made small)."""
    import hierfl.sim.mobility as sim_mobility
    ok = {"kind": "markov", "handover_rate_per_s": 2.0, "on_handover": "resume",
          "handover_s": 0.4}
    out, lab, ev = _run(tmp_path / "a", HIER, ok)
    assert any(e[2] == "handover" for e in ev)
    monkeypatch.setattr(sim_mobility, "MAX_TRANSFER_HANDOVERS", 1)
    algo = {**HIER, "mobility": {**ok, "handover_s": 0.45}}
    with pytest.raises(ScenarioError) as err:
        _run(tmp_path / "b", algo, None)
    msg = str(err.value)
    assert "algorithms[0].mobility.handover_s = 0.45" in msg and "met more than 1 " \
        "handovers (work guard)" in msg, msg
