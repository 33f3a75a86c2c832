"""The system model of issue 6: any-depth trees, fair link sharing, outages, availability and
edge pre-aggregation, checked against hand-computed traces and closed forms."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from hierfl.sim.failures import Failures
from hierfl.sim.links import FairLink, Ledger, Link
from hierfl.sim.trace import Trace
from hierfl.config.topology import AvailabilitySpec, FailureSpec

from conftest import make_scenario, run_outputs, scenario_doc, write_npz


def _run(tmp_path, doc: dict, name: str = "s", out: str = "out"):
    """Write doc to tmp_path/<name>.yaml and run it: (AlgoResult, final global params) of its
    one algorithm."""
    o = run_outputs(make_scenario(tmp_path, doc, name=name), out=tmp_path / out)
    (label,) = o.labels
    return o.results[label], o.final(label)


def _two_transfers(cls, delay: float):
    env, trace, ledger = simpy.Environment(), Trace(), Ledger()
    link = cls(env, "a", "b", 0.5, 100.0, "edge_cloud", "up", trace, ledger)
    done = {}

    def go(name, wait):
        yield env.timeout(wait)
        done[name] = yield env.process(link.send(1000.0))

    env.process(go("A", 0.0))
    env.process(go("B", delay))
    env.run()
    return done, ledger


def test_fair_sharing_of_one_link_by_two_transfers():
    # S = 1000 B, bw = 100 B/s, latency 0.5 s; B starts 2 s after A.
    # A alone for 2 s: 200 B sent. Shared at 50 B/s each: A's last 800 B take 16 s -> done 18,
    # B has sent 800 B by then; its last 200 B alone take 2 s -> done 20. Arrivals +0.5.
    done, ledger = _two_transfers(FairLink, 2.0)
    assert done["A"] == pytest.approx(18.5, abs=1e-9)
    assert done["B"] == pytest.approx(20.5, abs=1e-9)
    assert ledger.up["edge_cloud"] == 2000.0


def test_fifo_queues_the_second_transfer():
    # A: 0..10 s on the wire, arrives 10.5; B waits until 10, 10..20, arrives 20.5.
    done, _ = _two_transfers(Link, 2.0)
    assert done["A"] == pytest.approx(10.5)
    assert done["B"] == pytest.approx(20.5)


def test_fair_sharing_equal_starts_finish_together():
    done, _ = _two_transfers(FairLink, 0.0)
    assert done["A"] == pytest.approx(20.5) and done["B"] == pytest.approx(20.5)


def _deep_doc(tmp_path, **train):
    npz = write_npz(tmp_path / "d.npz", [([[1.0], [2.0]], [1.0, 2.0]),
                                         ([[1.0], [3.0]], [0.0, 1.0])])
    return {
        "name": "deep", "seed": 0,
        "topology": {
            "tiers": [
                {"name": "regional", "count": 1, "link": {"latency_s": 0.1, "bandwidth_Bps": 4}},
                {"name": "edge", "count": 1, "link": {"latency_s": 0.2, "bandwidth_Bps": 8}},
            ],
            "clients": {"count": 2, "compute_flops": 12,
                        "link": {"latency_s": 0.05, "bandwidth_Bps": 2}},
        },
        "data": {"name": "npz", "path": npz, "test_fraction": 0.0},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 1, "clients_per_round": "all",
                  "local": {"steps": 2, "batch_size": "full", "lr": 0.1}, **train},
        "algorithms": [{"name": "fedavg"}],
    }


def test_three_tier_plus_trace_by_hand(tmp_path):
    """client -> edge -> regional -> cloud; one model = 1 float = 4 bytes.
    Links (tx = 4 B / bandwidth): cloud-regional 1 s + 0.1 s, regional-edge 0.5 s + 0.2 s,
    edge-client 2 s + 0.05 s. Compute: 2 full-batch steps x 2 samples x 3 x (2 FLOPs forward)
    = 24 FLOPs at 12 FLOP/s = 2 s. Both uploads reach edge0 at 7.9 and queue on edge0->regional0
    (0.5 s each), then on regional0->cloud (1 s each)."""
    res, _ = _run(tmp_path, _deep_doc(tmp_path))
    ev = sorted((round(t, 9), n, k, p, v) for t, n, k, p, v in res.trace.events)
    expected = sorted([
        (0.0, "cloud", "round_start", "", 1),
        (0.0, "cloud", "send", "regional0", 4), (1.1, "regional0", "recv", "cloud", 4),
        (1.1, "regional0", "send", "edge0", 4), (1.8, "edge0", "recv", "regional0", 4),
        (1.8, "edge0", "send", "client0", 4), (1.8, "edge0", "send", "client1", 4),
        (3.85, "client0", "recv", "edge0", 4), (3.85, "client1", "recv", "edge0", 4),
        (3.85, "client0", "compute_start", "", 2), (3.85, "client1", "compute_start", "", 2),
        (5.85, "client0", "compute_end", "", 2), (5.85, "client1", "compute_end", "", 2),
        (5.85, "client0", "send", "edge0", 4), (5.85, "client1", "send", "edge0", 4),
        (7.9, "edge0", "recv", "client0", 4), (7.9, "edge0", "recv", "client1", 4),
        (7.9, "edge0", "send", "regional0", 4), (8.4, "edge0", "send", "regional0", 4),
        (8.6, "regional0", "recv", "edge0", 4), (9.1, "regional0", "recv", "edge0", 4),
        (8.6, "regional0", "send", "cloud", 4), (9.6, "regional0", "send", "cloud", 4),
        (9.7, "cloud", "recv", "regional0", 4), (10.7, "cloud", "recv", "regional0", 4),
        (10.7, "cloud", "aggregate", "", 2), (10.7, "cloud", "round_end", "", 1),
    ])
    assert ev == expected


def test_hierfavg_on_three_tiers_aggregates_per_tier(tmp_path):
    """tier_rounds [1, 2]: the edge runs two rounds per regional round; one model crosses the
    regional->cloud link each way, and each client link carries 2 models each way."""
    doc = _deep_doc(tmp_path)
    doc["algorithms"] = [{"name": "hierfavg", "tier_rounds": [1, 2]}]
    res, w = _run(tmp_path, doc)
    row = res.rows[-1]
    assert row["bytes_client_edge"] == 2 * 2 * 2 * 4      # 2 clients x 2 rounds x 2 directions
    assert row["bytes_edge_cloud"] == 2 * 4 * 2           # edge-regional and regional-cloud
    # numpy: two edge rounds of two full-batch GD steps each, n-weighted edge average
    xs, ys = [np.array([1.0, 2.0]), np.array([1.0, 3.0])], [np.array([1.0, 2.0]), np.array([0.0, 1.0])]
    w_ref = 0.0
    for _ in range(2):
        locals_ = []
        for x, y in zip(xs, ys):
            v = w_ref
            for _ in range(2):
                v -= 0.1 * np.mean(2 * (v * x - y) * x)
            locals_.append(v)
        w_ref = 0.5 * locals_[0] + 0.5 * locals_[1]
    assert w[0] == pytest.approx(w_ref, abs=1e-6)


def test_edge_preaggregation_same_model_fewer_bytes(tmp_path):
    base = _deep_doc(tmp_path)
    base["topology"]["tiers"] = [{"name": "edge", "count": 1,
                                  "link": {"latency_s": 0.2, "bandwidth_Bps": 8}}]
    base["train"]["rounds"] = 3
    r1, w1 = _run(tmp_path, base, "relay", "o1")
    r2, w2 = _run(tmp_path, scenario_doc(base, **{"train.edge_preaggregate": True}), "pre", "o2")
    np.testing.assert_allclose(w1, w2, atol=1e-7)
    # relay: 1 down + 2 up per round on edge-cloud; pre-aggregated: 1 down + 1 partial
    # (4 B sum + 4 B weight) per round
    assert r1.rows[-1]["bytes_edge_cloud"] == 3 * (4 + 2 * 4)
    assert r2.rows[-1]["bytes_edge_cloud"] == 3 * (4 + 8)
    assert r1.rows[-1]["bytes_client_edge"] == r2.rows[-1]["bytes_client_edge"]


def test_edge_outage_loses_uploads_and_round_closes(tmp_path):
    """Two edges with one client each; edge1 is down while its client uploads. FedAvg then
    aggregates client0 alone: w = client0's two GD steps from 0."""
    doc = scenario_doc(_deep_doc(tmp_path), name="outage", topology={
        "edges": {"count": 2, "link": {"latency_s": 0.1, "bandwidth_Bps": 4}},
        "clients": {"count": 2, "compute_flops": 12,
                    "link": {"latency_s": 0.05, "bandwidth_Bps": 2}},
        "failures": {"outages": [{"node": "edge1", "start_s": 4.0, "end_s": 6.0}]},
    })
    # timeline: cloud->edge 1.1, edge->client 3.15, compute 2 s -> 5.15, upload 5.15..7.2
    # client1's upload overlaps edge1's outage [4, 6]: lost.
    res, w = _run(tmp_path, doc)
    row = res.rows[-1]
    assert (row["selected"], row["reported"], row["failed"]) == (2, 1, 1)
    got = sorted((round(t, 9), n, k, p) for t, n, k, p, _ in res.trace.events)
    assert got == sorted([
        (0.0, "cloud", "round_start", ""), (0.0, "cloud", "send", "edge0"),
        (0.0, "cloud", "send", "edge1"), (1.1, "edge0", "recv", "cloud"),
        (1.1, "edge1", "recv", "cloud"), (1.1, "edge0", "send", "client0"),
        (1.1, "edge1", "send", "client1"), (3.15, "client0", "recv", "edge0"),
        (3.15, "client1", "recv", "edge1"), (3.15, "client0", "compute_start", ""),
        (3.15, "client1", "compute_start", ""), (5.15, "client0", "compute_end", ""),
        (5.15, "client1", "compute_end", ""), (5.15, "client0", "send", "edge0"),
        (5.15, "client1", "send", "edge1"), (7.2, "edge0", "recv", "client0"),
        (7.2, "edge1", "lost", "client1"),                 # 5.15..7.2 overlaps [4, 6]
        (7.2, "edge0", "send", "cloud"), (8.3, "cloud", "recv", "edge0"),
        (8.3, "cloud", "aggregate", ""), (8.3, "cloud", "round_end", ""),
    ])
    v, x, y = 0.0, np.array([1.0, 2.0]), np.array([1.0, 2.0])
    for _ in range(2):
        v -= 0.1 * np.mean(2 * (v * x - y) * x)
    assert w[0] == pytest.approx(v, abs=1e-6)
    assert row["bytes_wasted"] == 4.0


