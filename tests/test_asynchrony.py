"""Asynchronous aggregation at the cloud (issue 21): FedAsync (Xie et al. 2019) and FedBuff
(Nguyen et al. 2022). Identities with synchronous FedAvg, a hand-computed schedule of three
clients of known speeds with every update's staleness, the mixing rules on hand numbers, and
the validation of what is not supported."""
from __future__ import annotations

import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
import torch

from conftest import make_scenario, run_outputs
from hierfl.config.asynchrony import StalenessSpec

ONE = {"train.rounds": 6, "train.clients_per_round": 1}


@pytest.mark.parametrize("policy", [{"policy": "fedasync", "alpha": 1.0, "max_concurrency": 1},
                                    {"policy": "fedbuff", "k": 1, "server_lr": 1.0,
                                     "max_concurrency": 1}])
def test_one_at_a_time_is_synchronous_fedavg_with_one_client(tmp_path, policy):
    """max_concurrency 1: no staleness ever; alpha = 1 (FedAsync) or k = 1, eta = 1 (FedBuff)
    gives synchronous FedAvg with one client per round: the same clients (one seeded stream),
    times, bytes and parameters."""
    a = run_outputs(make_scenario(tmp_path / "a", **ONE, **{"train.round": policy}))
    s = run_outputs(make_scenario(tmp_path / "s", **ONE))
    assert (a.final("fedavg") == s.final("fedavg")).all()
    assert [r["staleness"] for r in a.clients["fedavg"]] == ["0.0"] * 6
    assert [r["client"] for r in a.clients["fedavg"]] == [r["client"] for r in s.clients["fedavg"]]
    for ra, rs in zip(a.metrics["fedavg"], s.metrics["fedavg"]):
        assert ra == rs


def test_no_staleness_with_one_slot_even_with_uneven_speeds(tmp_path):
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 8, "train.clients_per_round": 3,
        "topology.clients.compute_flops": {"dist": "uniform", "low": 1e7, "high": 1e9},
        "train.round": {"policy": "fedasync", "alpha": 0.5, "max_concurrency": 1}}))
    assert {r["staleness"] for r in out.clients["fedavg"]} == {"0.0"}


def _three_clients(flops: list[float]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=1e12)
    g.add_node("edge0", role="edge", flops=1e12, parent="cloud")
    for k, f in enumerate(flops):
        g.add_node(f"client{k}", role="client", flops=f, parent="edge0", index=k)
    for n, a in list(g.nodes(data=True)):
        if "parent" in a:       # 1 s a hop, transfers of no duration
            g.add_edge(n, a["parent"], latency_s=1.0, bandwidth_Bps=1e30)
            g.add_edge(a["parent"], n, latency_s=1.0, bandwidth_Bps=1e30)
    return g


def test_hand_computed_schedule_of_three_clients(tmp_path):
    """Three clients, all working at once; each job is 2 s down, c_k computing, 2 s up, with
    c = 6, 22, 39 s: jobs of 10, 26 and 43 s. A finished client is the only free one, so it
    starts again at once. Arrivals (time, client, version at download -> at arrival):
    10 c0 0->0, 20 c0 1->1, 26 c1 0->2, 30 c0 2->3, 40 c0 4->4, 43 c2 0->5, 50 c0 5->6,
    52 c1 3->7: staleness 0, 0, 2, 1, 0, 5, 1, 4."""
    kw = {"train.rounds": 8, "train.clients_per_round": "all", "topology.clients.count": 3,
          "train.round": {"policy": "fedasync", "alpha": 0.6,
                          "staleness": {"kind": "polynomial", "a": 0.5}}}
    path = make_scenario(tmp_path, **kw)
    probe = run_outputs(path, graph=_three_clients([1.0, 1.0, 1.0]), out=tmp_path / "p")
    work = {int(r["client"]): float(r["compute_s"]) for r in probe.clients["fedavg"]}  # FLOPs
    want_c = [6.0, 22.0, 39.0]
    out = run_outputs(path, graph=_three_clients([work[k] / want_c[k] for k in range(3)]),
                      out=tmp_path / "o", keep_trace=True)
    rows = out.clients["fedavg"]
    assert [int(r["client"]) for r in rows] == [0, 0, 1, 0, 0, 2, 0, 1]
    assert [float(r["staleness"]) for r in rows] == [0, 0, 2, 1, 0, 5, 1, 4]
    assert [int(r["round"]) for r in rows] == list(range(1, 9))
    times = [float(r["sim_time_s"]) for r in out.metrics["fedavg"][1:]]
    assert times == pytest.approx([10, 20, 26, 30, 40, 43, 50, 52], abs=1e-9)
    recv = [(round(e[0], 6), e[3]) for e in out.results["fedavg"].trace.events
            if e[1] == "cloud" and e[2] == "recv"]
    assert recv == [(10.0, "edge0"), (20.0, "edge0"), (26.0, "edge0"), (30.0, "edge0"),
                    (40.0, "edge0"), (43.0, "edge0"), (50.0, "edge0"), (52.0, "edge0")]


