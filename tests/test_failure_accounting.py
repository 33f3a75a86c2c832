"""Failure accounting at every tier, for every registered algorithm: metrics.csv's
selected/reported/failed and clients.csv's failed/dropped agree with the events of trace.csv
(crashes, outages, deadlines), flat and hierarchical alike."""
from __future__ import annotations

import csv
from collections import Counter, defaultdict

import pytest
import yaml

from hierfl.algorithms.registry import REGISTRY
from hierfl.run import run_scenario
from hierfl.scenario.load import load


def _scenario(tmp_path, name, failures, train=None, edge_rounds=1, slow=False):
    flops = {"dist": "uniform", "low": 2e2, "high": 4e3} if slow else 1e7
    topo = {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
            "clients": {"count": 6, "compute_flops": flops,
                        "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}},
            "failures": failures}
    entry = {"name": name}
    if REGISTRY[name].hierarchical:
        entry["edge_rounds"] = edge_rounds
    doc = {"name": "acct", "seed": 5, "topology": topo,
           "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 40},
                    "dim": 8, "classes": 3},
           "model": {"name": "logreg"},
           "train": {"rounds": 6, "clients_per_round": "all",
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.05}, **(train or {})},
           "algorithms": [entry], "output": str(tmp_path / "out")}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    run_scenario(load(str(path)), progress=False)
    d = tmp_path / "out" / name
    read = lambda f: list(csv.DictReader(open(d / f, newline="")))  # noqa: E731
    return read("metrics.csv")[1:], read("clients.csv"), read("trace.csv")


def _client(node: str) -> bool:
    return node.startswith("client")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_client_crashes(tmp_path, name):
    """crash_p 1: nobody reports, every selected client failed, nothing is uploaded and no
    gamma is claimed; one crash per compute_start."""
    rows, clients, trace = _scenario(tmp_path, name, {"crash_p": 1.0}, edge_rounds=2)
    kinds = Counter(e["kind"] for e in trace)
    assert kinds["crash"] == kinds["compute_start"] > 0
    assert kinds["compute_end"] == 0
    for r in rows:
        assert (int(r["selected"]), int(r["reported"]), int(r["failed"])) == (6, 0, 6), r
        assert float(r["bytes_up"]) == 0.0 and r["mean_gamma"] == ""
    assert clients and all(c["failed"] == "1" and c["dropped"] == "1" for c in clients)
    assert all(c["gamma"] == "" for c in clients)
    # the cloud aggregates nobody: no edge reports an empty aggregate upward
    assert [int(float(e["value"])) for e in trace
            if e["node"] == "cloud" and e["kind"] == "aggregate"] == [0] * 6


def _rounds(trace):
    """The trace cut at every cloud round_start: round -> its events in order."""
    out, t = defaultdict(list), 0
    for e in trace:
        if e["node"] == "cloud" and e["kind"] == "round_start":
            t = int(float(e["value"]))
        out[t].append(e)
    return out


def _reported_from_trace(events, hierarchical):
    """Clients whose update is in the cloud's aggregate of a round, from its events alone."""
    agg = [i for i, e in enumerate(events) if e["node"] == "cloud" and e["kind"] == "aggregate"]
    assert len(agg) == 1
    if not hierarchical:
        return int(float(events[agg[0]]["value"]))
    edge_n = {e["node"]: int(float(e["value"])) for e in events
              if e["kind"] == "aggregate" and e["node"] != "cloud"}
    arrived = {e["peer"] for e in events[:agg[0]]
               if e["node"] == "cloud" and e["kind"] == "recv" and not _client(e["peer"])}
    assert int(float(events[agg[0]]["value"])) == len(arrived)
    return sum(edge_n[n] for n in arrived)


def _failure_events(events) -> int:
    """Crashes, offline clients and messages lost to or from a client."""
    return sum(1 for e in events if e["kind"] in ("crash", "offline")
               or (e["kind"] == "lost" and (_client(e["node"]) or _client(e["peer"]))))


OUTAGES = [{"link": ["client1", "edge1"], "start_s": 0.0, "end_s": 6.0},
           {"node": "client4", "start_s": 3.0, "end_s": 9.0}]


def _check_rounds(rows, clients, trace, hier, exact_failures):
    """Per round: selected = reported + failed; reported as the trace's aggregates say; the
    clients.csv rows agree (failed rows are dropped). exact_failures True (wait_all): every
    failure of the round is one failure event of its trace and metrics' failed counts exactly
    those; False (deadlines, no failures): the not-aggregated rows are the not reported; None:
    a late client may still fail after its round closed, only bounds hold."""
    by_round = _rounds(trace)
    per_round = defaultdict(list)
    for c in clients:
        per_round[int(c["round"])].append(c)
    for r in rows:
        t = int(r["round"])
        sel, rep, fail = int(r["selected"]), int(r["reported"]), int(r["failed"])
        recs = per_round[t]
        assert sel == 6 == len(recs) and sel == rep + fail, r
        assert rep == _reported_from_trace(by_round[t], hier), (t, r)
        used = [c for c in recs if c["dropped"] == "0"]
        assert all(c["failed"] == "0" for c in used)
        assert all(c["dropped"] == "1" and c["gamma"] == "" for c in recs if c["failed"] == "1")
        n_failed = sum(c["failed"] == "1" for c in recs)
        assert n_failed <= fail
        if exact_failures:             # no deadline: not reported = failed
            assert n_failed == fail == _failure_events(by_round[t]), (t, r)
        if exact_failures is not None:
            assert len(used) == rep
        if r["mean_gamma"]:                 # a mean over the clients that finished only
            gam = [float(c["gamma"]) for c in recs if c["gamma"]]
            assert float(r["mean_gamma"]) == pytest.approx(sum(gam) / len(gam), rel=1e-12)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_crashes_and_outages_match_the_trace(tmp_path, name):
    """wait_all: a round closes once everyone arrived or failed, so every failure event lies in
    its round's stretch of the trace."""
    rows, clients, trace = _scenario(tmp_path, name, {"crash_p": 0.3, "outages": OUTAGES},
                                     slow=True)
    kinds = Counter(e["kind"] for e in trace)
    assert kinds["crash"] > 0 and kinds["lost"] > 0
    _check_rounds(rows, clients, trace, REGISTRY[name].hierarchical, exact_failures=True)
    assert sum(int(r["failed"]) for r in rows) == _failure_events(trace) > 0


