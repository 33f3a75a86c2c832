"""The engine's whole event trace on a hand-worked system, and a fingerprint of the shipped
quickstart's traces (a timing change must be a reviewed change).

System: 1 cloud, 2 edges, clients 0,1 under edge0 and 2,3 under edge1; every client computes at
9 FLOP/s; client<->edge links: latency 0.5 s, 8 B/s; edge<->cloud links: latency 0.25 s, 4 B/s.
Model: `linear` with one input, one output and a bias: P = 2 float32 parameters, so every model
message is 2 x 4 = 8 bytes, and the forward pass costs 2*1*1 + 1 = 3 FLOPs per sample.
Local work: one full-batch step, so client k processes n_k samples, costing n_k x 3 (forward +
backward) x 3 FLOPs = 9 n_k FLOPs, i.e. n_k seconds at 9 FLOP/s. n = (3, 4, 6, 9).

A transfer holds its link (FIFO) for bytes/bandwidth, then propagates for the latency while the
link is already free:  8 B on a client link: 1 s + 0.5 s = 1.5 s;  8 B on an edge link: 2 s +
0.25 s = 2.25 s.  Events at the same instant appear in the order simpy processes them: edge 0
before edge 1, clients by index, and a process's own events in program order.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from conftest import TraceBuilder, assert_trace
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load

N = (3, 4, 6, 9)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _scenario(tmp_path, local: dict | None = None) -> str:
    g = np.random.default_rng(7)
    arrays = {}
    for k, n in enumerate(N):
        arrays[f"x_{k}"] = g.normal(size=(n, 1))
        arrays[f"y_{k}"] = g.normal(size=n)
        arrays[f"x_test_{k}"] = g.normal(size=(1, 1))
        arrays[f"y_test_{k}"] = g.normal(size=1)
    np.savez(tmp_path / "clients.npz", **arrays)
    doc = {
        "name": "trace",
        "seed": 0,
        "topology": {
            "cloud": {},
            "edges": {"count": 2, "link": {"latency_s": 0.25, "bandwidth_Bps": 4.0}},
            "clients": {"count": 4, "assignment": [[0, 1], [2, 3]], "compute_flops": 9.0,
                        "link": {"latency_s": 0.5, "bandwidth_Bps": 8.0}},
        },
        "data": {"name": "npz", "path": "clients.npz"},
        "model": {"name": "linear"},
        "train": {"rounds": 1, "clients_per_round": "all",
                  "local": local or {"steps": 1, "batch_size": "full", "lr": 0.1}},
        "algorithms": [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}],
        "output": "out",
    }
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace")
    sc = load(_scenario(tmp))
    world = build_world(sc)
    assert world.model.n_params == 2 and world.model.fwd_flops == 3.0
    return {e.label: run_algorithm(sc, e, world, str(tmp / e.label), progress=False)
            for e in sc.algorithms}


_T = TraceBuilder(8)             # the trace events of one 8-byte model
S, R = _T.send, _T.recv
CS, CE = _T.compute_start, _T.compute_end


# FedAvg: the edges relay; every upload crosses client->edge and then edge->cloud.
FEDAVG = [
    (0.0, "cloud", "round_start", "", 1),
    S(0.0, "cloud", "edge0"), S(0.0, "cloud", "edge1"),
    R(2.25, "edge0", "cloud"), R(2.25, "edge1", "cloud"),           # 8/4 + 0.25
    S(2.25, "edge0", "client0"), S(2.25, "edge0", "client1"),
    S(2.25, "edge1", "client2"), S(2.25, "edge1", "client3"),
    R(3.75, "client0", "edge0"), R(3.75, "client1", "edge0"),       # 2.25 + 8/8 + 0.5
    R(3.75, "client2", "edge1"), R(3.75, "client3", "edge1"),
    CS(3.75, "client0"), CS(3.75, "client1"), CS(3.75, "client2"), CS(3.75, "client3"),
    CE(6.75, "client0"), S(6.75, "client0", "edge0"),               # 3.75 + 3
    CE(7.75, "client1"), S(7.75, "client1", "edge0"),               # 3.75 + 4
    R(8.25, "edge0", "client0"), S(8.25, "edge0", "cloud"),         # 6.75 + 1.5; relay: link free
    R(9.25, "edge0", "client1"),                                    # 7.75 + 1.5; relay QUEUES:
    CE(9.75, "client2"), S(9.75, "client2", "edge1"),               # 3.75 + 6
    S(10.25, "edge0", "cloud"),                                     # edge0->cloud busy 8.25..10.25
    R(10.5, "cloud", "edge0"),                                      # client0's: 8.25 + 2 + 0.25
    R(11.25, "edge1", "client2"), S(11.25, "edge1", "cloud"),       # 9.75 + 1.5
    R(12.5, "cloud", "edge0"),                                      # client1's: 10.25 + 2.25
    CE(12.75, "client3"), S(12.75, "client3", "edge1"),             # 3.75 + 9
    R(13.5, "cloud", "edge1"),                                      # client2's: 11.25 + 2.25
    R(14.25, "edge1", "client3"), S(14.25, "edge1", "cloud"),       # 12.75 + 1.5
    R(16.5, "cloud", "edge1"),                                      # client3's: 14.25 + 2.25
    (16.5, "cloud", "aggregate", "", 4),
    (16.5, "cloud", "round_end", "", 1),
]

# HierFAVG, kappa2 = 2: each edge runs two edge rounds with its own clients, then uploads once.
HIERFAVG = [
    (0.0, "cloud", "round_start", "", 1),
    S(0.0, "cloud", "edge0"), S(0.0, "cloud", "edge1"),
    R(2.25, "edge0", "cloud"), R(2.25, "edge1", "cloud"),
    S(2.25, "edge0", "client0"), S(2.25, "edge0", "client1"),       # edge round 0 of both edges
    S(2.25, "edge1", "client2"), S(2.25, "edge1", "client3"),
    R(3.75, "client0", "edge0"), R(3.75, "client1", "edge0"),
    R(3.75, "client2", "edge1"), R(3.75, "client3", "edge1"),
    CS(3.75, "client0"), CS(3.75, "client1"), CS(3.75, "client2"), CS(3.75, "client3"),
    CE(6.75, "client0"), S(6.75, "client0", "edge0"),
    CE(7.75, "client1"), S(7.75, "client1", "edge0"),
    R(8.25, "edge0", "client0"),
    R(9.25, "edge0", "client1"),                                    # edge0 has both: aggregate
    (9.25, "edge0", "aggregate", "", 2),
    S(9.25, "edge0", "client0"), S(9.25, "edge0", "client1"),       # edge0, edge round 1
    CE(9.75, "client2"), S(9.75, "client2", "edge1"),
    R(10.75, "client0", "edge0"), R(10.75, "client1", "edge0"),     # 9.25 + 1.5
    CS(10.75, "client0"), CS(10.75, "client1"),
    R(11.25, "edge1", "client2"),
    CE(12.75, "client3"), S(12.75, "client3", "edge1"),
    CE(13.75, "client0"), S(13.75, "client0", "edge0"),             # 10.75 + 3
    R(14.25, "edge1", "client3"),                                   # edge1 has both: aggregate
    (14.25, "edge1", "aggregate", "", 2),
    S(14.25, "edge1", "client2"), S(14.25, "edge1", "client3"),     # edge1, edge round 1
    CE(14.75, "client1"), S(14.75, "client1", "edge0"),             # 10.75 + 4
    R(15.25, "edge0", "client0"),
    R(15.75, "client2", "edge1"), R(15.75, "client3", "edge1"),     # 14.25 + 1.5
    CS(15.75, "client2"), CS(15.75, "client3"),
    R(16.25, "edge0", "client1"),
    (16.25, "edge0", "aggregate", "", 2),
    S(16.25, "edge0", "cloud"),                                     # edge0's one upload
    R(18.5, "cloud", "edge0"),                                      # 16.25 + 2 + 0.25
    CE(21.75, "client2"), S(21.75, "client2", "edge1"),             # 15.75 + 6
    R(23.25, "edge1", "client2"),
    CE(24.75, "client3"), S(24.75, "client3", "edge1"),             # 15.75 + 9
    R(26.25, "edge1", "client3"),
    (26.25, "edge1", "aggregate", "", 2),
    S(26.25, "edge1", "cloud"),
    R(28.5, "cloud", "edge1"),                                      # 26.25 + 2.25
    (28.5, "cloud", "aggregate", "", 2),                            # two edge models
    (28.5, "cloud", "round_end", "", 1),
]


def test_fedavg_round_trace(results):
    assert_trace(results["fedavg"].trace.events, FEDAVG)


def test_hierfavg_cloud_round_trace(results):
    assert_trace(results["hierfavg"].trace.events, HIERFAVG)


def test_ledger_and_clock_of_the_round(results):
    # FedAvg: client<->edge 4 down + 4 up; edge<->cloud 2 down + 4 relayed up (8 B each).
    row = results["fedavg"].rows[-1]
    assert row["sim_time_s"] == pytest.approx(16.5)
    assert (row["bytes_client_edge"], row["bytes_edge_cloud"]) == (64.0, 48.0)
    assert (row["bytes_up"], row["bytes_down"]) == (64.0, 48.0)
    # HierFAVG: client<->edge 2 edge rounds x (4 down + 4 up); edge<->cloud 2 down + 2 up.
    row = results["hierfavg"].rows[-1]
    assert row["sim_time_s"] == pytest.approx(28.5)
    assert (row["bytes_client_edge"], row["bytes_edge_cloud"]) == (128.0, 32.0)


def test_minibatch_compute_time_counts_the_rows_processed(tmp_path):
    """batch_size 2, 3 steps, epoch-wise batches (the last batch of an epoch may be short):
    n=3: batches 2,1 | 2 -> 5 rows; n=4: 2,2 | 2 -> 6; n=6: 2,2,2 -> 6; n=9: 2,2,2 -> 6.
    At 9 FLOPs per row (3 x 3) and 9 FLOP/s, compute takes `rows` seconds."""
    sc = load(_scenario(tmp_path, {"steps": 3, "batch_size": 2, "lr": 0.1}))
    world = build_world(sc)
    res = run_algorithm(sc, sc.algorithms[0], world, str(tmp_path / "fedavg"), progress=False)
    start = {n: t for t, n, k, _, _ in res.trace.events if k == "compute_start"}
    end = {n: t for t, n, k, _, v in res.trace.events if k == "compute_end"}
    got = [end[f"client{k}"] - start[f"client{k}"] for k in range(4)]
    assert got == pytest.approx([5.0, 6.0, 6.0, 6.0], abs=1e-9)
    assert all(v == 3 for _, _, k, _, v in res.trace.events if k == "compute_start")


# Fingerprints of scenarios/quickstart.yaml with --rounds 3. A change here means the simulated
# timing changed: review it, then update the literal.
QUICKSTART_FINGERPRINTS = {"fedavg": "f06893c03ca47c76", "hierfavg": "1421f4e8df31f60f"}


def test_quickstart_trace_fingerprint(tmp_path):
    sc = load(os.path.join(REPO, "scenarios", "quickstart.yaml"), rounds=3,
                    out=str(tmp_path))
    world = build_world(sc)
    got = {e.label: run_algorithm(sc, e, world, str(tmp_path / e.label),
                                  progress=False).trace.fingerprint()
           for e in sc.algorithms}
    assert got == QUICKSTART_FINGERPRINTS
