"""Scale (issue 19): the topology built as arrays is the graph it used to be, checked the same
way; multi-tier HierFAVG rounds in closed form equal the event loop; the per-client state guard
refuses before allocating, naming the size; the city-scale scenario is not fingerprinted."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import yaml

import golden
from hierfl.algorithms.registry import REGISTRY
from hierfl.config.errors import ScenarioError
from hierfl.run import build_world
from hierfl.run.world import make_algorithm, state_bytes
from hierfl.scenario.load import load
from hierfl.topology.graph import Topology, build_graph, build_topology
from test_fast_paths import _assert_same, _doc, _run_both

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spec(tmp_path, topology: dict):
    doc = {"name": "t", "seed": 5, "topology": topology, "data": {"name": "synthetic",
                                                                  "dim": 3, "samples": 10},
           "model": {"name": "logreg"}, "train": {"clients_per_round": 2},
           "algorithms": [{"name": "fedavg"}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load(str(path), out=str(tmp_path / "out"))


MIXED = {"profiles": {"devices": {"slow": {"compute_flops": 1e8}},
                      "links": {"lte": {"latency_s": 0.2, "uplink_Bps": 1e5,
                                        "downlink_Bps": {"dist": "uniform", "low": 1e5,
                                                         "high": 1e6}}}},
         "tiers": [{"name": "district", "count": 3, "assignment": "random",
                    "compute_flops": {"dist": "uniform", "low": 1e9, "high": 2e9},
                    "link": {"latency_s": 0.01, "bandwidth_Bps": 1e8}},
                   {"name": "edge", "count": 7, "assignment": "random",
                    "link": {"latency_s": {"dist": "uniform", "low": 0.0, "high": 0.1},
                             "bandwidth_Bps": 1e7}}],
         "clients": {"count": 40, "assignment": "random",
                     "compute_flops": {"dist": "lognormal", "median": 1e9, "sigma": 0.5},
                     "link": {"latency_s": 0.05, "bandwidth_Bps": 2e6},
                     "mix": [{"fraction": 0.25, "device": "slow"},
                             {"fraction": 0.25, "link": "lte"}, {"fraction": 0.5}]}}


def test_arrays_and_graph_give_the_same_topology(tmp_path):
    """Every view the simulator and the outputs read is the same whether the topology comes
    from the arrays or from its networkx graph (random assignments leave some edges without
    clients; a client mix gives classes)."""
    sc = _spec(tmp_path, MIXED)
    fast = build_topology(sc.topology, sc.seed, sc.topology_file)
    assert "_graph" not in fast.__dict__                # not built until asked
    assert "_parent" not in fast.__dict__               # nor the parents' map
    slow = Topology.from_graph(build_graph(sc.topology, sc.seed, sc.topology_file))
    for f in ("clients", "edges", "parent", "n_tiers", "tier_names", "device_class",
              "link_class"):
        assert getattr(fast, f) == getattr(slow, f), f
    assert {n: fast.children[n] for n in slow.children} == slow.children
    assert {n: fast.depth[n] for n in slow.depth} == slow.depth     # clients' looked up
    assert {n: fast.depth.get(n) for n in slow.depth} == slow.depth
    assert fast.depth.get("client999") is None and fast.children.get("nowhere", 5) == 5
    assert fast.depth.get("client07") is None and fast.depth.get("client") is None
    assert fast.children["client7"] == () and fast.depth.get(7) is None
    with pytest.raises(KeyError):
        fast.depth["client40"]
    assert np.array_equal(fast.edge_of, slow.edge_of)
    assert np.array_equal(fast.client_flops, slow.client_flops)
    assert fast.node_table() == slow.node_table()
    fu, su = fast.leaves_under(), slow.leaves_under()
    assert fu.keys() == su.keys() and all(np.array_equal(fu[k], su[k]) for k in fu)
    assert len(fu["cloud"]) == 40 and sum(len(fu[e]) for e in fast.edges) == 40
    for a, b, attrs in slow.graph.edges(data=True):
        assert fast.link(a, b) == (attrs["latency_s"], attrs["bandwidth_Bps"])
    assert set(fast.device_class) == {"slow", ""} and fast.device_class.count("slow") == 10
    g = fast.graph                                       # the lazily built view
    assert list(g.nodes(data=True)) == list(slow.graph.nodes(data=True))
    assert list(g.edges(data=True)) == list(slow.graph.edges(data=True))
    with pytest.raises(KeyError):
        fast.link("client0", "cloud")                   # not a link of the tree


def test_bad_drawn_values_give_the_graph_checks_problems(tmp_path):
    """A spec drawing values the graph check refuses (an absurd sigma overflows to inf):
    the same problems, in the same order, from the arrays as from the graph."""
    topo = {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e8}},
            "clients": {"count": 6, "compute_flops": {"dist": "lognormal", "median": 1e9,
                                                      "sigma": 400.0},
                        "link": {"latency_s": 0.05, "bandwidth_Bps": 2e6}}}
    sc = _spec(tmp_path, topo)
    with pytest.raises(ScenarioError) as fast:
        build_topology(sc.topology, sc.seed, "t.yaml")
    with pytest.raises(ScenarioError) as slow:
        Topology.from_graph(build_graph(sc.topology, sc.seed), "t.yaml")
    got = [(p.key, p.message) for p in fast.value.problems]
    assert got == [(p.key, p.message) for p in slow.value.problems]
    assert got and all(k.startswith("nodes.client") and k.endswith(".flops") for k, _ in got)


def test_multi_tier_hierfavg_rounds_in_closed_form_equal_the_event_loop(tmp_path):
    """HierFAVG with a number of rounds per tier (tier_rounds [2, 3]: regions run 2 rounds
    over their edges, edges 3 over their clients) on heterogeneous devices with stragglers:
    every round in closed form, trace, clients and metrics byte-identical to the events."""
    doc = _doc(False, [{"name": "hierfavg", "tier_rounds": [2, 3]},
                       {"name": "hierfavg", "label": "flat_top", "tier_rounds": [1, 2]}],
               stragglers={"fraction": 0.3})
    doc["train"]["rounds"] = 3
    out = _run_both(tmp_path, doc)
    _assert_same(out, 3)
    assert all(runs["auto"][1] == 3 for runs in out.values())
    aggregates = [r for r in out["hierfavg"]["auto"][0]["trace.csv"].splitlines()
                  if ",regional0,aggregate," in r]
    assert len(aggregates) == 3 * 2                     # 2 regional rounds per cloud round


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_state_size_is_known_before_allocating(tmp_path, name):
    """state_bytes (from inits for 1 and 2 clients) is exactly the bytes the algorithm's
    state takes for the scenario's clients."""
    doc = _doc(False, [{"name": name}])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load(str(path), out=str(tmp_path / "out"))
    world = build_world(sc)
    algo = make_algorithm(sc, sc.algorithms[0], world)
    tensors = {t.data_ptr(): t.numel() * t.element_size() for t in algo.state.tensors().values()}
    assert state_bytes(sc, sc.algorithms[0], world) == sum(tensors.values())


