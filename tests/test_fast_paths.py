"""The speed paths against the plain ones: the same bytes.

Closed-form round timing (sim/closed_form.py) against the event loop.

Each scenario runs twice, `train.timing: auto` (closed form where a round allows it) and
`events` (every message through simpy); trace.csv, clients.csv and metrics.csv must be
byte-identical, and the closed form must actually have been used. The scenarios are built to
make the event loop's tie-breaking matter: identical devices and links (every client of an edge
asks for the shared uplink at the same instant) with uploads of different sizes (sparse
encodings), relays over three tiers, and rounds that must fall back to the event loop."""
from __future__ import annotations

import csv
import os

import pytest
import yaml

from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load


def _topology(constant: bool) -> dict:
    speed = 1e6 if constant else {"dist": "lognormal", "median": 1e6, "sigma": 0.6}
    lat = 0.02 if constant else {"dist": "uniform", "low": 0.01, "high": 0.1}
    return {"tiers": [{"name": "regional", "count": 2,
                       "link": {"latency_s": 0.03, "bandwidth_Bps": 2e4}},
                      {"name": "edge", "count": 4,
                       "link": {"latency_s": 0.01, "bandwidth_Bps": 5e3}}],
            "clients": {"count": 16, "compute_flops": speed,
                        "link": {"latency_s": lat, "bandwidth_Bps": 2e3}}}


def _doc(constant: bool, algorithms: list, **extra) -> dict:
    doc = {"name": "cf", "seed": 3, "topology": _topology(constant),
           "data": {"name": "synthetic", "dim": 5, "classes": 3, "samples": 20},
           "model": {"name": "logreg"},
           "train": {"rounds": 4, "clients_per_round": 10,
                     "local": {"epochs": 1, "batch_size": 5, "lr": 0.05}},
           "algorithms": algorithms}
    for key, value in extra.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    return doc


def _run_both(tmp_path, doc: dict):
    """{label: {timing: (files, closed_form_rounds)}}"""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = {}
    for timing in ("auto", "events"):
        doc["train"]["timing"] = timing
        path.write_text(yaml.safe_dump(doc))
        sc = load(str(path), out=str(tmp_path / timing))
        world = build_world(sc)
        for entry in sc.algorithms:
            folder = os.path.join(sc.output, entry.label)
            res = run_algorithm(sc, entry, world, folder, progress=False)
            files = {f: open(os.path.join(folder, f)).read()
                     for f in ("trace.csv", "clients.csv", "metrics.csv")}
            out.setdefault(entry.label, {})[timing] = (files, res.closed_form_rounds)
    return out


def _assert_same(out: dict, rounds: int, fallback: bool = False):
    for label, runs in out.items():
        fast, fast_rounds = runs["auto"]
        slow, slow_rounds = runs["events"]
        assert slow_rounds == 0
        assert 0 < fast_rounds <= rounds if not fallback else 0 < fast_rounds < rounds, label
        for name in fast:
            assert fast[name] == slow[name], f"{label}: {name} differs"


def test_ties_on_shared_links_are_broken_as_the_event_loop_does(tmp_path):
    """Identical devices: every client of an edge finishes at the same instant and its upload
    queues on the edge's uplink behind the others, in the event loop's order (a wrong order
    gives the same trace times but another client each upload_s in clients.csv)."""
    doc = _doc(True, [{"name": "fedavg"}, {"name": "scaffold"}])
    out = _run_both(tmp_path, doc)
    _assert_same(out, 4)
    trace = out["fedavg"]["auto"][0]["trace.csv"].splitlines()
    times = [float(line.split(",")[0]) for line in trace[1:]]
    assert len(times) - len(set(times)) > 50                       # many simultaneous events


def test_heterogeneous_devices_stragglers_and_availability(tmp_path):
    doc = _doc(False, [{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}],
               stragglers={"fraction": 0.5})
    doc["topology"]["availability"] = {"kind": "bernoulli", "p": 0.8}
    doc["train"]["clients_per_round"] = "all"
    _assert_same(_run_both(tmp_path, doc), 4)


def test_events_after_a_round_spill_into_the_event_loop(tmp_path):
    """pFedMe's published-code variant trains every client but only the sampled ones upload;
    a silent trainee on a slow link may still be downloading (or computing) when the round
    closes: its events become simpy events at their exact times (each created when the
    event before it in the chain is processed), and the next round, with them in flight, is
    played by the event loop (the other rounds are not)."""
    doc = _doc(False, [{"name": "pfedme", "train_all_clients": True}])
    doc["train"]["clients_per_round"] = 8
    doc["train"]["rounds"] = 6
    doc["topology"]["clients"]["link"]["bandwidth_Bps"] = {"dist": "lognormal", "median": 2e3,
                                                           "sigma": 2.5}
    out = _run_both(tmp_path, doc)
    _assert_same(out, 6, fallback=True)                 # 4 of the 6 rounds here
    ended, sent, across = 0, {}, 0                      # downloads that outlive their round
    for line in out["pfedme"]["auto"][0]["trace.csv"].splitlines()[1:]:
        _, node, kind, peer, _ = line.split(",")
        ended += kind == "round_end"
        if kind == "send" and peer.startswith("client"):
            sent[peer] = ended
        elif kind == "recv" and node.startswith("client") and sent[node] < ended:
            across += 1
    assert across > 0


