"""The small items of issue 17: messages, refused report options, figures with nothing to show,
no files written next to the input."""
from __future__ import annotations

import os

import pytest

from conftest import make_scenario
from hierfl.cli import main
from hierfl.outputs import Series
from hierfl.report.plots.curves import per_round_panels
from hierfl.report.stats import Group

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_algorithm_without_hyperparameters_says_so(tmp_path, capsys):
    scen = make_scenario(tmp_path, algorithms=[{"name": "fedavg", "edge_rounds": 2}])
    assert main(["validate", scen]) == 2
    err = capsys.readouterr().err
    assert "fedavg has no hyperparameters" in err and "allowed: \n" not in err + "\n"


def test_validate_prints_aggregators_per_tier(tmp_path, capsys):
    scen = make_scenario(tmp_path, topology=os.path.join(ROOT, "topologies", "iot_regional.yaml"))
    assert main(["validate", scen]) == 0
    out = capsys.readouterr().out
    assert "1 cloud, 2 regional + 8 gateway (2 aggregator tiers, top first), 64 clients" in out


def test_topology_writes_nothing_without_png(tmp_path, capsys):
    topo = tmp_path / "t.yaml"
    topo.write_text("edges: {count: 2}\nclients: {count: 4}\n")
    assert main(["topology", str(topo)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["t.yaml"]
    assert "--png" in capsys.readouterr().out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("small")
    scen = make_scenario(tmp, algorithms=[{"name": "fedavg"}], **{"train.rounds": 3})
    out = tmp / "out"
    assert main(["run", scen, "--out", str(out), "--quiet"]) == 0
    return out


@pytest.mark.parametrize("opt", [["--target", "85"], ["--target", "nan"], ["--target", "-1"],
                                 ["--timeline-round", "500"], ["--timeline-round", "-7"],
                                 ["--timeline-round", "0"]])
def test_report_refuses_meaningless_options(run_dir, capsys, opt):
    assert main(["report", str(run_dir), *opt]) == 2
    err = capsys.readouterr().err
    assert opt[0] in err and "Traceback" not in err
    if opt[1] == "85":
        assert "did you mean 0.85" in err


def test_report_drops_figures_with_nothing_to_show_and_stale_ones(run_dir):
    # every client did its whole, equal budget: one dot; no stragglers, no drops
    for stale in ("timeline_gone.png", "timeline_gone.svg", "steps_vs_budget.png",
                  "stragglers.png"):
        (run_dir / stale).write_text("old")
    assert main(["report", str(run_dir), "--timeline-round", "2"]) == 0
    names = os.listdir(run_dir)
    assert "timeline_fedavg.png" in names
    for gone in ("timeline_gone.png", "timeline_gone.svg", "steps_vs_budget.png",
                 "stragglers.png"):
        assert gone not in names
    md = (run_dir / "report.md").read_text()
    assert "steps_vs_budget" not in md and "stragglers.png" not in md


def test_per_round_panels_leave_out_an_empty_panel(tmp_path):
    rows = [{"round": float(t), "stragglers": 0.0, "failed": float(t % 2)} for t in range(4)]
    g = Group("a", [Series("a", rows)], "a")
    path = per_round_panels([g], {"a": "C0"}, (("stragglers", "stragglers per round"),
                                               ("failed", "clients not aggregated per round")),
                            str(tmp_path / "s.png"), counts=True)
    svg = (tmp_path / "s.svg").read_text()
    assert path and "clients not aggregated per round" in svg
    assert "stragglers per round" not in svg
    rows = [{"round": float(t), "stragglers": 0.0, "failed": 0.0} for t in range(4)]
    assert per_round_panels([Group("a", [Series("a", rows)], "a")], {"a": "C0"},
                            (("stragglers", "s"), ("failed", "f")), str(tmp_path / "n.png"),
                            counts=True) is None


def test_run_without_report_then_report_later(tmp_path, capsys):
    path = make_scenario(tmp_path, **{"train.rounds": 1})
    out = tmp_path / "o"
    assert main(["run", path, "--out", str(out), "--quiet", "--no-report"]) == 0
    assert (out / "fedavg" / "metrics.csv").is_file() and not (out / "report.md").exists()
    assert "no report" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    # the report written later is the run's: its table holds the last evaluated accuracy
    import csv
    with open(out / "fedavg" / "metrics.csv", newline="") as fh:
        last = float(list(csv.DictReader(fh))[-1]["test_acc"])
    row = next(x for x in (out / "report.md").read_text().splitlines()
               if x.startswith("| fedavg |"))
    assert row.split("|")[2].strip() == f"{last:.3f}"


def test_topology_of_a_scenario_file_is_its_topology_with_its_seed(tmp_path, capsys):
    """`hierfl topology` of a scenario (its topology inline or in a file) prints what that
    topology file prints with the scenario's seed (it refused the scenario's other keys)."""
    path = make_scenario(tmp_path, seed=7)
    assert main(["topology", path]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got[0].endswith("(seed 7)")
    import yaml
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(yaml.safe_load(open(path))["topology"]))
    assert main(["topology", str(tmp_path / "t.yaml"), "--seed", "7"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == got[1:]


def test_topology_of_a_graph_file_is_read_as_one(tmp_path, capsys):
    """`hierfl topology net.json` (node-link JSON, or GraphML) printed five "unknown key"
    errors (its keys read as a YAML topology's): it prints what `topology: {graph: ...}`
    does."""
    import json

    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    path = make_scenario(tmp_path, seed=7)
    g = build_graph(load(path).topology, 7)
    (tmp_path / "net.json").write_text(json.dumps(nx.node_link_data(g, edges="links")))
    nx.write_graphml(g, str(tmp_path / "net.graphml"))
    assert main(["topology", path]) == 0
    want = capsys.readouterr().out.splitlines()[1:]
    for f in ("net.json", "net.graphml"):
        assert main(["topology", str(tmp_path / f)]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.splitlines()[1:] == want


def test_resume_with_nothing_to_resume_says_so(tmp_path, capsys):
    path = make_scenario(tmp_path, **{"train.rounds": 1})
    out = tmp_path / "o"
    assert main(["run", path, "--out", str(out), "--no-report", "--resume"]) == 0
    assert f"--resume: no earlier run in {out}; running from the start" in \
        capsys.readouterr().err
    assert main(["run", path, "--out", str(out), "--no-report", "--resume"]) == 0
    assert "no earlier run" not in capsys.readouterr().err     # run.json is there now


def test_topology_png_of_many_clients_draws_the_tree_down_to_the_aggregators(tmp_path, capsys):
    """Above 300 clients `topology --png` draws what the report draws at scale (each bottom
    aggregator's clients as one marker, their count in the title), a PNG only, its size and
    cost independent of the clients (it drew every client: 18 s and 833 MB at 200,000)."""
    import matplotlib.image as mpimg
    sizes = []
    for n in (400, 4000):
        topo = tmp_path / f"t{n}.yaml"
        topo.write_text(f"edges: {{count: 8}}\nclients: {{count: {n}}}\n")
        png = tmp_path / f"t{n}.png"
        assert main(["topology", str(topo), "--png", str(png)]) == 0
        out = capsys.readouterr().out
        assert "the tree down to the aggregators" in out
        assert not (tmp_path / f"t{n}.svg").exists()
        sizes.append(mpimg.imread(str(png)).shape)
    assert sizes[0] == sizes[1]


def test_a_link_listed_twice_in_a_graph_file_is_refused(tmp_path, capsys):
    """node-link JSON with one link twice: networkx kept the last one's attributes, silently
    (a reader's second client1 -> edge0 link of 5 s replaced the first of 0.1 s)."""
    import json

    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    data = nx.node_link_data(g, edges="links")
    data["links"].append(dict(data["links"][-1], latency_s=5.0))
    (tmp_path / "net.json").write_text(json.dumps(data))
    assert main(["topology", str(tmp_path / "net.json")]) == 2
    err = capsys.readouterr().err
    last = data["links"][-1]
    assert f"net.json: links.{last['source']}->{last['target']} = 'twice'" in err


def test_a_node_listed_twice_in_a_graph_file_is_refused(tmp_path, capsys):
    """node-link JSON with one node twice: networkx kept the last one's attributes, silently
    (a second client0 of 1e6 FLOP/s replaced the first one's speed)."""
    import json

    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    data = nx.node_link_data(g, edges="links")
    twice = next(n for n in data["nodes"] if n.get("role") == "client")
    data["nodes"].append(dict(twice, flops=1e6))
    (tmp_path / "net.json").write_text(json.dumps(data))
    assert main(["topology", str(tmp_path / "net.json")]) == 2
    err = capsys.readouterr().err
    assert f"net.json: nodes.{twice['id']} = 'twice': a node is listed twice" in err


@pytest.mark.parametrize("what", ["node", "link"])
def test_a_node_or_link_listed_twice_in_graphml_is_refused(tmp_path, capsys, what):
    """GraphML: networkx merged a node given twice and collapsed an edge given twice into
    its last attributes (through a multigraph), silently; refused as in node-link JSON."""
    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    nx.write_graphml(g, str(tmp_path / "net.graphml"))
    text = (tmp_path / "net.graphml").read_text()
    tag = "node" if what == "node" else "edge"
    start = text.rindex(f"<{tag} ")
    end = text.index(f"</{tag}>", start) + len(f"</{tag}>")
    twice = text[start:end]
    (tmp_path / "net.graphml").write_text(text[:end] + twice + text[end:])
    assert main(["topology", str(tmp_path / "net.graphml")]) == 2
    err = capsys.readouterr().err
    assert f"net.graphml: {what}s." in err and f"a {what} is listed twice" in err


def test_summary_json_is_strict_json_without_the_clouds_flops(tmp_path):
    """A graph file need not give the cloud's FLOP/s: summary.json wrote NaN there, which
    Python reads and strict JSON readers (jq, JavaScript) refuse. It is null now."""
    import json

    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    del g.nodes["cloud"]["flops"]
    (tmp_path / "net.json").write_text(json.dumps(nx.node_link_data(g, edges="links")))
    scen = make_scenario(tmp_path, name="onfile", **{"topology": {"graph": "net.json"},
                                                     "train.rounds": 1})
    assert main(["run", scen, "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 0

    def strict(name):
        raise ValueError(name)
    text = (tmp_path / "o" / "summary.json").read_text()
    assert json.loads(text, parse_constant=strict)["topology"]["cloud"]["flops"] is None


def test_undirected_graphml_giving_both_directions_is_refused(tmp_path, capsys):
    """In an undirected GraphML a->b and b->a are one link: networkx kept the last one's
    attributes for both directions (bandwidths 1e6 / 2e6 both read as 2e6), silently."""
    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    nx.write_graphml(g, str(tmp_path / "net.graphml"))
    text = (tmp_path / "net.graphml").read_text().replace('edgedefault="directed"',
                                                          'edgedefault="undirected"')
    (tmp_path / "net.graphml").write_text(text)
    assert main(["topology", str(tmp_path / "net.graphml")]) == 2
    assert "a link is listed twice" in capsys.readouterr().err


def test_a_graphml_edge_without_a_source_is_refused(tmp_path, capsys):
    """networkx read an <edge> without `source` as a link from a node named 'None', and the
    error then spoke of that node's role."""
    import networkx as nx
    from hierfl.scenario.load import load
    from hierfl.topology.graph import build_graph
    g = build_graph(load(make_scenario(tmp_path, seed=7)).topology, 7)
    nx.write_graphml(g, str(tmp_path / "net.graphml"))
    text = (tmp_path / "net.graphml").read_text()
    i = text.rindex("</graph>")
    (tmp_path / "net.graphml").write_text(text[:i] + '<edge target="client0"/>\n' + text[i:])
    assert main(["topology", str(tmp_path / "net.graphml")]) == 2
    assert "needs a source and a target" in capsys.readouterr().err


def test_misspelt_entry_key_lists_entry_keys_and_overrides_are_shown(tmp_path, capsys):
    """Issue 42 item 9: "allowed:" names the entry keys besides the hyperparameters, and the
    summary shows an entry's own train.local / stragglers settings."""
    scen = make_scenario(tmp_path, algorithms=[{"name": "scaffold", "lable": "s"}])
    assert main(["validate", scen]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'label'?" in err
    assert "option, server_lr" in err and "label, local, stragglers, round, compress" in err
    scen = make_scenario(tmp_path, algorithms=[{"name": "fedavg"},
                                               {"name": "fedavg", "label": "hot",
                                                "local": {"lr": 50.0}}])
    assert main(["validate", scen]) == 0
    lines = capsys.readouterr().out.splitlines()
    hot = next(x for x in lines if "algorithm hot:" in x)
    assert "overrides local: lr=50.0 (train.local: " in hot
    assert "overrides" not in next(x for x in lines if "algorithm fedavg:" in x)
