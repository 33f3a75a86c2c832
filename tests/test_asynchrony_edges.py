"""Asynchronous aggregation at the edge tier (issue 21, `train.edge_round: fedasync | fedbuff`,
sim/async_edge.py): the identity with synchronous HierFAVG / pFedMac-SH, a hand-computed
schedule of two edges with every update's edge staleness, asynchronous edges under an
asynchronous cloud, and the algorithms that refuse it."""
from __future__ import annotations

import subprocess
import sys

import networkx as nx
import pytest

from conftest import make_scenario, run_outputs

# one client under each of three edges, all sampled: each edge round aggregates one client
SOLO = {"topology.edges.count": 3, "topology.clients.count": 3, "train.clients_per_round": "all",
        "train.rounds": 3, "algorithms": [{"name": "hierfavg", "edge_rounds": 3}]}


def _same_run(a, s, label: str) -> None:
    assert (a.final(label) == s.final(label)).all()
    assert a.metrics[label] == s.metrics[label]
    strip = [[{k: v for k, v in r.items() if k != "staleness"} for r in o.clients[label]]
             for o in (a, s)]
    assert strip[0] == strip[1]
    assert {r["staleness"] for r in a.clients[label]} == {"0.0"}
    assert sorted(a.results[label].trace.events) == sorted(s.results[label].trace.events)


@pytest.mark.parametrize("policy", [{"policy": "fedasync", "alpha": 1.0, "max_concurrency": 1},
                                    {"policy": "fedbuff", "k": 1, "server_lr": 1.0}])
def test_one_client_per_edge_round_is_synchronous_hierfavg(tmp_path, policy):
    """Where every edge has exactly one sampled client, its asynchronous jobs run one at a time
    and FedAsync alpha 1 / FedBuff k 1, eta 1 set the edge's model to that client's: the
    edge versions are HierFAVG's edge rounds (same parameters, metrics, clients, times, bytes
    and trace events), and no update is stale."""
    a = run_outputs(make_scenario(tmp_path / "a", **SOLO, **{"train.edge_round": policy}),
                    keep_trace=True)
    s = run_outputs(make_scenario(tmp_path / "s", **SOLO), keep_trace=True)
    _same_run(a, s, "hierfavg")


def test_pfedmac_sh_edge_rule_under_fedasync_alpha_1(tmp_path):
    """pFedMac-SH's edge rule (y = mean of client models, x <- x - eta2 lambda2 (x - y)) is kept
    by an asynchronous edge: with one client per edge and alpha 1 it equals the synchronous
    run."""
    kw = {**SOLO, "algorithms": [{"name": "pfedmac_sh", "edge_rounds": 2, "eta2": 0.5,
                                  "lambda2": 1.0}], "train.rounds": 2}
    a = run_outputs(make_scenario(tmp_path / "a", **kw, **{"train.edge_round": {
        "policy": "fedasync", "alpha": 1.0}}), keep_trace=True)
    s = run_outputs(make_scenario(tmp_path / "s", **kw), keep_trace=True)
    _same_run(a, s, "pfedmac_sh")


def _two_edges(flops: list[float]) -> nx.DiGraph:
    """cloud -> edge0 (client0, client1), edge1 (client2, client3); 1 s a hop, no transfer
    time."""
    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=1e12)
    for e in range(2):
        g.add_node(f"edge{e}", role="edge", flops=1e12, parent="cloud")
    for k, f in enumerate(flops):
        g.add_node(f"client{k}", role="client", flops=f, parent=f"edge{k // 2}", index=k)
    for n, a in list(g.nodes(data=True)):
        if "parent" in a:
            g.add_edge(n, a["parent"], latency_s=1.0, bandwidth_Bps=1e30)
            g.add_edge(a["parent"], n, latency_s=1.0, bandwidth_Bps=1e30)
    return g