def _late_lines(files: dict, node_prefix: str, kind: str) -> int:
    """Trace lines of `kind` (recv or compute_end) at nodes named node_prefix* written after the
    round their message belongs to had closed (its round_end). A message's round: the cloud's
    sends are of the current round; a node forwards (or computes on) the round of the last
    message it received; links are FIFO."""
    from collections import defaultdict, deque

    started = ended = late = 0
    queue: dict = defaultdict(deque)
    last: dict = {}
    for line in files["trace.csv"].splitlines()[1:]:
        _, node, k, peer, _ = line.split(",")
        started += k == "round_start"
        ended += k == "round_end"
        if k == "send":
            queue[node, peer].append(started if node == "cloud" else last[node])
        elif k == "recv":
            last[node] = queue[peer, node].popleft()
        if k == kind and node.startswith(node_prefix):
            late += ended >= last[node]
    return late


def test_broadcasts_that_outlive_their_round(tmp_path):
    """A slow regional link: the broadcast reaches an edge after the round closed (silent
    pFedMe trainees). The edge's sends start processes (URGENT events) that must come right
    after its recv, created when it is processed. Found by a second reader's fuzzing."""
    doc = _doc(True, [{"name": "pfedme", "train_all_clients": True}])
    doc["seed"] = 2
    doc["topology"]["tiers"][0]["link"]["latency_s"] = {"dist": "choice",
                                                        "choices": [0.01, 1.0]}
    doc["topology"]["clients"]["count"] = 8
    doc["train"].update(rounds=3, clients_per_round=1)
    out = _run_both(tmp_path, doc)
    _assert_same(out, 3, fallback=True)
    assert _late_lines(out["pfedme"]["auto"][0], "edge", "recv") > 0