def _deadlines(hier: bool) -> dict:
    policy = {"round": {"policy": "deadline_drop", "deadline_s": 8.0 if hier else 2.0}}
    if hier:
        policy["edge_round"] = {"policy": "deadline_drop", "deadline_s": 2.0}
    return policy


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_deadlines_drop_without_failing(tmp_path, name):
    hier = REGISTRY[name].hierarchical
    rows, clients, trace = _scenario(tmp_path, name, {}, train=_deadlines(hier), slow=True)
    _check_rounds(rows, clients, trace, hier, exact_failures=False)
    assert sum(int(r["failed"]) for r in rows) > 0
    assert _failure_events(trace) == 0
    assert not any(c["failed"] == "1" for c in clients)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_crashes_outages_and_deadlines_together(tmp_path, name):
    """A client may crash after its round closed without it: dropped by the deadline, and its
    late crash is no failure of that round."""
    hier = REGISTRY[name].hierarchical
    rows, clients, trace = _scenario(tmp_path, name, {"crash_p": 0.3, "outages": OUTAGES},
                                     train=_deadlines(hier), slow=True)
    _check_rounds(rows, clients, trace, hier, exact_failures=None)
    assert 0 < sum(c["failed"] == "1" for c in clients) <= _failure_events(trace)


@pytest.mark.parametrize("name", ["fedavg", "hierfavg"])
def test_dropped_straggler_crash_does_not_close_the_round(tmp_path, name):
    """FedAvg drops stragglers: a round expects only the others. A dropped straggler that
    crashes (or loses its download) must not count towards closing a wait_all round, or the
    round ends before healthy clients arrive and their updates are wasted (seen by a reader:
    rounds closed at a dropped straggler's crash, reported < healthy)."""
    topo = {"edges": {"count": 2, "link": {"latency_s": 0.05, "bandwidth_Bps": 1e5}},
            "clients": {"count": 8, "compute_flops": {"dist": "lognormal", "median": 1e6,
                                                      "sigma": 1.0},
                        "link": {"latency_s": 0.01, "uplink_Bps": 1000.0,
                                 "downlink_Bps": 2000.0}},
            "failures": {"crash_p": 0.4}}
    doc = {"name": "dropcrash", "seed": 1, "topology": topo,
           "data": {"name": "synthetic", "dim": 5, "classes": 3, "samples": 40},
           "model": {"name": "logreg"},
           "train": {"rounds": 6, "clients_per_round": "all",
                     "local": {"steps": 5, "batch_size": 10, "lr": 0.05}},
           "stragglers": {"fraction": 0.5, "drop": "always"},
           "algorithms": [{"name": name}], "output": str(tmp_path / "out")}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    run_scenario(load(str(path)), progress=False)
    d = tmp_path / "out" / name
    rows = list(csv.DictReader(open(d / "metrics.csv", newline="")))[1:]
    clients = list(csv.DictReader(open(d / "clients.csv", newline="")))
    crashed_dropped = 0
    for r in rows:
        mine = [c for c in clients if c["round"] == r["round"]]
        healthy = [c for c in mine if c["straggler"] == "0" and c["failed"] == "0"]
        crashed_dropped += sum(c["straggler"] == "1" and c["failed"] == "1" for c in mine)
        assert int(r["reported"]) == len(healthy), (r["round"], r["reported"], len(healthy))
        assert all(c["dropped"] == "0" for c in healthy)
        assert float(r["bytes_wasted"]) == 0.0
    assert crashed_dropped >= 3          # the case is exercised


def test_a_crashed_client_leaves_its_state_as_it_was(tmp_path):
    """Every selected client crashes (crash_p 1): nothing reaches the server, and the clients'
    own state must not move either. Their training was applied to their personal models
    before the crash was decided (Ditto's personal accuracy rose 0.385 -> 0.672 in a reader's
    run), and to any client table alike (test_algorithms_unit: every algorithm's)."""
    import numpy as np
    from conftest import make_scenario, run_outputs
    algos = [{"name": "ditto", "lam": 0.5}, {"name": "apfl", "alpha": 0.5},
             {"name": "pfedme", "lam": 5.0, "personal_lr": 0.05},
             {"name": "pfedmac_sh", "lambda1": 0.1, "inner_lr": 0.05}]
    path = make_scenario(tmp_path, algorithms=algos, **{
        "train.rounds": 3, "train.clients_per_round": "all",
        "topology.failures": {"crash_p": 1.0}})
    out = run_outputs(path)
    for a in ("ditto", "apfl", "pfedme", "pfedmac_sh"):
        m = out.metrics[a]
        assert {r["personal_test_acc"] for r in m} == {m[0]["personal_test_acc"]}, a
        assert {int(r["reported"]) for r in m[1:]} == {0}
        w0 = out.params[a]["global"]
        for k in range(4):
            np.testing.assert_array_equal(out.params[a][f"client_{k}"], w0, err_msg=a)
