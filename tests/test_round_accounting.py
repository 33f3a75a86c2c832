"""Who a round expects, who arrived, who was late, and where their rows and bytes go, in the
cases a reader found wrong: edge pre-aggregation (a lost download to an edge, deadlines, a lost
partial sum, first_k), late aggregator uploads (bytes_wasted) and edge rounds that close after
their cloud round was written (clients.csv rows). Each test fails on the code before its fix."""
from __future__ import annotations

import csv
from collections import Counter

import pytest
import yaml

from hierfl.config.errors import ScenarioError
from hierfl.run import run_scenario
from hierfl.scenario.load import load

CLIENT_LINK = {"latency_s": {"dist": "uniform", "low": 0.01, "high": 0.1},
               "bandwidth_Bps": 2.5e6}


def _doc(tmp_path, algorithms, train=None, failures=None, rounds=3):
    clients = {"count": 12, "assignment": "round_robin",
               "compute_flops": {"dist": "lognormal", "median": 1e7, "sigma": 0.5},
               "link": CLIENT_LINK}
    topo = {"edges": {"count": 3, "link": {"latency_s": 0.05, "bandwidth_Bps": 1.25e8}},
            "clients": clients, **({"failures": failures} if failures else {})}
    return {"name": "acct2", "seed": 0, "topology": topo,
            "data": {"name": "synthetic", "alpha": 1.0, "beta": 1.0, "test_fraction": 0.2},
            "model": {"name": "logreg"},
            "train": {"rounds": rounds, "clients_per_round": 9,
                      "local": {"steps": 10, "batch_size": 10, "lr": 0.01}, **(train or {})},
            "algorithms": algorithms, "output": str(tmp_path / "out")}


def _run(tmp_path, doc, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    run_scenario(load(str(path), out=str(tmp_path / name.replace(".yaml", ""))),
                 progress=False)
    return tmp_path / name.replace(".yaml", "")


def _read(folder, label, what):
    return list(csv.DictReader(open(folder / label / f"{what}.csv", newline="")))


def test_preaggregation_lost_edge_download_fails_that_edge_once(tmp_path):
    """edge1 is down when the cloud's model reaches it: its 3 clients fail, and the wait_all
    round still waits for the other two edges' partial sums (it closed at once: 0 of 9)."""
    doc = _doc(tmp_path, [{"name": "fedavg"}], train={"edge_preaggregate": True},
               failures={"outages": [{"node": "edge1", "start_s": 0.0, "end_s": 0.01}]})
    out = _run(tmp_path, doc)
    first = _read(out, "fedavg", "metrics")[1]
    rows = [r for r in _read(out, "fedavg", "clients") if r["round"] == "1"]
    assert (first["selected"], first["reported"], first["failed"]) == ("9", "6", "3")
    assert sorted(r["failed"] for r in rows) == ["0"] * 6 + ["1"] * 3
    assert all(r["dropped"] == "0" for r in rows if r["failed"] == "0")
    trace = _read(out, "fedavg", "trace")
    end = next(float(e["time_s"]) for e in trace if e["kind"] == "round_end")
    partials = [float(e["time_s"]) for e in trace
                if e["node"] == "cloud" and e["kind"] == "recv" and float(e["time_s"]) <= end]
    assert len(partials) == 2             # both healthy edges' sums arrived in the round


def test_preaggregation_under_a_deadline_keeps_what_relaying_keeps(tmp_path):
    """Pre-aggregating edges close early enough for their sum to reach the cloud by the
    deadline (they closed at the deadline itself: every sum arrived late)."""
    train = {"round": {"policy": "deadline_partial", "deadline_s": 0.25}}
    relay = _run(tmp_path, _doc(tmp_path, [{"name": "fedavg"}], train=dict(train)), "r.yaml")
    pre = _run(tmp_path, _doc(tmp_path, [{"name": "fedavg"}],
                              train={**train, "edge_preaggregate": True}), "p.yaml")
    got = [r["reported"] for r in _read(pre, "fedavg", "metrics")[1:]]
    assert got == [r["reported"] for r in _read(relay, "fedavg", "metrics")[1:]]
    assert all(int(n) > 0 for n in got)


def test_preaggregation_with_first_k_is_refused(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}],
               train={"edge_preaggregate": True, "round": {"policy": "first_k", "k": 3}})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as err:
        load(str(path))
    assert "train.round.policy = 'first_k'" in str(err.value)
    assert "edge_preaggregate" in str(err.value)


def test_lost_partial_sum_fails_its_clients(tmp_path):
    """The edge1 -> cloud link is down while edge1's partial sum crosses it: its clients'
    updates are lost (failed), as a relayed upload's would be."""
    doc = _doc(tmp_path, [{"name": "fedavg"}], train={"edge_preaggregate": True}, rounds=2,
               failures={"outages": [{"link": ["edge1", "cloud"], "start_s": 0.2,
                                      "end_s": 0.3}]})
    out = _run(tmp_path, doc)
    trace = _read(out, "fedavg", "trace")
    assert any(e["kind"] == "lost" and e["node"] == "cloud" for e in trace)
    first = _read(out, "fedavg", "metrics")[1]
    rows = [r for r in _read(out, "fedavg", "clients") if r["round"] == "1"]
    lost = [r for r in rows if r["dropped"] == "1"]
    assert lost and all(r["failed"] == "1" for r in lost)
    assert int(first["failed"]) == len(lost)