def test_markov_availability_matches_stationary_probability():
    from types import SimpleNamespace
    spec = SimpleNamespace(availability=AvailabilitySpec(kind="markov", mean_on_s=3.0,
                                                         mean_off_s=1.0),
                           failures=FailureSpec())
    f = Failures.from_spec(spec, seed=7)
    times = np.arange(0.0, 400.0, 0.5)
    frac = np.mean([[f.client_up(k, t) for t in times] for k in range(60)])
    assert frac == pytest.approx(0.75, abs=0.03)
    # the same seed gives the same on/off history
    g = Failures.from_spec(spec, seed=7)
    assert [g.client_up(3, t) for t in times[:50]] == [f.client_up(3, t) for t in times[:50]]


def test_bernoulli_availability_limits_selection(tmp_path):
    doc = _deep_doc(tmp_path)
    doc["topology"] = {"edges": {"count": 2},
                       "clients": {"count": 40, "compute_flops": 1e6},
                       "availability": {"kind": "bernoulli", "p": 0.5}}
    doc["data"] = {"name": "synthetic", "samples": 20}
    doc["model"] = {"name": "logreg"}
    doc["train"].update(rounds=30, clients_per_round="all")
    res, _ = _run(tmp_path, doc)
    sel = [r["selected"] for r in res.rows[1:]]
    assert 0.4 * 40 < np.mean(sel) < 0.6 * 40
    assert len(set(sel)) > 1