def test_mixing_rules_on_hand_numbers():
    from hierfl.exec.asynchronous import fedasync_mix, fedbuff_apply

    class Algo:
        def __init__(self, w):
            self.w = torch.tensor(w)

        def global_model(self):
            return self.w

        def set_global(self, w):
            self.w = w

    algo = Algo([1.0, 2.0])
    s = StalenessSpec(kind="polynomial", a=0.5).weight(3)            # (3 + 1)^-0.5 = 0.5
    fedasync_mix(algo, (torch.tensor([3.0, 6.0]), 1.0), 0.6 * s)      # a_s = 0.3
    assert algo.w.tolist() == pytest.approx([0.7 * 1 + 0.3 * 3, 0.7 * 2 + 0.3 * 6])
    algo = Algo([1.0, 1.0])     # deltas (2, 0) from start (0, 0), weight 1, s 1 and (0, 4)
    buf = [((torch.tensor([2.0, 0.0]), 1.0), torch.tensor([0.0, 0.0]), 1.0),   # from (1, 1),
           ((torch.tensor([1.0, 5.0]), 3.0), torch.tensor([1.0, 1.0]), 0.5)]   # weight 3, s .5
    fedbuff_apply(algo, buf, server_lr=2.0)
    # x + eta * (1*1*(2, 0) + 3*0.5*(0, 4)) / (1 + 3) = (1, 1) + 2 * (2, 6) / 4 = (2, 4)
    assert algo.w.tolist() == pytest.approx([2.0, 4.0])
    assert StalenessSpec(kind="hinge", a=0.5, b=2).weight(2) == 1.0
    assert StalenessSpec(kind="hinge", a=0.5, b=2).weight(6) == pytest.approx(1 / 3)


def test_fedbuff_versions_count_k_updates(tmp_path):
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 4, "train.clients_per_round": 3,
        "train.round": {"policy": "fedbuff", "k": 2, "server_lr": 1.0}}))
    m = out.metrics["fedavg"][1:]
    assert [int(r["reported"]) for r in m] == [2, 2, 2, 2]
    assert len(out.clients["fedavg"]) == 8


def test_duration_ends_the_run_and_evaluates_its_last_version(tmp_path):
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 1000, "train.duration_s": 3e-5, "train.clients_per_round": 2,
        "train.round": {"policy": "fedasync", "alpha": 0.5}}))
    m = out.metrics["fedavg"]
    assert 1 < len(m) < 1000 and float(m[-1]["sim_time_s"]) >= 3e-5
    assert float(m[-2]["sim_time_s"]) < 3e-5 and m[-1]["test_acc"] != ""


@pytest.mark.parametrize("overrides, needle", [
    ({"algorithms": [{"name": "scaffold"}], "train.round": {"policy": "fedasync"}},
     "cannot run with train.round.policy 'fedasync'"),
    ({"algorithms": [{"name": "pfedmac_sh"}], "train.round": {"policy": "fedbuff", "k": 2}},
     "weighted mean of aggregator models"),
    ({"algorithms": [{"name": "fedadam"}], "train.edge_round": {"policy": "fedasync"}},
     "not a mean of client models"),
    ({"train.edge_preaggregate": True, "train.edge_round": {"policy": "fedasync"}},
     "does not apply to asynchronous edges"),
    ({"train.edge_round": {"policy": "fedasync", "drain_every": 2}}, "applies to the cloud tier"),
    ({"train.round": {"policy": "wait_all", "drain_every": 2}}, "asynchronous policies"),
    ({"train.round": {"policy": "fedbuff"}}, "needs k"),
    ({"train.round": {"policy": "wait_all", "alpha": 0.5}}, "asynchronous policies"),
    ({"train.round": {"policy": "fedasync", "alpha": 1.5}}, "(0, 1]"),
])
def test_unsupported_or_bad_async_settings_exit_2(tmp_path, overrides, needle):
    path = make_scenario(tmp_path, **overrides)
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_async_waits_for_availability_and_never_hangs(tmp_path):
    """Nobody is available until 1 s: the first job starts then. Client 0's availability ends
    at 1.00002 s: jobs that would upload later fail; once nobody can ever be available again
    and nothing is in flight, the run ends before its 50 versions instead of hanging."""
    (tmp_path / "avail.csv").write_text("client,start_s,end_s\n0,1,1.00002\n1,1,1.00001\n")
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 50, "train.clients_per_round": 2, "topology.clients.count": 2,
        "train.eval_every": 50, "topology.availability": {"kind": "trace", "path": "avail.csv"},
        "train.round": {"policy": "fedasync", "alpha": 0.5}}), keep_trace=True)
    events = out.results["fedavg"].trace.events
    first_send = min(e[0] for e in events if e[2] == "send")
    assert first_send == 1.0
    m = out.metrics["fedavg"]
    assert 1 < len(m) < 51
    assert any(r["failed"] == "1" for r in out.clients["fedavg"])
    assert max(float(r["sim_time_s"]) for r in m) < 1.0001
    # its last version is its final model: evaluated (it was left as an unevaluated round,
    # and the report took round 0's accuracy for the final one), written once
    assert m[-1]["test_acc"] != "" and m[-1]["train_loss"] != ""
    assert [int(r["round"]) for r in m] == list(range(len(m)))
    assert all(r["test_acc"] == "" for r in m[1:-1])          # eval_every 50: none between
    from hierfl.report.build import _series_notes
    from hierfl.outputs import load_run
    series = load_run(out.folder).series[0]
    assert series.rows[-1]["test_acc"] == float(m[-1]["test_acc"])
    note = _series_notes(series, "fedavg", 50, True)[-1]
    assert f"metrics end at round {len(m) - 1} of 50 (the run ended there" in note