def test_state_over_budget_is_refused_naming_its_size(tmp_path):
    doc = _doc(False, [{"name": "fedavg"}, {"name": "scaffold"}])
    doc["train"]["max_state_gb"] = 1e-6             # 1 kB: FedAvg's model fits, SCAFFOLD's not
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load(str(path), out=str(tmp_path / "out"))
    with pytest.raises(ScenarioError) as exc:
        build_world(sc)
    (p,) = exc.value.problems
    p_params = 3 * 5 + 3                            # logreg 5 -> 3
    # w, server c, 16 clients' c (float32): (1 + 1 + 16) x 18 x 4 bytes
    assert p.key == "algorithms[1].name" and p.value == "scaffold"
    assert f"16 clients x {p_params} parameters needs {18 * p_params * 4 / 1e9:.3g} GB" \
        in p.message and "train.max_state_gb = 1e-06" in p.message


def test_state_is_the_state_guards_alone(tmp_path, capsys):
    """20,000 clients x an MLP of 355,010 parameters: FedAvg keeps one model, SCAFFOLD and
    FedDyn a tensor per client (28.4 GB each). The older resource guard charged every algorithm
    three per-client copies (79 GiB) and refused even FedAvg, whatever train.max_state_gb said;
    now the per-algorithm state guard decides, and max_state_gb is the budget."""
    from hierfl.cli import main

    doc = {"name": "wide", "seed": 0,
           "topology": {"edges": {"count": 100}, "clients": {"count": 20_000}},
           "data": {"name": "synthetic", "dim": 60, "classes": 10, "samples": 20},
           "model": {"name": "mlp", "hidden": [5000]},  # 60*5000+5000 + 5000*10+10 = 355010
           "train": {"rounds": 1, "clients_per_round": 10, "max_state_gb": 1000,
                     "local": {"steps": 1}},
           "algorithms": [{"name": "fedavg"}, {"name": "scaffold"}, {"name": "feddyn"}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    doc["train"]["max_state_gb"] = 10
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "algorithms[1].name = 'scaffold'" in err and "needs 28.4 GB" in err
    assert "algorithms[2].name = 'feddyn'" in err     # every one over the budget is named
    assert "resource guard" not in err


def test_city_scale_is_shipped_but_not_fingerprinted():
    path = os.path.join(ROOT, "scenarios", "city_scale.yaml")
    assert golden.golden_skip(path) and not golden.needs_data(path)
    assert "scenarios/city_scale.yaml" not in golden.shipped()
    assert "scenarios/quickstart.yaml" in golden.shipped()
    sc = load(path, out="/tmp/unused")
    assert sc.topology.clients.count == 1_000_000 and sc.train.clients_per_round == 10_000
    assert [a.name for a in sc.algorithms] == ["fedavg", "hierfavg"]
    assert len(sc.topology.tier_list) == 2 and sc.train.rounds == 10
