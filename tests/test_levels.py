"""Bytes per link level on any depth (issue 17, point 3): one up and one down column per
adjacent pair of tiers, named after the tiers, adding up to the legacy two-tier totals, checked
against a hand count on cloud -> 2 regional -> 6 edges -> 12 clients."""
from __future__ import annotations

import networkx as nx
import pytest

from hierfl.outputs.columns import METRIC_COLUMNS, level_columns
from hierfl.sim.links import Ledger
from hierfl.topology.graph import Topology

from conftest import make_scenario, run_outputs, write_npz

B = 4.0      # one model: 1 float (linear, no bias, 1 feature)


def _doc(tmp_path, algorithms, tiers=("regional", "edge"), counts=(2, 6)):
    npz = write_npz(tmp_path / "d.npz", [([[1.0], [2.0]], [1.0, 2.0 + k % 3])
                                         for k in range(12)], tests="train")
    return {
        "name": "levels", "seed": 0,
        "topology": {
            "tiers": [{"name": n, "count": c, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e3}}
                      for n, c in zip(tiers, counts)],
            "clients": {"count": 12, "compute_flops": 1e3,
                        "link": {"latency_s": 0.01, "bandwidth_Bps": 1e3}},
        },
        "data": {"name": "npz", "path": npz},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 2, "clients_per_round": "all",
                  "local": {"steps": 1, "batch_size": "full", "lr": 0.05}},
        "algorithms": algorithms,
    }


def _last(o, label):
    return {k: float(v) for k, v in o.metrics[label][-1].items() if v != ""}


def test_four_levels_add_up_and_match_a_hand_count(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])
    o = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    head = list(o.metrics["fedavg"][0])
    new = ["bytes_up_edge_regional", "bytes_down_edge_regional", "bytes_up_regional_cloud",
           "bytes_down_regional_cloud"]
    assert head == METRIC_COLUMNS + new           # appended at the end, legacy order kept
    # FedAvg (flat), per round: the cloud sends one model down each link of the tree (2 + 6
    # + 12); every client's upload is relayed over all three levels (12 each)
    f = _last(o, "fedavg")
    want = {"bytes_up_client_edge": 12, "bytes_down_client_edge": 12,
            "bytes_up_edge_regional": 12, "bytes_down_edge_regional": 6,
            "bytes_up_regional_cloud": 12, "bytes_down_regional_cloud": 2}
    for k, v in want.items():
        assert f[k] == 2 * v * B, k
    # HierFAVG, edge_rounds 2 (regional tier 1 round): per cloud round 2 edge rounds on the
    # client links, one model per edge and per regional node up and down
    h = _last(o, "hierfavg")
    want = {"bytes_up_client_edge": 24, "bytes_down_client_edge": 24,
            "bytes_up_edge_regional": 6, "bytes_down_edge_regional": 6,
            "bytes_up_regional_cloud": 2, "bytes_down_regional_cloud": 2}
    for k, v in want.items():
        assert h[k] == 2 * v * B, k
    for r in (f, h):     # the legacy columns are the sums
        assert r["bytes_up_edge_cloud"] == r["bytes_up_edge_regional"] + \
            r["bytes_up_regional_cloud"]
        assert r["bytes_down_edge_cloud"] == r["bytes_down_edge_regional"] + \
            r["bytes_down_regional_cloud"]
        levels = sum(r[f"bytes_{d}_{lv}"] for d in ("up", "down")
                     for lv in ("client_edge", "edge_regional", "regional_cloud"))
        assert levels == r["bytes_up"] + r["bytes_down"]
        assert r["bytes_edge_cloud"] == r["bytes_up_edge_cloud"] + r["bytes_down_edge_cloud"]


def test_two_levels_add_no_columns_and_other_names_do(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}], tiers=("edge",), counts=(3,))
    o = run_outputs(make_scenario(tmp_path, doc, name="a"), out=tmp_path / "a")
    assert list(o.metrics["fedavg"][0]) == METRIC_COLUMNS
    doc = _doc(tmp_path, [{"name": "fedavg"}], tiers=("mec",), counts=(3,))
    o2 = run_outputs(make_scenario(tmp_path, doc, name="b"), out=tmp_path / "b")
    r, r2 = _last(o, "fedavg"), _last(o2, "fedavg")
    assert r2["bytes_up_client_mec"] == r["bytes_up_client_edge"] == 2 * 12 * B
    assert r2["bytes_down_mec_cloud"] == r["bytes_down_edge_cloud"] == 2 * 3 * B


