"""Stragglers, deadlines and gamma-inexact local solvers (issue 5), against hand computation."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import make_scenario, run_outputs, write_npz


def _doc(tmp_path, xs, ys, flops, train, algorithms=None, clients=2):
    npz = write_npz(tmp_path / "d.npz", list(zip(xs, ys)))
    return {
        "name": "strag", "seed": 0,
        "topology": {"edges": {"count": 1, "link": {"latency_s": 0.1, "bandwidth_Bps": 4}},
                     "clients": {"count": clients, "compute_flops": {"dist": "choice",
                                                                      "choices": [flops[0]]},
                                 "link": {"latency_s": 0.05, "bandwidth_Bps": 2}}},
        "data": {"name": "npz", "path": npz, "test_fraction": 0.0},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 1, "clients_per_round": "all", "checkpoint_every": 0, **train},
        "algorithms": algorithms or [{"name": "fedavg"}],
    }


def _graph_with_speeds(tmp_path, doc, speeds):
    """Give each client its own constant speed through an explicit assignment of profiles."""
    doc["topology"]["profiles"] = {"devices": {f"d{i}": {"compute_flops": s}
                                               for i, s in enumerate(speeds)}}
    doc["topology"]["clients"]["mix"] = [{"fraction": 1 / len(speeds), "device": f"d{i}"}
                                         for i in range(len(speeds))]
    return doc


XS = [[[1.0], [1.0]], [[1.0], [1.0]]]
YS = [[1.0, 1.0], [1.0, 1.0]]


def _find_speeds(tmp_path, doc):
    """Which client got which profile (the mix is laid out over a seeded permutation)."""
    from hierfl.scenario.load import load
    from hierfl.run import build_world
    sc = load(make_scenario(tmp_path, doc, name="probe"))
    return build_world(sc).topo.client_flops


def test_deadline_partial_budgets_and_trace_by_hand(tmp_path):
    """Model: 1 float (4 B). Path: cloud-edge 1.1 s each way (0.1 + 4/4), edge-client 2.05 s
    (0.05 + 4/2). Nominal round trip 6.3 s; deadline 10 s leaves 3.7 s of compute.
    A full-batch step on 2 rows costs 2 x 3 x 2 FLOPs = 12 FLOPs: 1 s at 12 FLOP/s (3 steps
    fit), 2 s at 6 FLOP/s (1 step fits). Planned K = 5."""
    doc = _doc(tmp_path, XS, YS, [12.0], {"local": {"steps": 5, "batch_size": "full", "lr": 0.1},
                                          "round": {"policy": "deadline_partial",
                                                    "deadline_s": 10.0}})
    doc = _graph_with_speeds(tmp_path, doc, [12.0, 6.0])
    speeds = _find_speeds(tmp_path, doc)
    fast = int(np.argmax(speeds))
    slow = 1 - fast
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    res = out.results["fedavg"]
    rows = {int(r["client"]): r for r in out.clients["fedavg"]}
    assert (int(rows[fast]["budget"]), int(rows[fast]["steps"])) == (3, 3)
    assert (int(rows[slow]["budget"]), int(rows[slow]["steps"])) == (1, 1)
    assert float(rows[fast]["compute_s"]) == pytest.approx(3.0)
    assert float(rows[slow]["compute_s"]) == pytest.approx(2.0)
    # slow: computes 3.15..5.15, up 5.15..7.2 (edge), relay 7.2..8.3 (cloud);
    # fast: computes 3.15..6.15, up ..8.2, relay waits for nothing (wire free at 8.2) -> 9.3
    c_fast, c_slow = f"client{fast}", f"client{slow}"
    got = sorted((round(t, 9), n, k, p) for t, n, k, p, _ in res.trace.events)
    expected = sorted([
        (0.0, "cloud", "round_start", ""), (0.0, "cloud", "send", "edge0"),
        (1.1, "edge0", "recv", "cloud"), (1.1, "edge0", "send", c_fast),
        (1.1, "edge0", "send", c_slow), (3.15, c_fast, "recv", "edge0"),
        (3.15, c_slow, "recv", "edge0"), (3.15, c_fast, "compute_start", ""),
        (3.15, c_slow, "compute_start", ""), (5.15, c_slow, "compute_end", ""),
        (5.15, c_slow, "send", "edge0"), (6.15, c_fast, "compute_end", ""),
        (6.15, c_fast, "send", "edge0"), (7.2, "edge0", "recv", c_slow),
        (7.2, "edge0", "send", "cloud"), (8.2, "edge0", "recv", c_fast),
        (8.2, "edge0", "send", "cloud"), (8.3, "cloud", "recv", "edge0"),
        (9.3, "cloud", "recv", "edge0"), (9.3, "cloud", "aggregate", ""),
        (9.3, "cloud", "round_end", ""),
    ])
    assert got == expected


def test_deadline_partial_budgets_count_the_gamma_checks(tmp_path):
    """The path of the test above (6.3 s of round trip), a 14 s deadline: 7.7 s of compute. A
    gamma target charges a full-data gradient at the start and one every check_every = 2
    steps before the last; the full data are the two rows of a step, so b steps cost
    b + 1 + (b - 1) // 2 step-times: 4 steps fit at 1 s a step-time (6 s), 2 at 2 s (6 s).
    Budgeted on the steps alone (7 and 3 steps) both clients came late: a tester's client
    missed every deadline and nothing was aggregated."""
    doc = _doc(tmp_path, XS, YS, [12.0],
               {"local": {"steps": 5, "batch_size": "full", "lr": 0.1, "gamma": 1e-12,
                          "check_every": 2},
                "round": {"policy": "deadline_partial", "deadline_s": 14.0}})
    doc = _graph_with_speeds(tmp_path, doc, [12.0, 6.0])
    speeds = _find_speeds(tmp_path, doc)
    fast = int(np.argmax(speeds))
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    rows = {int(r["client"]): r for r in out.clients["fedavg"]}
    for k, steps in ((fast, 4), (1 - fast, 2)):
        r = rows[k]
        assert (int(r["budget"]), int(r["steps"]), r["dropped"]) == (steps, steps, "0")
        assert float(r["compute_s"]) == pytest.approx(6.0)
    assert out.results["fedavg"].rows[1]["reported"] == 2


def test_deadline_partial_client_with_no_step_is_charged_no_reference(tmp_path):
    """A 7 s deadline leaves 0.7 s of compute: not even the gamma target's reference gradient
    (1 s) fits, so the budget is 0 steps. A client with no step to take needs no reference:
    it is charged nothing and arrives in time (it was charged the reference and came late).
    One client: two would queue on the edge's uplink, past the nominal times."""
    doc = _doc(tmp_path, XS[:1], YS[:1], [12.0],
               {"local": {"steps": 5, "batch_size": "full", "lr": 0.1, "gamma": 1e-12,
                          "check_every": 2},
                "round": {"policy": "deadline_partial", "deadline_s": 7.0}}, clients=1)
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    for r in out.clients["fedavg"]:
        assert (int(r["budget"]), int(r["steps"]), float(r["compute_s"]), r["dropped"]) == \
            (0, 0, 0.0, "0")
    assert out.results["fedavg"].rows[1]["reported"] == 1