HIER = {"topology.edges.count": 2, "topology.clients.count": 6, "train.clients_per_round": "all",
        "algorithms": [{"name": "hierfavg", "edge_rounds": 2}]}


def test_hierarchical_one_edge_at_a_time_with_alpha_1_is_that_edges_model(tmp_path):
    """Synchronous edges, asynchronous cloud: with one edge working at a time and alpha 1, each
    version is the model of the edge that arrived, which started from the previous version:
    the same as synchronous HierFAVG on a topology holding only that edge's clients, round
    after round. Checked on the versions' sequence of edges: every version's clients belong to
    one edge, edges alternate by the seeded draw, nothing is stale."""
    out = run_outputs(make_scenario(tmp_path, **HIER, **{
        "train.rounds": 4, "train.round": {"policy": "fedasync", "alpha": 1.0,
                                           "max_concurrency": 1}}))
    rows = out.clients["hierfavg"]
    by_version: dict[int, set[int]] = {}
    for r in rows:
        by_version.setdefault(int(r["round"]), set()).add(int(r["client"]) % 2)
        assert r["staleness"] == "0.0"
    assert sorted(by_version) == [1, 2, 3, 4]
    assert all(len(v) == 1 for v in by_version.values())   # round_robin: edge = client % 2
    assert len(rows) == 4 * 2 * 3                          # 2 edge rounds x 3 clients a job
    m = out.metrics["hierfavg"][1:]
    assert [int(r["reported"]) for r in m] == [3, 3, 3, 3]


def test_hierarchical_fedbuff_staleness_and_bytes(tmp_path):
    out = run_outputs(make_scenario(tmp_path, **HIER, **{
        "topology.edges.link": {"latency_s": 0.5, "bandwidth_Bps": 1e9},
        "train.rounds": 6, "train.round": {"policy": "fedbuff", "k": 1, "server_lr": 1.0}}),
        keep_trace=True)
    rows = out.clients["hierfavg"]
    assert {r["staleness"] for r in rows} >= {"0.0", "1.0"}   # two edges overlap
    last = out.metrics["hierfavg"][-1]
    ev = out.results["hierfavg"].trace.events
    sent = [e[4] for e in ev if e[1].startswith("edge") and e[2] == "send" and e[3] == "cloud"]
    got = [e for e in ev if e[1] == "cloud" and e[2] == "recv"]
    assert len(got) == 6 and len(sent) >= 6 and len(set(sent)) == 1   # one model each
    assert float(last["bytes_up_edge_cloud"]) == sum(sent)


def test_per_algorithm_round_policy_sync_and_async_side_by_side(tmp_path):
    """An entry's `round:` replaces train.round for it alone: a synchronous HierFAVG and one
    with a FedBuff cloud in one scenario; the synchronous one equals a run without the other."""
    both = run_outputs(make_scenario(tmp_path / "b", **{
        **HIER, "train.rounds": 3, "algorithms": [
            {"name": "hierfavg", "edge_rounds": 2},
            {"name": "hierfavg", "label": "hier_fedbuff", "edge_rounds": 2,
             "round": {"policy": "fedbuff", "k": 2}}]}))
    alone = run_outputs(make_scenario(tmp_path / "a", **HIER, **{"train.rounds": 3}))
    assert both.metrics["hierfavg"] == alone.metrics["hierfavg"]
    assert (both.final("hierfavg") == alone.final("hierfavg")).all()
    assert {r["staleness"] for r in both.clients["hierfavg"]} == {""}
    assert {r["staleness"] for r in both.clients["hier_fedbuff"]} != {""}