def test_hand_computed_schedule_of_two_edges(tmp_path):
    """Two edges of two clients, both clients of an edge working at once, FedAsync, 4 edge
    versions per cloud round. The cloud's model reaches both edges at 1 s; a job is 1 s down,
    c_k computing, 1 s up, with c = 2, 9 (edge0) and 3.25, 5.5 s (edge1): jobs of 4, 11,
    5.25 and 7.5 s; a finished client is its edge's only free one and starts again at once.
    edge0 (version at download -> at arrival): 5 c0 0->0, 9 c0 1->1, 12 c1 0->2, 13 c0 2->3:
    version 4, c1's second job (from version 3) is abandoned, staleness 1, dropped.
    edge1: 6.25 c2 0->0, 8.5 c3 0->1, 11.5 c2 1->2, 16 c3 2->3: version 4, c2's third job
    abandoned (from 3). Uploads reach the cloud at 14 and 17 s: the round ends at 17 s."""
    kw = {"train.rounds": 1, "topology.edges.count": 2, "topology.clients.count": 4,
          "algorithms": [{"name": "hierfavg", "edge_rounds": 4}],
          "train.edge_round": {"policy": "fedasync", "alpha": 0.6,
                               "staleness": {"kind": "polynomial", "a": 0.5}}}
    path = make_scenario(tmp_path, **kw)
    probe = run_outputs(path, graph=_two_edges([1.0] * 4), out=tmp_path / "p")
    work = {int(r["client"]): float(r["compute_s"]) for r in probe.clients["hierfavg"]}
    want = [2.0, 9.0, 3.25, 5.5]
    out = run_outputs(path, graph=_two_edges([work[k] / want[k] for k in range(4)]),
                      out=tmp_path / "o", keep_trace=True)
    rows = [(int(r["client"]), float(r["staleness"]), r["dropped"]) for r in
            out.clients["hierfavg"]]
    kept, dropped = "0", "1"
    assert rows == [(0, 0, kept), (2, 0, kept), (3, 1, kept), (0, 0, kept), (2, 1, kept),
                    (1, 2, kept), (0, 1, kept), (1, 1, dropped), (3, 1, kept), (2, 1, dropped)]
    assert float(out.metrics["hierfavg"][-1]["sim_time_s"]) == pytest.approx(17.0, abs=1e-9)
    ev = out.results["hierfavg"].trace.events
    aggs = [(round(e[0], 6), e[1]) for e in ev if e[2] == "aggregate" and e[1] != "cloud"]
    assert aggs == [(5.0, "edge0"), (6.25, "edge1"), (8.5, "edge1"), (9.0, "edge0"),
                    (11.5, "edge1"), (12.0, "edge0"), (13.0, "edge0"), (16.0, "edge1")]
    recv = [(round(e[0], 6), e[3]) for e in ev if e[1] == "cloud" and e[2] == "recv"]
    assert recv == [(14.0, "edge0"), (17.0, "edge1")]


def test_async_edges_under_an_async_cloud(tmp_path):
    """Both tiers asynchronous: each cloud job is an edge's period of 2 edge versions (FedBuff
    k 2 at the edge: 4 client updates), mixed into the cloud by FedAsync; clients.csv holds the
    edge staleness of each client update."""
    out = run_outputs(make_scenario(tmp_path, **{
        "topology.edges.count": 2, "topology.clients.count": 6, "train.rounds": 4,
        "algorithms": [{"name": "hierfavg", "edge_rounds": 2}],
        "train.round": {"policy": "fedasync", "alpha": 0.5},
        "train.edge_round": {"policy": "fedbuff", "k": 2, "max_concurrency": 2}}),
        keep_trace=True)
    m = out.metrics["hierfavg"][1:]
    assert [int(r["round"]) for r in m] == [1, 2, 3, 4]
    kept = [r for r in out.clients["hierfavg"] if r["dropped"] == "0"]
    assert len(kept) == 4 * 4                  # 4 versions x 2 edge versions x k = 2
    assert {r["staleness"] for r in kept} <= {"0.0", "1.0"}    # 2 at once, flushes of 2
    edge_aggs = [e for e in out.results["hierfavg"].trace.events
                 if e[2] == "aggregate" and e[1].startswith("edge")]
    assert {e[4] for e in edge_aggs} == {2}    # each edge version flushes k = 2 updates


@pytest.mark.parametrize("name", ["fedadam", "scaffold"])
def test_edges_refused_where_the_edge_rule_is_not_a_mean(tmp_path, name):
    path = make_scenario(tmp_path, **{"algorithms": [{"name": "hierfavg"}, {"name": name}],
                                      "train.edge_round": {"policy": "fedasync"}})
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                       capture_output=True, text=True)
    hier = name == "fedadam"
    assert (r.returncode == 2) == hier and "Traceback" not in r.stderr, r.stderr
    if hier:
        assert "algorithms[1].name" in r.stderr and "not a mean of client models" in r.stderr