def test_deadline_drop_discards_exactly_the_late_clients(tmp_path):
    """K = 2 full-batch steps: fast (12 FLOP/s) 2 s of compute -> at the cloud at 8.3;
    slow (6 FLOP/s) 4 s -> 10.3, after the 9 s deadline: dropped, its 2 x 4 B wasted."""
    xs = [[[1.0], [2.0]], [[1.0], [3.0]]]
    ys = [[1.0, 2.0], [0.0, 1.0]]
    doc = _doc(tmp_path, xs, ys, [12.0], {"rounds": 2,
                                          "local": {"steps": 2, "batch_size": "full", "lr": 0.1},
                                          "round": {"policy": "deadline_drop", "deadline_s": 9.0}})
    doc = _graph_with_speeds(tmp_path, doc, [12.0, 6.0])
    speeds = _find_speeds(tmp_path, doc)
    fast = int(np.argmax(speeds))
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    res, w = out.results["fedavg"], out.final("fedavg")
    r1, r2 = res.rows[1], res.rows[2]
    assert r1["sim_time_s"] == pytest.approx(9.0)          # closed at the deadline
    assert (r1["reported"], r1["failed"]) == (1, 1)
    assert r2["bytes_wasted"] == 8.0                         # the late upload, both hops
    rows = [r for r in out.clients["fedavg"] if r["round"] == "1"]
    dropped = {int(r["client"]) for r in rows if r["dropped"] == "1"}
    assert dropped == {1 - fast}
    # round 1 aggregated the fast client alone: two GD steps from 0, then round 2 likewise
    x, y = np.array(xs[fast]).ravel(), np.array(ys[fast])
    v = 0.0
    for _ in range(4):
        v -= 0.1 * np.mean(2 * (v * x - y) * x)
    assert w[0] == pytest.approx(v, abs=1e-6)