def test_graph_file_topology_equals_the_yaml_declaration(tmp_path):
    """The same tree as node-link JSON (and as a DiGraph passed in) simulates identically."""
    import json

    import networkx as nx

    from hierfl.run import run_scenario
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph

    doc = _deep_doc(tmp_path)
    doc["train"]["rounds"] = 2
    yaml_path = make_scenario(tmp_path, doc, name="yaml")
    sc = load(yaml_path, out=str(tmp_path / "a"))
    g = build_graph(sc.topology, sc.seed)
    (tmp_path / "net.json").write_text(json.dumps(nx.node_link_data(g, edges="links")))
    doc["topology"] = {"graph": "net.json"}
    json_path = make_scenario(tmp_path, doc, name="json")
    ra = run_outputs(yaml_path, out=tmp_path / "a")
    rb = run_outputs(json_path, out=tmp_path / "b")
    (ra, wa), (rb, wb) = [(o.results["fedavg"], o.final("fedavg")) for o in (ra, rb)]
    assert ra.trace.events == rb.trace.events
    np.testing.assert_array_equal(wa, wb)
    sc2 = load(yaml_path, out=str(tmp_path / "c"))
    rc = run_scenario(sc2, progress=False, graph=g)["fedavg"]
    assert rc.trace.events == ra.trace.events


def test_topology_command_prints_tiers_and_draws(tmp_path, capsys):
    import matplotlib.image as mpimg

    from hierfl.cli import main

    png = tmp_path / "t.png"
    import os
    topo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "topologies", "iot_regional.yaml")
    assert main(["topology", topo, "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "tier 1: 2 aggregators (regional)" in out
    assert "tier 2: 8 aggregators (gateway)" in out
    assert "tier 3: 64 clients (client)" in out
    assert "clients per bottom aggregator: 8" in out
    img = mpimg.imread(str(png))
    assert img.shape[0] > 200 and img.shape[1] > 200 and img.std() > 0.01