@pytest.mark.parametrize("policy", [None, {"policy": "fedasync", "alpha": 0.5}])
def test_eval_every_s_evaluates_the_first_version_after_each_multiple(tmp_path, policy):
    """train.eval_every_s (with eval_every above the run's rounds): evaluated are round 0, the
    last, and each round whose time is the first at or after a multiple of eval_every_s (a
    multiple in (previous round's time, its time]), synchronous and asynchronous alike."""
    kw = {"train.rounds": 12, "train.eval_every": 100, "train.clients_per_round": 2}
    if policy:
        kw["train.round"] = policy
    probe = run_outputs(make_scenario(tmp_path / "p", **kw))
    times = [float(r["sim_time_s"]) for r in probe.metrics["fedavg"]]
    every = times[-1] / 4.5              # 4 multiples inside the run
    kw["train.eval_every_s"] = every
    out = run_outputs(make_scenario(tmp_path / "o", **kw))
    rows = out.metrics["fedavg"]
    assert [float(r["sim_time_s"]) for r in rows] == times
    want = [0] + [t for t in range(1, len(times)) if int(times[t] // every) >
                  int(times[t - 1] // every)] + [len(times) - 1]
    assert len(want) == 6
    assert [int(r["round"]) for r in rows if r["test_acc"] != ""] == want


def test_one_client_jobs_straggle_by_a_bernoulli_draw(tmp_path):
    """A one-client asynchronous job straggles with probability `fraction` (its own seeded
    draw), not round(fraction x 1) (which gave none for fraction <= 0.5): job j straggles
    iff rng(seed, "stragglers", j, 0).random() < fraction; one job at a time, row j is job j."""
    from hierfl import seeding
    out = run_outputs(make_scenario(tmp_path, **{
        "train.rounds": 10, "train.clients_per_round": 1, "stragglers": {"fraction": 0.4},
        "algorithms": [{"name": "fedprox", "mu": 0.0}],
        "train.round": {"policy": "fedasync", "alpha": 0.5, "max_concurrency": 1}}))
    got = [r["straggler"] == "1" for r in out.clients["fedprox"]]
    want = [bool(seeding.rng(0, "stragglers", j, 0).random() < 0.4)
            for j in range(1, len(got) + 1)]
    assert len(got) == 10 and got == want and 0 < sum(got) < 10


def test_asynchronous_edges_draw_their_stragglers_per_client(tmp_path):
    """Under asynchronous edges a job is (cloud round t, the edge's job count r): alike on
    every edge, so every edge's r-th job straggled or not together. The client now keys the
    draw too."""
    from hierfl import seeding
    out = run_outputs(make_scenario(tmp_path, **{
        "seed": 3, "topology.edges.count": 3, "topology.clients.count": 12,
        "train.rounds": 2, "train.clients_per_round": "all",
        "train.edge_round": {"policy": "fedbuff", "k": 2},
        "stragglers": {"fraction": 0.5, "drop": "never"},
        "algorithms": [{"name": "hierfavg", "edge_rounds": 3}]}))
    rows = out.clients["hierfavg"]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["round"], r["edge_round"]), set()).add(r["straggler"])
    assert any(len(v) == 2 for v in groups.values())     # edges no longer straggle alike
    assert 0 < sum(r["straggler"] == "1" for r in rows) < len(rows)


def test_free_client_without_a_mask_is_the_masked_draw():
    """_dispatch_any (all clients always up) picks, for job j, the same client as the masked
    draw over the sorted free clients (sim/asynchronous.py's general path)."""
    import numpy as np
    from types import SimpleNamespace

    from hierfl import seeding
    from hierfl.sim.asynchronous import AsyncRounds

    rng = np.random.default_rng(5)
    for j in range(1, 200):
        n = int(rng.integers(1, 40))
        busy = set(rng.choice(n, int(rng.integers(0, n)), replace=False).tolist())
        started = []
        fake = SimpleNamespace(_a=SimpleNamespace(busy=set(busy), jobs=j),
                               topo=SimpleNamespace(n_clients=n), sc=SimpleNamespace(seed=7),
                               spawn=lambda job: None,
                               _flat_job=lambda jj, k: started.append(k))
        AsyncRounds._dispatch_any(fake, j)
        free = [k for k in range(n) if k not in busy]
        want = free[0] if len(free) == 1 else \
            free[int(seeding.rng(7, "sample", j).choice(len(free), 1, replace=False)[0])]
        assert started == [want] and fake._a.busy == busy | {want}


def test_fedbuff_edge_ending_with_an_unapplied_buffer_sends_nothing(tmp_path):
    """An asynchronous FedBuff edge whose clients go away before it has k updates ends its
    period with the buffer never applied: those clients were not aggregated (dropped), and the
    edge, having aggregated nobody, sends nothing. A reviewer saw it upload its unchanged start
    model with its buffered clients' samples as weight, halving the cloud's step."""
    (tmp_path / "avail.csv").write_text("client,start_s,end_s\n0,0,0.9\n2,0,0.9\n"
                                        "1,0,1000\n3,0,1000\n")
    out = run_outputs(make_scenario(
        tmp_path, name="fb", seed=1,
        topology={"edges": {"count": 2}, "clients": {"count": 4, "assignment": "round_robin",
                                                     "compute_flops": 3.0e3},
                  "availability": {"kind": "trace", "path": str(tmp_path / "avail.csv")}},
        data={"name": "synthetic", "dim": 5, "classes": 3, "samples": 30},
        train={"rounds": 1, "clients_per_round": "all", "checkpoint_every": 0,
               "local": {"steps": 2, "batch_size": 10, "lr": 0.1},
               "edge_round": {"policy": "fedbuff", "k": 3, "server_lr": 1.0}},
        algorithms=[{"name": "hierfavg", "edge_rounds": 1}]), keep_trace=True)
    rows = out.clients["hierfavg"]
    kept = {r["client"] for r in rows if r["dropped"] == "0"}
    assert kept == {"1", "3"}           # client k under edge k % 2: edge0's all dropped
    assert {r["client"] for r in rows} == {"0", "1", "2", "3"}
    cloud = [v for _, n, kind, _, v in out.results["hierfavg"].trace.events
             if n == "cloud" and kind == "aggregate"]
    assert cloud == [1]                                    # edge1's upload alone
    assert out.results["hierfavg"].rows[1]["reported"] == 2