def test_gamma_stop_and_its_cost_by_hand(tmp_path):
    """F(w) = mean (w - 1)^2 on x = [1, 1]: grad 2 (w - 1). From 0 with lr 0.25:
    w1 = 0.5 (ratio 0.5), w2 = 0.75 (ratio 0.25 <= gamma 0.3): stops after 2 of 10 steps.
    Cost: 2 steps x 2 rows + 3 full gradients (start + checks at steps 1 and 2) x 2 rows = 10
    sample-gradients x 3 x 2 FLOPs = 60 FLOPs = 5 s at 12 FLOP/s."""
    doc = _doc(tmp_path, [[[1.0], [1.0]]], [[1.0, 1.0]], [12.0],
               {"local": {"steps": 10, "batch_size": "full", "lr": 0.25, "gamma": 0.3,
                          "check_every": 1}}, clients=1)
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    w = out.final("fedavg")
    (row,) = out.clients["fedavg"]
    assert (int(row["steps"]), int(row["budget"])) == (2, 10)
    assert float(row["gamma"]) == pytest.approx(0.25, abs=1e-6)
    assert float(row["compute_s"]) == pytest.approx(5.0)
    assert w[0] == pytest.approx(0.75, abs=1e-6)


def test_gamma_target_is_honoured_on_synthetic(tmp_path):
    path = make_scenario(
        tmp_path, name="g", seed=1,
        topology={"edges": {"count": 2}, "clients": {"count": 12, "compute_flops": 1e8}},
        data={"name": "synthetic", "samples": {"dist": "uniform", "low": 30, "high": 80}},
        train={"rounds": 3, "clients_per_round": 8, "checkpoint_every": 0,
               "local": {"steps": 60, "batch_size": 10, "lr": 0.05, "gamma": 0.6,
                         "check_every": 3}},
        algorithms=[{"name": "fedprox", "mu": 0.5}])
    rows = run_outputs(path, out=tmp_path / "out").clients["fedprox"]
    early = [r for r in rows if int(r["steps"]) < int(r["budget"])]
    full = [r for r in rows if int(r["steps"]) == int(r["budget"])]
    assert early, "no client stopped early: the test does not exercise the gamma stop"
    for r in early:
        assert float(r["gamma"]) <= 0.6 + 1e-6
        assert int(r["steps"]) % 3 == 0
    for r in full:
        assert np.isfinite(float(r["gamma"]))


