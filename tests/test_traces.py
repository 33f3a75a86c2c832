"""Measured traces (issue 21): availability intervals from a CSV file decide who is selected
and who drops out; bad trace files are exit-2 errors naming the file, line and reason."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import make_scenario, run_outputs

# the default test system (1 edge, 4 clients, 2 local steps): a round's downloads end at
# 1.152e-6 s, its uploads start at 5.904e-6 s, and the round closes before 1e-5 s
TRACE = ("client,start_s,end_s\n"
         "client0,0,1\n"               # always available
         "2,0,3e-6\n"                  # selected at 0, gone before it uploads at 5.9e-6
         "3,2e-6,1\n")                 # back from 2e-6: not selectable in round 1, then yes
#                                        client1 has no interval: never available


def _scenario(tmp_path, trace: str, **kw) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "avail.csv").write_text(trace)
    return make_scenario(tmp_path, **{"train.rounds": 3,
                                      "topology.availability": {"kind": "trace",
                                                                "path": "avail.csv"}, **kw})


def test_trace_decides_selection_and_dropouts(tmp_path):
    out = run_outputs(_scenario(tmp_path, TRACE), keep_trace=True)
    rows = [(int(r["round"]), int(r["client"]), int(r["failed"]))
            for r in out.clients["fedavg"]]
    assert sorted(rows) == [(1, 0, 0), (1, 2, 1), (2, 0, 0), (2, 3, 0), (3, 0, 0), (3, 3, 0)]
    events = list(out.results["fedavg"].trace.events)
    offline = [(e[1], e[2]) for e in events if e[2] == "offline"]
    assert offline == [("client2", "offline")]
    assert not any(e[1] == "client1" for e in events)
    m = out.metrics["fedavg"]
    assert [int(r["reported"]) for r in m if r.get("reported", "") != ""][-3:] == [1, 2, 2]


def test_trace_matches_always_when_every_client_is_always_up(tmp_path):
    """A trace in which every client is available throughout equals `kind: always`."""
    full = "client,start_s,end_s\n" + "".join(f"{k},0,1000\n" for k in range(4))
    a = run_outputs(_scenario(tmp_path / "a", full, **{"train.timing": "events"}))
    b = run_outputs(make_scenario(tmp_path / "b", **{"train.rounds": 3,
                                                     "train.timing": "events"}))
    assert a.metrics["fedavg"] == b.metrics["fedavg"]
    assert (a.final("fedavg") == b.final("fedavg")).all()


@pytest.mark.parametrize("algo", [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 1}])
def test_a_round_with_nobody_available_lasts_until_someone_may_be_back(tmp_path, algo):
    """Every client away in [3e-6, 0.5) (round 1's clients leave before they upload): round 2
    finds nobody, is empty and ends at 0.5, the next availability change; round 3 trains. (An empty round took no time: the
    clock, and so availability, stayed where it was and every later round was empty.)"""
    gap = "client,start_s,end_s\n" + "".join(f"{k},0,3e-6\n{k},0.5,10\n" for k in range(4))
    out = run_outputs(_scenario(tmp_path, gap, algorithms=[algo], **{"train.rounds": 4}))
    m = [r for r in out.metrics[algo["name"]] if int(r["round"]) > 0]
    assert [int(r["selected"]) for r in m] == [4, 0, 4, 4]
    assert float(m[0]["sim_time_s"]) < 1e-4 and float(m[1]["sim_time_s"]) == 0.5
    assert 0.5 < float(m[2]["sim_time_s"]) < float(m[3]["sim_time_s"]) < 0.6
    assert int(m[2]["reported"]) == 4


@pytest.mark.parametrize("body, line, needle", [
    ("client0,0,1\nclient9,0,1\n", 3, "unknown client"),
    ("client0,0,1\nclient0,0.5,2\n", 3, "overlaps"),
    ("client0,5,6\nclient0,1,2\n", 3, "unsorted"),
    ("client0,-1,2\n", 2, "expected a finite number >= 0"),
    ("client0,3,2\n", 2, "ends after it starts"),
    ("client0,abc,2\n", 2, "expected a number"),
    ("client0,1\n", 2, "missing"),
    ("client0,1,2,7\n", 2, "an extra column"),
])
def test_bad_trace_lines_exit_2_naming_file_and_line(tmp_path, body, line, needle):
    path = _scenario(tmp_path, "client,start_s,end_s\n" + body)
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert f"{tmp_path / 'avail.csv'}:{line}:" in r.stderr and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bad_header_and_missing_file(tmp_path):
    path = _scenario(tmp_path, "who,from,to\n0,0,1\n")
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "client,start_s,end_s" in r.stderr, r.stderr
    os.remove(tmp_path / "avail.csv")
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "trace file not found" in r.stderr, r.stderr


def test_trace_kind_needs_a_path_and_path_needs_trace(tmp_path):
    for avail, needle in (({"kind": "trace"}, "needs path"),
                          ({"kind": "markov", "path": "a.csv"}, "path does not apply")):
        path = make_scenario(tmp_path, **{"topology.availability": avail})
        r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                           capture_output=True, text=True)
        assert r.returncode == 2 and needle in r.stderr, r.stderr


# ----------------------------------------------------------------------------- FedScale converter
def _convert(tmp_path, kind: str, doc: dict, *extra: str) -> subprocess.CompletedProcess:
    import json
    src = tmp_path / "in.json"
    src.write_text(json.dumps(doc))
    return subprocess.run([sys.executable, "-m", "hierfl", "trace", "convert", kind, str(src),
                           "--out", str(tmp_path / "out.csv"), *extra],
                          capture_output=True, text=True, timeout=60)


def test_fedscale_capacity_units(tmp_path):
    """FedScale: a training sample costs 3x the inference ms; B bytes are B*8/1024 kbit. Client
    ids are numbered in increasing id (3 before 12)."""
    r = _convert(tmp_path, "fedscale-capacity",
                 {"12": {"computation": 50.0, "communication": 8000.0},
                  "3": {"computation": 100.0, "communication": 1024.0}},
                 "--flops-per-sample", "3e6")
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "client,compute_flops,uplink_Bps,downlink_Bps,latency_s"
    rows = [[float(v) for v in ln.split(",")] for ln in lines[1:]]
    # 3e6 FLOPs in 3 * 100 ms = 0.3 s -> 1e7 FLOP/s; 1024 kbit/s = 131072 B/s
    assert rows == [[0, 1e7, 131072.0, 131072.0, 0.0], [1, 2e7, 1024000.0, 1024000.0, 0.0]]


def test_fedscale_behaviour_to_intervals_feeds_a_run(tmp_path):
    doc = {"1": {"active": [10, 50], "inactive": [20, 70], "finish_time": 100},
           "2": {"active": [0], "inactive": [100], "finish_time": 100}}
    r = _convert(tmp_path, "fedscale-behave", doc, "--horizon-s", "250")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "out.csv").read_text()
    assert text.splitlines() == ["client,start_s,end_s", "0,10.0,20.0", "0,50.0,70.0",
                                 "0,110.0,120.0", "0,150.0,170.0", "0,210.0,220.0",
                                 "1,0.0,250.0"]   # periods repeat; touching intervals merged
    out = run_outputs(_scenario(tmp_path / "run", text, **{"topology.clients.count": 2}))
    assert {int(r["client"]) for r in out.clients["fedavg"]} == {1}   # client 0 is off at t<10


@pytest.mark.parametrize("kind, doc, extra, needle", [
    ("fedscale-capacity", {"1": {"computation": 0, "communication": 5}}, ["--flops-per-sample",
                                                                          "1"], "1.computation"),
    ("fedscale-capacity", {"1": {"computation": 1, "communication": 5}}, [], "--flops-per-sample"),
    ("fedscale-behave", {"1": {"active": [1], "inactive": [], "finish_time": 9}},
     ["--horizon-s", "5"], "same length"),
    ("fedscale-behave", [1, 2], ["--horizon-s", "5"], "mapping"),
    # these two ran without end (periods repeated to an infinite or a 1e15-period horizon)
    ("fedscale-behave", {"1": {"active": [0], "inactive": [5], "finish_time": 9}},
     ["--horizon-s", "inf"], "--horizon-s = inf"),
    ("fedscale-behave", {"1": {"active": [0], "inactive": [5e-10], "finish_time": 1e-9}},
     ["--horizon-s", "1e6"], "1.finish_time = 1e-09"),
    ("fedscale-capacity", {"1": {"computation": 1, "communication": 5}},
     ["--flops-per-sample", "inf"], "--flops-per-sample = inf"),
    # a client never up walked its 1e15 periods all the same (no rows, no end)
    ("fedscale-behave", {"1": {"active": [], "inactive": [], "finish_time": 1e-9},
                         "2": {"active": [0], "inactive": [5e-10], "finish_time": 1e-9}},
     ["--horizon-s", "1e6"], "2.finish_time = 1e-09"),
    # converted to inf (or 0) and written: hierfl's own devices trace loader refused the CSV
    ("fedscale-capacity", {"1": {"computation": 1e-320, "communication": 5}},
     ["--flops-per-sample", "1e6"], "in.json: 1.computation = 1e-320: converts to compute_flops"),
    ("fedscale-capacity", {"1": {"computation": 1, "communication": 5},
                           "2": {"computation": 1, "communication": 1e308}},
     ["--flops-per-sample", "1e6"], "in.json: 2.communication = 1e+308: converts to uplink_Bps"),
    ("fedscale-capacity", {"1": {"computation": 1e308, "communication": 5}},
     ["--flops-per-sample", "1"], "in.json: 1.computation = 1e+308: converts to compute_flops 0.0"),
])
def test_fedscale_bad_input_exit_2(tmp_path, kind, doc, extra, needle):
    r = _convert(tmp_path, kind, doc, *extra)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out.csv").exists()


def test_convert_to_a_folder_names_the_folder(tmp_path):
    """--out a folder: the error named the temporary file made beside it."""
    (tmp_path / "out.csv").mkdir()
    r = _convert(tmp_path, "fedscale-behave", {"1": {"active": [0], "inactive": [5],
                                                     "finish_time": 9}}, "--horizon-s", "5")
    assert r.returncode == 2 and "out.csv': is a folder: give the CSV file" in r.stderr
    assert ".tmp" not in r.stderr


# ----------------------------------------------------------------------------- devices trace
DEVICES = ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s,device,link\n"
           "1,2e9,1e6,4e6,0.05,phone,lte\n"
           "0,8e9,5e6,1e7,0.01,laptop,wifi\n"
           "2,1e9,5e5,2e6,0.07,phone,lte\n")


def test_devices_trace_gives_each_client_its_measured_device_and_link(tmp_path):
    import hierfl
    from hierfl.run import build_world

    (tmp_path / "devices.csv").write_text(DEVICES)
    path = make_scenario(tmp_path, **{"topology.clients": {"trace": "devices.csv"},
                                      "train.rounds": 1})
    world = build_world(hierfl.load(path))
    topo = world.topo
    assert topo.n_clients == 3
    assert topo.client_flops.tolist() == [8e9, 2e9, 1e9]
    g = topo.graph
    assert g.edges["client1", "edge0"]["bandwidth_Bps"] == 1e6      # up
    assert g.edges["edge0", "client1"]["bandwidth_Bps"] == 4e6      # down
    assert g.edges["client2", "edge0"]["latency_s"] == 0.07
    out = run_outputs(path)
    rows = {int(r["client"]): r for r in out.clients["fedavg"]}
    assert rows[0]["device_class"] == "laptop" and rows[1]["link_class"] == "lte"
    # compute seconds follow the measured speeds: client 0 is 4x client 1 at equal work
    c0, c1 = float(rows[0]["compute_s"]), float(rows[1]["compute_s"])
    n = {k: int(r["steps"]) for k, r in rows.items()}
    ratio = float(world.data.counts[1]) / float(world.data.counts[0])   # full batch: samples
    assert n[0] == n[1] and c1 / c0 == pytest.approx(4.0 * ratio)


@pytest.mark.parametrize("body, needle", [
    ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s\n0,1e9,1e6,1e6,0.1\n0,1e9,1e6,1e6,"
     "0.1\n", "listed twice"),
    ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s\n0,1e9,1e6,1e6,0.1\n5,1e9,1e6,1e6,"
     "0.1\n", "unknown client"),
    ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s\n0,-1e9,1e6,1e6,0.1\n",
     "expected a finite number >= 0"),
    ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s\n0,1e9,0,1e6,0.1\n",
     "expected a number > 0"),
    ("client,compute_flops,uplink_Bps,downlink_Bps,latency_s,speed\n0,1e9,1e6,1e6,0.1,3\n",
     "only device and link may follow"),
])
def test_bad_devices_trace_exit_2(tmp_path, body, needle):
    (tmp_path / "devices.csv").write_text(body)
    path = make_scenario(tmp_path, **{"topology.clients": {"trace": "devices.csv"}})
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "devices.csv:" in r.stderr


def test_devices_trace_count_must_agree_and_excludes_drawn_keys(tmp_path):
    (tmp_path / "devices.csv").write_text(DEVICES)
    for clients, needle in (({"trace": "devices.csv", "count": 4}, "lists 3 clients"),
                            ({"trace": "devices.csv", "compute_flops": 2e9}, "leave them out")):
        path = make_scenario(tmp_path, **{"topology.clients": clients})
        r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                           capture_output=True, text=True)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