@pytest.mark.parametrize("seed, per_round", [(2, 2), (3, 4)])
def test_late_broadcast_sees_its_own_round(tmp_path, seed, per_round):
    """A dropped straggler's broadcast reaching its edge after the round closed must forward
    to the clients of its own round, not of the next one (each round's processes keep their
    own active subtree; the event loop used to read the next round's and send to other
    clients, or fail with a KeyError)."""
    doc = _doc(True, [{"name": "fedavg"}], stragglers={"fraction": 0.5})
    doc["seed"] = seed
    doc["topology"] = {"edges": {"count": 4, "link": {"latency_s": 0.01, "bandwidth_Bps": {
                           "dist": "choice", "choices": [5.0, 1e5]}}},
                       "clients": {"count": 16, "compute_flops": 1e6,
                                   "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}}}
    doc["train"].update(rounds=6, clients_per_round=per_round)
    out = _run_both(tmp_path, doc)
    _assert_same(out, 6, fallback=True)
    assert _late_lines(out["fedavg"]["events"][0], "client", "compute_end") > 0


@pytest.mark.parametrize("algo, seed", [({"name": "hierfavg", "edge_rounds": 1}, 3),
                                        ({"name": "hierfavg", "tier_rounds": [2, 1]}, 5)])
def test_an_edge_whose_clients_are_all_dropped_sends_nothing_in_either_timing(tmp_path, algo,
                                                                              seed):
    """An aggregator whose clients are all dropped stragglers in every one of its rounds
    aggregates nothing and sends nothing (the event loop); the closed form assumed every
    child uploads and sent its unchanged model up. Such rounds now take the event loop. With
    tier_rounds [2, 1] an edge is called twice a cloud round (its rounds r = 0 and 1): each
    call must keep a client (a reader's case: only r = 0 was looked at)."""
    doc = _doc(True, [algo], stragglers={"fraction": 0.3})
    doc["seed"] = seed
    doc["train"].update(rounds=4, clients_per_round=6)
    out = _run_both(tmp_path, doc)
    _assert_same(out, 4, fallback=True)
    fast = out["hierfavg"]["auto"][0]["trace.csv"].splitlines()
    assert any(line.endswith(",aggregate,,0") and ",edge" in line for line in fast)


def test_hierarchical_rounds_with_ties_sparse_uploads_and_stragglers(tmp_path):
    """Aggregator rounds over three tiers computed in closed form (training called where the
    processes would call it): identical devices, pFedMac-SH's sparse uploads of different
    sizes, and HierFAVG dropping stragglers whose compute may outlast an edge round."""
    doc = _doc(True, [{"name": "hierfavg", "edge_rounds": 2},
                      {"name": "pfedmac_sh", "edge_rounds": 2, "lambda1": 0.5,
                       "inner_steps": 3, "sparsity": {"kind": "l1", "gamma": 0.3},
                       "upload": "theta", "encoding": "sparse"}],
               stragglers={"fraction": 0.5})
    doc["train"]["rounds"] = 3
    out = _run_both(tmp_path, doc)
    _assert_same(out, 3)
    sizes = {row.split(",")[10] for row in out["pfedmac_sh"]["auto"][0]["clients.csv"].split()[1:]}
    assert len(sizes) > 3                               # uploads of many sizes queue in ties


def test_unsampled_edges_use_the_event_loop(tmp_path):
    """pFedMac-SH with S < edges: unsampled edges keep working past the round's close."""
    doc = _doc(False, [{"name": "pfedmac_sh", "edges_per_round": 1, "lambda1": 0.5}])
    doc["train"]["rounds"] = 3
    out = _run_both(tmp_path, doc)
    assert out["pfedmac_sh"]["auto"][1] == 0
    assert out["pfedmac_sh"]["auto"][0] == out["pfedmac_sh"]["events"][0]


@pytest.mark.parametrize("policy", [{"policy": "first_k", "k": 3},
                                    {"policy": "wait_all", "timeout_s": 1e9}])
def test_time_dependent_rounds_use_the_event_loop(tmp_path, policy):
    doc = _doc(False, [{"name": "fedavg"}])
    doc["train"]["round"] = policy
    out = _run_both(tmp_path, doc)
    assert out["fedavg"]["auto"][1] == 0
    assert out["fedavg"]["auto"][0] == out["fedavg"]["events"][0]


def test_trace_file_is_what_csv_writer_writes():
    """Trace.flush_to caches the text of (node, kind, peer) and values; the bytes must stay
    csv.writer's, quoting included, and keep=False must drop what was written."""
    import csv
    import io

    from hierfl.sim.trace import Trace

    events = [(0.1, "edge,0", "send", 'cli"ent', 72.0), (0.30000000000000004, "a", "recv", "b", 3),
              (1e-7, "a", "recv", "b", 2.5), (2.0, "edge,0", "send", 'cli"ent', 72)]
    want = io.StringIO()
    w = csv.writer(want)
    for t, n, k, p, v in events:
        w.writerow((repr(float(t)), n, k, p, str(int(v)) if float(v).is_integer() else repr(v)))
    for keep in (True, False):
        trace, got = Trace(keep=keep), io.StringIO()
        for e in events[:2]:
            trace.add(*e)
        trace.flush_to(got)
        trace.extend(events[2:])
        trace.flush_to(got)
        assert got.getvalue() == want.getvalue()
        assert trace.count == 4 and len(trace.events) == (4 if keep else 0)


def test_client_lines_are_what_csvlog_writes(tmp_path):
    from hierfl.outputs import CsvLog
    from hierfl.outputs import CLIENT_COLUMNS, client_lines
    from hierfl.sim.work import ClientRecord

    recs = [ClientRecord(3, 0, 17, 20, 20, 0.125, float("nan"), False, True, float("nan")),
            ClientRecord(3, 2, 4, 0, 7, 1e-9, 2.5, True, False, 0.3333333333333333, True,
                         72.0, "bitmap"),
            ClientRecord(10**6, 1, 0, 5, 5, 1.0, 0.1 + 0.2, False, False, 1.0, False, 76.25,
                         "sparse", staleness=3.0, cluster=2),
            ClientRecord(4, 1, 17, 2, 3, -0.0, 1e-7, False, False, float("nan"),
                         edge='ed,ge"1', compress="topk")]     # quoted edge cell, -0.0
    from hierfl.outputs.columns import class_cells

    # device / link class per client id (ids 0, 4, 17 used); odd names are quoted as csv does
    dev = tuple(["phone"] * 5 + ["lap,top"] * 13)
    lnk = tuple(["lte"] * 4 + [""] + ['wi"fi'] * 13)
    for classes in (None, class_cells(dev, lnk)):
        log = CsvLog(str(tmp_path / "a.csv"), CLIENT_COLUMNS)
        cls = {"device_class": dev, "link_class": lnk}
        log.rows([{c: ((cls[c][r.client] if classes else "") if c in cls else
                       (r.cluster if r.cluster >= 0 else "") if c == "cluster" else
                       (r.attacker if r.attacker >= 0 else "") if c == "attacker" else
                       getattr(r, c))
                   for c in CLIENT_COLUMNS} for r in recs])
        log.close()
        fast = CsvLog(str(tmp_path / "b.csv"), CLIENT_COLUMNS)
        fast.write(client_lines(recs, classes))
        fast.close()
        assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()



def test_rounds_with_nobody_available_are_empty(tmp_path):
    """Bernoulli availability can leave no client in a round: the round is empty (selected 0,
    no traffic, no training) instead of a crash, in both timings."""
    doc = _doc(False, [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])
    doc["topology"]["availability"] = {"kind": "bernoulli", "p": 0.05}
    doc["train"]["rounds"] = 8
    out = _run_both(tmp_path, doc)
    for label in ("fedavg", "hierfavg"):
        assert out[label]["auto"][0] == out[label]["events"][0]
        rows = list(csv.DictReader(out[label]["auto"][0]["metrics.csv"].splitlines()))
        selected = [int(r["selected"]) for r in rows[1:]]
        assert 0 in selected and any(selected)