def test_level_names_of_graph_files_and_collisions():
    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=1.0)
    for i, (name, par) in enumerate([("edge0", "cloud"), ("mec0", "edge0"), ("mec1", "edge0")]):
        g.add_node(name, role="edge", flops=1.0, parent=par)
    for k in range(2):
        g.add_node(f"client{k}", role="client", flops=1.0, parent=f"mec{k}")
    for n, a in g.nodes(data=True):
        if "parent" in a:
            g.add_edge(n, a["parent"], latency_s=0.0, bandwidth_Bps=1.0)
            g.add_edge(a["parent"], n, latency_s=0.0, bandwidth_Bps=1.0)
    t = Topology.from_graph(g)
    assert t.tier_names == ("cloud", "edge", "mec", "client")
    # a top tier named edge over another tier: its level is not the legacy edge_cloud sum
    assert t.levels == {"client_mec": "client_edge", "mec_edge": "edge_cloud",
                        "edge_cloud_level1": "edge_cloud"}
    assert level_columns(t.levels)[-2:] == ["bytes_up_edge_cloud_level1",
                                             "bytes_down_edge_cloud_level1"]
    g = nx.relabel_nodes(g, {"mec1": "x1"})
    g.nodes["client1"]["parent"] = "x1"
    assert Topology.from_graph(g).tier_names == ("cloud", "tier1", "tier2", "client")


def test_ledger_checkpoint_round_trip():
    lg = Ledger.for_levels({"client_edge": "client_edge", "edge_regional": "edge_cloud",
                            "regional_cloud": "edge_cloud"})
    lg.add("client_edge", "up", 3.0)
    lg.add("edge_regional", "up", 5.0)
    lg.add("regional_cloud", "down", 7.0)
    lg.wasted = 1.0
    back = Ledger.for_levels(lg.levels)
    back.restore(lg.as_list())
    assert back.level_row() == lg.level_row() and back.up == lg.up and back.down == lg.down
    assert back.up == {"client_edge": 3.0, "edge_cloud": 5.0} and back.wasted == 1.0
    old = Ledger.for_levels(lg.levels)
    old.restore(lg.as_list()[:5])         # a checkpoint written before levels were counted
    assert old.up == lg.up and old.level_up["edge_regional"] == 0.0
    assert lg.level_row()["bytes_down_regional_cloud"] == pytest.approx(7.0)


def test_report_of_a_four_level_tree_has_a_column_and_a_figure_per_level(tmp_path):
    from hierfl.report import write_report

    doc = _doc(tmp_path, [{"name": "fedavg"}])
    run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    out = tmp_path / "out"
    md = open(write_report(str(out))).read()
    table = md.split("## Time and bytes to accuracy")[1].split("\n\n")[1].splitlines()
    head = [c.strip() for c in table[0].strip("|").split("|")]
    row = [c.strip() for c in table[2].strip("|").split("|")]
    cols = ["bytes client-edge", "bytes edge-regional", "bytes regional-cloud"]
    assert "bytes edge-cloud" not in head
    # two rounds, both directions: (12 + 12), (12 + 6), (12 + 2) models of 4 B
    assert [row[head.index(c)] for c in cols] == ["192 B", "144 B", "112 B"]
    assert (out / "bytes_per_level.png").is_file() and (out / "accuracy_vs_bytes_level.png") \
        .is_file()
    assert not (out / "bytes_per_tier.png").exists() and "bytes_per_level.png" in md