def test_async_jobs_record_their_energy(tmp_path):
    """Energy (docs/energy.md) of asynchronous jobs: each record's energy is the rule applied to
    its own seconds, idle time is what the job spent beyond its radio and compute, and a
    version's energy_j is the sum of the records it holds."""
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 5, "train.clients_per_round": 2,
        "topology.clients.power_w": 3.0, "topology.clients.idle_w": 0.5,
        "topology.clients.link": {"latency_s": 0.01, "bandwidth_Bps": 1e6, "tx_w": 2.0,
                                  "rx_w": 1.0},
        "train.round": {"policy": "fedasync", "alpha": 0.5}}))
    rows = out.clients["fedavg"]
    for r in rows:
        c, tx, dl, idle = (float(r[k]) for k in ("compute_s", "tx_s", "download_s", "idle_s"))
        assert float(r["energy_j"]) == pytest.approx(3.0 * c + 2.0 * tx + 1.0 * dl + 0.5 * idle)
        assert c > 0 and tx > 0 and dl > 0 and idle > 0      # relay latency: idle, not radio
    for m in out.metrics["fedavg"][1:]:
        mine = [float(r["energy_j"]) for r in rows if r["round"] == m["round"]]
        assert float(m["energy_j"]) == pytest.approx(sum(mine))


def _failing(tmp_path, name: str, failures: dict, **train) -> str:
    return make_scenario(
        tmp_path, name=name, seed=0,
        topology={"clients": {"count": 2}, "edges": {"count": 1}, "failures": failures},
        data={"name": "synthetic", "dim": 4, "classes": 2, "samples": 20},
        model={"name": "logreg"},
        train={"rounds": 1, "clients_per_round": 2, "local": {"steps": 1}, **train},
        algorithms=[{"name": "hierfavg" if "edge_round" in train else "fedavg"}])


@pytest.mark.parametrize("where", ["cloud", "edge"])
def test_jobs_that_always_fail_end_the_run(tmp_path, capsys, where):
    """crash_p 1: every job crashes and no version is ever made. The server (or edge) started
    failing jobs for ever, the clock barely moving (a fuzzer's run never ended, duration_s or
    not); after fruitless_limit jobs in a row it stops, and, nothing being due to change,
    the run (the edge's period) ends."""
    policy = {"round": {"policy": "fedasync"}} if where == "cloud" else \
        {"edge_round": {"policy": "fedasync"}}
    out = run_outputs(_failing(tmp_path, "fail", {"crash_p": 1.0}, **policy),
                      out=tmp_path / "out")
    label = "fedavg" if where == "cloud" else "hierfavg"
    rows = out.metrics[label]
    if where == "cloud":
        assert [r["round"] for r in rows] == ["0"]         # no version made
        assert "1000 jobs in a row ended without an update" in capsys.readouterr().err
    else:                                   # the cloud round closes with nobody reported
        assert rows[-1]["round"] == "1" and rows[-1]["reported"] == "0"
        assert len(out.clients[label]) >= 1000


def test_jobs_failing_through_an_outage_wait_for_its_end(tmp_path):
    """edge0 is down for the first simulated second: every job fails at once. After
    fruitless_limit of them no job starts until the outage ends; then one succeeds and the
    version is made just after 1 s (about 3 million jobs would have failed before)."""
    out = run_outputs(_failing(tmp_path, "outage", {"outages": [
        {"node": "edge0", "start_s": 0.0, "end_s": 1.0}]}, round={"policy": "fedasync"}),
        out=tmp_path / "out")
    last = out.metrics["fedavg"][-1]
    assert last["round"] == "1" and float(last["sim_time_s"]) > 1.0
    assert int(last["reported"]) == 1 and 1000 <= int(last["failed"]) <= 1003


def test_crashes_are_drawn_per_job_under_an_asynchronous_cloud(tmp_path):
    """crash_p 0.5 with two clients: the crash draw was keyed by the version, so every job of a
    client within one version crashed alike; a version whose two clients were both doomed was
    never made (the run then ended at version 0 of 30 with the fruitless-jobs warning). Keyed
    by the job, every version is made."""
    path = _failing(tmp_path, "half", {"crash_p": 0.5}, round={"policy": "fedasync"})
    out = run_outputs(path, out=tmp_path / "out", rounds=30)
    rows = out.metrics["fedavg"]
    assert rows[-1]["round"] == "30"
    assert sum(int(r["failed"]) for r in rows) > 5       # crashes did happen