def test_late_aggregator_uploads_are_wasted_bytes(tmp_path):
    """HierFAVG under a cloud deadline: every edge upload that reaches the cloud after its
    round ended is counted in bytes_wasted (they were not counted at all)."""
    doc = _doc(tmp_path, [{"name": "hierfavg", "edge_rounds": 2}], rounds=4,
               train={"round": {"policy": "deadline_drop", "deadline_s": 0.5}},
               failures={"crash_p": 0.1})
    out = _run(tmp_path, doc)
    trace = _read(out, "hierfavg", "trace")
    ups = [float(e["value"]) for e in trace if e["node"] == "cloud" and e["kind"] == "recv"]
    used = sum(int(float(e["value"])) for e in trace
               if e["node"] == "cloud" and e["kind"] == "aggregate")     # edges aggregated
    assert len(set(ups)) == 1 and len(ups) > used                       # some came late
    wasted = float(_read(out, "hierfavg", "metrics")[-1]["bytes_wasted"])
    assert wasted == (len(ups) - used) * ups[0]


def test_edge_rounds_closing_after_their_cloud_round_keep_their_rows(tmp_path):
    """pFedMac-SH with one reporting edge a round: the others' edge rounds run on past the
    cloud round's end. Every client update an edge aggregated has its clients.csv row (rows
    of late edge rounds were added to a round already written, and lost)."""
    doc = _doc(tmp_path, [{"name": "pfedmac_sh", "edge_rounds": 2, "edges_per_round": 1}],
               rounds=4)
    doc["train"]["clients_per_round"] = 12
    doc["stragglers"] = {"fraction": 0.5}
    out = _run(tmp_path, doc)
    trace = _read(out, "pfedmac_sh", "trace")
    aggregated = sum(int(float(e["value"])) for e in trace
                     if e["kind"] == "aggregate" and e["node"] != "cloud")
    rows = _read(out, "pfedmac_sh", "clients")
    assert sum(r["dropped"] == "0" and r["failed"] == "0" for r in rows) == aggregated
    per_round = Counter(r["round"] for r in rows)
    assert [per_round[str(t)] for t in (1, 2, 3)] == [24, 24, 24]   # 12 clients x 2 edge rounds
    # a round's batch of rows: its own (on time), then earlier rounds' late ones; the metrics
    # row's stragglers count its own alone (they counted the late ones too)
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(r["round"], i)
    late = 0
    for m in _read(out, "pfedmac_sh", "metrics")[1:]:
        t = m["round"]
        end = first.get(str(int(t) + 1), len(rows))
        own = [r for r in rows[first[t]:end] if r["round"] == t]
        late += sum(r["round"] != t for r in rows[first[t]:end])
        assert int(m["stragglers"]) == sum(r["straggler"] == "1" for r in own), t
    assert late > 0


def _sums(trace, size):
    """Per cloud round: the partial sums its edges made (aggregate events with clients) and the
    sums of that size the cloud received before the round's end."""
    made, got, r, open_ = Counter(), Counter(), 0, False
    for e in trace:
        if e["node"] == "cloud" and e["kind"] in ("round_start", "round_end"):
            r, open_ = int(float(e["value"])), e["kind"] == "round_start"
        elif open_ and e["kind"] == "aggregate" and e["node"].startswith("edge") and \
                float(e["value"]) > 0:
            made[r] += 1
        elif open_ and e["node"] == "cloud" and e["kind"] == "recv" and \
                float(e["value"]) == size:
            got[r] += 1
    return made, got


SUM = 610 * 4 + 4          # logreg 60 -> 10: the sums and their total weight


def test_preaggregation_under_a_timeout_closes_edges_early_enough(tmp_path):
    """wait_all with timeout_s limits the cloud's wait as a deadline does: pre-aggregating
    edges closed at the cloud's own limit, so every sum they sent then was late (0 reported)."""
    doc = _doc(tmp_path, [{"name": "fedavg"}], train={
        "edge_preaggregate": True, "round": {"policy": "wait_all", "timeout_s": 0.25}})
    out = _run(tmp_path, doc)
    made, got = _sums(_read(out, "fedavg", "trace"), SUM)
    assert made == got and sum(got.values()) > 0
    assert all(int(r["reported"]) > 0 for r in _read(out, "fedavg", "metrics")[1:])


def test_preaggregation_deadline_counts_sums_sharing_an_upper_link(tmp_path):
    """Four edges under one slow regional link: their sums queue on it. Each edge closes early
    enough for the sums sent with it (one of them arrived after the deadline, its clients'
    work wasted, when each edge counted only its own sum)."""
    doc = _doc(tmp_path, [{"name": "fedavg"}], rounds=3, train={
        "edge_preaggregate": True, "clients_per_round": "all",
        "round": {"policy": "deadline_partial", "deadline_s": 2.0}})
    doc["topology"] = {
        "tiers": [{"name": "regional", "count": 1, "link": {"latency_s": 0.01,
                                                              "bandwidth_Bps": 2e4}},
                  {"name": "edge", "count": 4, "link": {"latency_s": 0.01,
                                                          "bandwidth_Bps": 1.25e8}}],
        "clients": {"count": 16, "link": {"latency_s": 0.01, "bandwidth_Bps": 2.5e6},
                    "compute_flops": {"dist": "lognormal", "median": 3e4, "sigma": 1.0}}}
    out = _run(tmp_path, doc)
    made, got = _sums(_read(out, "fedavg", "trace"), SUM)
    assert made == got and sum(got.values()) >= 3 * 3