def test_random_epochs_stragglers_identical_across_algorithms_and_seeded(tmp_path):
    path = make_scenario(
        tmp_path, name="re", seed=5,
        topology={"edges": {"count": 1}, "clients": {"count": 10, "compute_flops": 1e8}},
        data={"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 60}},
        stragglers={"fraction": 0.5, "mode": "random_epochs"},
        train={"rounds": 4, "clients_per_round": 6, "checkpoint_every": 0,
               "local": {"epochs": 5, "batch_size": 10, "lr": 0.05}},
        algorithms=[{"name": "fedavg"}, {"name": "fedprox", "mu": 1.0}])

    def table(out, label):
        return [(r["round"], r["client"], r["straggler"], r["budget"])
                for r in out.clients[label]]

    a = run_outputs(path, out=tmp_path / "a")
    a_avg, a_prox = table(a, "fedavg"), table(a, "fedprox")
    assert a_avg == a_prox
    strag = [r for r in a.clients["fedavg"] if r["straggler"] == "1"]
    assert len(strag) == 4 * 3
    # FedAvg drops them, FedProx keeps their partial work; epochs in [1, 5] -> budget multiple
    # of the client's steps per epoch and at most the full 5 epochs
    assert all(r["dropped"] == "1" for r in strag)
    assert all(r["dropped"] == "0" for r in a.clients["fedprox"])
    assert table(run_outputs(path, out=tmp_path / "b"), "fedavg") == a_avg
    assert table(run_outputs(path, seed=6, out=tmp_path / "c"), "fedavg") != a_avg


def test_steps_within_is_the_largest_count_that_fits():
    """sim/stragglers._steps_within against counting up one step at a time: b steps cost
    b step_s plus full_s after every `check` steps before the last."""
    from hierfl.sim.stragglers import _steps_within
    g = np.random.default_rng(0)
    for _ in range(2000):
        step_s, full_s = g.uniform(0.01, 1.0), g.uniform(0.0, 5.0)
        check, left = int(g.integers(0, 6)), g.uniform(0.0, 30.0)

        def cost(b):
            return b * step_s + (((b - 1) // check) * full_s if check and b > 0 else 0.0)
        b = 0
        while cost(b + 1) <= left:
            b += 1
        assert _steps_within(left, step_s, full_s, check) == b


def test_a_late_upload_has_no_upload_seconds(tmp_path):
    """upload_s runs to the arrival at the aggregator that uses the upload: a late one (an
    edge round closed by its deadline) has none, whether it arrives before its cloud round's
    rows are written (round 1 here: client1's 400 B at 200 B/s reach edge0 at 2.25 s, the
    rows are written at 2.4 s) or after them (it was 2.021 s in round 1, empty later)."""
    import json
    links = {("edge0", "cloud"): (0.05, 2000), ("cloud", "edge0"): (0.07, 5000),
             ("edge1", "cloud"): (0.02, 1500), ("cloud", "edge1"): (0.03, 2500),
             ("client0", "edge0"): (0.013, 3000), ("edge0", "client0"): (0.017, 6000),
             ("client1", "edge0"): (0.021, 200), ("edge0", "client1"): (0.011, 7000),
             ("client2", "edge1"): (0.007, 1100), ("edge1", "client2"): (0.009, 9000),
             ("client3", "edge1"): (0.031, 1900), ("edge1", "client3"): (0.029, 5500)}
    nodes = [{"id": "cloud", "role": "cloud", "flops": 1e12}] + \
        [{"id": f"edge{e}", "role": "edge", "flops": 1e11, "parent": "cloud"} for e in (0, 1)] + \
        [{"id": f"client{k}", "role": "client", "flops": f, "parent": f"edge{k // 2}"}
         for k, f in enumerate((1e6, 3e6, 7e5, 2.3e6))]
    graph = {"directed": True, "multigraph": False, "graph": {}, "nodes": nodes,
             "links": [{"source": a, "target": b, "latency_s": lat, "bandwidth_Bps": bw}
                       for (a, b), (lat, bw) in links.items()]}
    (tmp_path / "net.json").write_text(json.dumps(graph))
    doc = {"name": "late", "seed": 5, "topology": {"graph": "net.json"},
           "data": {"name": "synthetic", "dim": 24, "classes": 4, "samples": 50},
           "model": {"name": "logreg"},
           "train": {"rounds": 2, "clients_per_round": "all", "checkpoint_every": 0,
                     "local": {"steps": 3, "batch_size": 10, "lr": 0.05},
                     "edge_round": {"policy": "deadline_drop", "deadline_s": 1.0}},
           "algorithms": [{"name": "hierfavg", "edge_rounds": 2}]}
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    rows = out.clients["hierfavg"]
    late = [r for r in rows if r["dropped"] == "1"]
    assert {r["client"] for r in late} == {"1"} and len(late) == 4
    assert all(r["upload_s"] == "" for r in late)
    assert all(r["upload_s"] != "" for r in rows if r["dropped"] == "0")