def test_level_columns_follow_each_row_past_a_personalised_algorithm(tmp_path):
    """A personalised algorithm has two table rows: the rows after it kept their own level
    bytes (they took the next algorithm's, and the last row was lost)."""
    from hierfl.report import write_report

    doc = _doc(tmp_path, [{"name": "fedavg"}, {"name": "ditto"},
                          {"name": "hierfavg", "edge_rounds": 2}])
    run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    out = tmp_path / "out"
    md = open(write_report(str(out))).read()
    table = md.split("## Time and bytes to accuracy")[1].split("\n\n")[1].splitlines()
    head = [c.strip() for c in table[0].strip("|").split("|")]
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")]
                              for line in table[2:])}
    assert list(rows) == ["fedavg", "ditto", "ditto (personalised)", "hierfavg"]
    col = head.index("bytes client-edge")
    # two rounds, both directions, 4 B a model: 12 + 12 a round flat, 24 + 24 for HierFAVG
    assert [rows[k][col] for k in rows] == ["192 B", "192 B", "192 B", "384 B"]


def test_pause_and_resume_keeps_the_levels_and_the_unstable_flag(tmp_path):
    """A checkpoint carries the per-level bytes, and the instability rule continues from the
    rows already written: metrics.csv byte-identical to an uninterrupted run."""
    from hierfl import load, run_scenario

    # lr 0.9 on x = 1, 2: a loss that rises round after round (flagged from round 3)
    doc = _doc(tmp_path, [{"name": "fedavg"}])
    doc["train"].update(rounds=6, checkpoint_every=1)
    doc["train"]["local"]["lr"] = 0.9
    path = make_scenario(tmp_path, doc)
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    assert run_scenario(sc, progress=False, stop_after=4)["fedavg"].paused_at == 4
    run_scenario(sc, progress=False, resume=True)
    ref = (tmp_path / "ref" / "fedavg" / "metrics.csv").read_text()
    assert (tmp_path / "cut" / "fedavg" / "metrics.csv").read_text() == ref
    assert "bytes_up_regional_cloud" in ref.splitlines()[0]
    rows = ref.splitlines()[1:]
    flags = [r.split(",")[METRIC_COLUMNS.index("unstable")] for r in rows]
    assert flags[3:] == ["1"] * 4 and flags[:3] == ["0"] * 3


def test_level_figure_of_runs_of_other_depths_warns_nothing(tmp_path):
    """compare of a 2-tier and a 3-tier run: a level one run lacks printed numpy's
    "Mean of empty slice" on the console."""
    import warnings
    from hierfl.outputs import Series
    from hierfl.report.plots.levels import level_bytes_figure
    from hierfl.report.stats import Group
    flat = Group("a/fedavg", [Series("fedavg", [{"round": 1, "bytes_up_client_edge": 8.0,
                                                 "bytes_down_client_edge": 8.0}])], "fedavg")
    deep = Group("b/fedavg", [Series("fedavg", [{"round": 1, "bytes_up_client_edge": 8.0,
                                                 "bytes_down_client_edge": 8.0,
                                                 "bytes_up_edge_region": 4.0,
                                                 "bytes_down_edge_region": 4.0}])], "fedavg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert level_bytes_figure([flat, deep], {"a/fedavg": "C0", "b/fedavg": "C1"},
                                  ["client_edge", "edge_region"], str(tmp_path / "l.png"))


def test_level_accuracy_legend_names_every_curve(tmp_path):
    """compare of a 2-tier and a 3-tier run: the legend, taken from the last panel alone,
    named only the runs that have that level (the others' curves had no label)."""
    from hierfl.outputs import Series
    from hierfl.report.plots.levels import level_accuracy_figure
    from hierfl.report.stats import Group
    rows = [{"round": 0, "test_acc": 0.1, "bytes_up_client_edge": 0.0,
             "bytes_down_client_edge": 0.0},
            {"round": 1, "test_acc": 0.5, "bytes_up_client_edge": 8.0,
             "bytes_down_client_edge": 8.0}]
    flat = Group("a/fedavg", [Series("fedavg", rows)], "fedavg")
    deep_rows = [dict(r, bytes_up_edge_region=r["bytes_up_client_edge"] / 2,
                      bytes_down_edge_region=r["bytes_down_client_edge"] / 2) for r in rows]
    deep = Group("b/fedavg", [Series("fedavg", deep_rows)], "fedavg")
    path = level_accuracy_figure([flat, deep], {"a/fedavg": "C0", "b/fedavg": "C1"},
                                 ["client_edge", "edge_region"], str(tmp_path / "l.png"))
    svg = open(path[:-4] + ".svg").read()
    assert "a/fedavg" in svg and "b/fedavg" in svg
