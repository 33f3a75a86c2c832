"""Issue 43 in whole runs: privacy, robust rules, attacks and secure aggregation as the round
runner applies them (exec/protect.py), against references computed outside it: dp-accounting's
epsilon, numpy's median, the mean path unchanged bit for bit, hand counts of SecAgg's bytes,
and an attack that ruins FedAvg resisted by median and Krum."""
from __future__ import annotations

import copy
import math
import os

import dp_accounting as dpa
import numpy as np
import pytest
import torch
import yaml
from dp_accounting import rdp

from hierfl.cli import main
from hierfl.run import run_scenario
from hierfl.scenario.load import load
from hierfl.secagg.cost import round_cost
from hierfl.secagg.spec import SecAggSpec

from conftest import CHECKPOINTED, PROTECT_BASE, read_csv, run_outputs, scenario_doc

BASE = PROTECT_BASE


def _write(tmp_path, doc, name="s"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _run(tmp_path, algorithms, name="s", **over):
    doc = scenario_doc(BASE, algorithms=algorithms, **over)
    return run_outputs(_write(tmp_path, doc, name), out=tmp_path / f"out_{name}")


def _columns(rows, skip=()):
    return [{k: v for k, v in r.items() if k not in skip} for r in rows]


# ----------------------------------------------------------------------------- no-ops
def test_mean_everywhere_and_no_noise_leave_the_run_as_it_was(tmp_path):
    """aggregate: mean at both tiers, and privacy with z = 0 and C = inf (n_k weights), give
    the run without the keys: every metric, every client row and the final model, bit for bit
    (epsilon is the only difference: infinite, as no noise protects anything)."""
    plain = {"name": "fedavg", "label": "plain"}
    entries = [plain,
               {**plain, "label": "means", "aggregate": {"cloud": {"kind": "mean"},
                                                        "edge": {"kind": "mean"}}},
               {**plain, "label": "nodp", "privacy": {"kind": "client_level", "clip": "inf",
                                                      "noise_multiplier": 0,
                                                      "weights": "samples"}},
               {"name": "hierfavg", "edge_rounds": 2, "label": "hplain"},
               {"name": "hierfavg", "edge_rounds": 2, "label": "hnodp",
                "privacy": {"kind": "client_level", "clip": "inf", "noise_multiplier": 0,
                            "noise_at": "edge", "weights": "samples"}}]
    o = _run(tmp_path, entries)
    for a, b in (("plain", "means"), ("plain", "nodp"), ("hplain", "hnodp")):
        assert _columns(o.metrics[a], ["epsilon"]) == _columns(o.metrics[b], ["epsilon"])
        assert o.clients[a] == o.clients[b]
        assert np.array_equal(o.final(a), o.final(b))
    assert all(r["epsilon"] == "" for r in o.metrics["plain"])
    assert [r["epsilon"] for r in o.metrics["nodp"]][1:] == ["inf"] * 4


# ----------------------------------------------------------------------------- robust rules
def test_cloud_median_equals_numpy_median_of_the_same_uploads(tmp_path, monkeypatch):
    """A whole run with the cloud's coordinate-wise median equals the same run whose combine
    is numpy's median of the update rows (the reference), round after round."""
    import hierfl.exec.protect as protect

    o = _run(tmp_path, [{"name": "fedavg", "label": "med",
                         "aggregate": {"cloud": {"kind": "median"}}}], name="a")

    def numpy_median(spec, u, w):
        return torch.from_numpy(np.median(u.double().numpy(), axis=0)).to(u.dtype)

    monkeypatch.setattr(protect, "rule_combine", numpy_median)
    ref = _run(tmp_path, [{"name": "fedavg", "label": "med",
                           "aggregate": {"cloud": {"kind": "median"}}}], name="b")
    assert np.allclose(o.final("med"), ref.final("med"), atol=1e-6, rtol=0)
    assert [r["test_acc"] for r in o.metrics["med"]] == [r["test_acc"] for r in ref.metrics["med"]]


def test_attack_ruins_fedavg_and_median_and_krum_resist(tmp_path):
    """A quarter of the clients send their update scaled by -10: FedAvg's mean falls far below
    the clean run, the median and Krum (f = 3) stay near it (numbers, not a figure). IID data,
    as the rules' guarantees assume (on label-skewed clients the median is biased too)."""
    doc = scenario_doc(BASE, **{"train.rounds": 8, "train.clients_per_round": 12,
                                "data": {"name": "synthetic_iid", "samples": 40, "dim": 6,
                                         "classes": 3},
                                "attack": {"kind": "scaling", "factor": -10, "fraction": 0.25}})
    doc["algorithms"] = [{"name": "fedavg", "label": "clean", "attack": {"kind": "none"}},
                         {"name": "fedavg", "label": "mean"},
                         {"name": "fedavg", "label": "median",
                          "aggregate": {"cloud": {"kind": "median"}}},
                         {"name": "fedavg", "label": "krum",
                          "aggregate": {"cloud": {"kind": "krum", "f": 3}}}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    acc = {la: float(o.metrics[la][-1]["test_acc"]) for la in o.labels}
    assert acc["mean"] < acc["clean"] - 0.2, acc
    for la in ("median", "krum"):
        assert acc[la] > acc["clean"] - 0.1, acc
    bad = {r["client"] for r in o.clients["mean"] if r["attacker"] == "1"}
    assert len(bad) == 3                            # round(0.25 x 12), the same every round
    assert {r["client"] for r in o.clients["krum"] if r["attacker"] == "1"} == bad
    assert all(r["attacker"] == "" for r in o.clients["clean"])


def test_label_flip_trains_attackers_on_mapped_labels_only(tmp_path):
    """label_flip changes what the attackers train on (their updates differ from the clean
    run's), not what honest clients do in the first round (their steps are their own)."""
    doc = scenario_doc(BASE, **{"train.rounds": 1,
                                "attack": {"kind": "label_flip", "clients": [0, 1, 2, 3, 4, 5,
                                                                             6, 7, 8, 9, 10, 11]}})
    doc["algorithms"] = [{"name": "fedavg", "label": "clean", "attack": {"kind": "none"}},
                         {"name": "fedavg", "label": "flip"}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    assert not np.allclose(o.final("clean"), o.final("flip"))


# ----------------------------------------------------------------------------- privacy
def test_epsilon_column_equals_dp_accounting(tmp_path):
    """DP-FedAvg at the cloud: metrics.csv's epsilon after round t is dp-accounting's RDP
    epsilon of t Poisson-subsampled Gaussians at q = 8 / 12 and z = 1.1, delta 1e-5."""
    o = _run(tmp_path, [{"name": "fedavg", "label": "dp", "privacy": {
        "kind": "client_level", "clip": 1.0, "noise_multiplier": 1.1}}])
    eps = [float(r["epsilon"]) for r in o.metrics["dp"]]
    assert eps[0] == 0.0
    for t in range(1, 5):
        acc = rdp.RdpAccountant()
        acc.compose(dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(8 / 12, dpa.GaussianDpEvent(1.1)), t))
        assert eps[t] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert eps == sorted(eps)


def test_noise_moves_the_model_by_the_configured_std(tmp_path):
    """Noise at the cloud: the difference between a noised and a noise-free run's first model
    (same clipped updates) has std z C / m over its coordinates (m = 8 clients, uniform)."""
    priv = {"kind": "client_level", "clip": 0.5}
    o = _run(tmp_path, [{"name": "fedavg", "label": "z0",
                         "privacy": {**priv, "noise_multiplier": 0}},
                        {"name": "fedavg", "label": "z4",
                         "privacy": {**priv, "noise_multiplier": 4.0}}],
             **{"train.rounds": 1, "model": {"name": "mlp", "hidden": [64]}})
    diff = o.final("z4") - o.final("z0")
    want = 4.0 * 0.5 / 8
    assert diff.std() == pytest.approx(want, rel=0.05)
    assert abs(diff.mean()) < 4 * want / math.sqrt(diff.size)


def test_target_epsilon_stops_before_the_budget_is_passed(tmp_path):
    o = _run(tmp_path, [{"name": "fedavg", "label": "dp", "privacy": {
        "kind": "client_level", "clip": 1.0, "noise_multiplier": 1.0, "target_epsilon": 8.0}}],
        **{"train.rounds": 50})
    eps = [float(r["epsilon"]) for r in o.metrics["dp"]]
    assert eps[-1] <= 8.0 and len(eps) < 51
    acc = rdp.RdpAccountant()       # one more round would have passed it
    acc.compose(dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(8 / 12, dpa.GaussianDpEvent(1.0)), len(eps)))
    assert acc.get_epsilon(1e-5) > 8.0


def test_privacy_resume_is_bit_identical(tmp_path):
    """The accountant's events and the adaptive clip are checkpointed: a paused and resumed
    run writes the uninterrupted run's files."""
    doc = copy.deepcopy(CHECKPOINTED)
    doc["algorithms"] = [{"name": "fedavg", "label": "dp", "privacy": {
        "kind": "client_level", "clip": 0.5, "noise_multiplier": 0.8,
        "adaptive": {"target_quantile": 0.5, "count_noise": 1.0}}, "attack": {"kind": "gaussian", "std": 0.1,
                                                          "fraction": 0.3}}]
    path = _write(tmp_path, doc)
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    run_scenario(sc, progress=False, stop_after=3)
    run_scenario(sc, progress=False, resume=True)
    for f in ("metrics.csv", "clients.csv", "trace.csv"):
        assert (tmp_path / "ref" / "dp" / f).read_bytes() == \
            (tmp_path / "cut" / "dp" / f).read_bytes(), f


# ----------------------------------------------------------------------------- secure agg.
def test_secagg_bytes_and_messages_by_hand(tmp_path):
    """One edge, 4 clients, HierFAVG (one edge round), SecAgg at the edge with 16-bit fields:
    every client sends its keys (2 x 32 + 4 range bytes), its 3 shares (3 x (8 + 64 + 28)),
    its masked input (ceil(P x 16 / 8)) and its 4 shares at unmasking (4 x 32); it receives the
    model (4 P), the key list (4 x (4 + 64) + 4), 3 forwarded shares and the survivors' bitmap
    (1 byte). The ledger and the trace's message count say exactly that."""
    doc = scenario_doc(BASE, **{"topology.edges.count": 1, "topology.clients.count": 4,
                                "train.clients_per_round": "all", "train.rounds": 1})
    doc["algorithms"] = [{"name": "hierfavg", "edge_rounds": 1, "label": "sa",
                          "secure_aggregation": {"bits": 16}},
                         {"name": "hierfavg", "edge_rounds": 1, "label": "plain"}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    p = o.final("sa").size
    up = (2 * 32 + 4) + 3 * (8 + 64 + 28) + math.ceil(p * 16 / 8) + 4 * 32
    down = 4 * p + (4 * (4 + 64) + 4) + 3 * (8 + 64 + 28) + 1
    sa, plain = o.metrics["sa"][-1], o.metrics["plain"][-1]
    assert float(sa["bytes_up_client_edge"]) == 4 * up
    assert float(sa["bytes_down_client_edge"]) == 4 * down
    assert float(plain["bytes_up_client_edge"]) == 4 * 4 * p
    cost = round_cost(SecAggSpec(bits=16), 4, 0, p)
    assert cost.client_sent == up and cost.client_received == down - 4 * p
    trace = read_csv(os.path.join(o.folder, "sa", "trace.csv"))
    client_sends = [r for r in trace if r["kind"] == "send" and r["node"].startswith("client")]
    edge_sends = [r for r in trace if r["kind"] == "send" and r["peer"].startswith("client")]
    assert len(client_sends) == 4 * 4          # keys, shares, masked input, unmask shares
    assert len(edge_sends) == 4 * 4            # model, key list, shares, survivor bitmap
    assert float(sa["sim_time_s"]) > float(plain["sim_time_s"])   # three more round trips


def test_secagg_with_a_dropout_by_hand(tmp_path):
    """A dropped straggler sends no masked input: the three survivors unmask it (4 shares
    each, as without the dropout: one share per holder), and the protocol's bytes are the
    survivors' alone."""
    doc = scenario_doc(BASE, **{"topology.edges.count": 1, "topology.clients.count": 4,
                                "train.clients_per_round": "all", "train.rounds": 1,
                                "stragglers": {"fraction": 0.25, "drop": "always"}})
    doc["algorithms"] = [{"name": "hierfavg", "edge_rounds": 1, "label": "sa",
                          "secure_aggregation": {"bits": 16}}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    p = o.final("sa").size
    dropped = [r for r in o.clients["sa"] if r["dropped"] == "1"]
    assert len(dropped) == 1
    cost = round_cost(SecAggSpec(bits=16), 4, 1, p)
    # the survivors' key agreement, masked input and unmasking; the dropped one sent nothing
    up = 3 * ((2 * 32 + 4) + 3 * (8 + 64 + 28) + math.ceil(p * 16 / 8) + 4 * 32)
    assert cost.unmask.client_sent == 4 * 32
    assert float(o.metrics["sa"][-1]["bytes_up_client_edge"]) == up


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("entry, key, words", [
    ({"name": "scaffold", "aggregate": {"cloud": {"kind": "median"}}}, "algorithms[0].aggregate",
     "aggregates its own way"),
    ({"name": "fedavg", "aggregate": {"edge": {"kind": "median"}}},
     "algorithms[0].aggregate.edge.kind", "flat"),
    ({"name": "hierfavg", "privacy": {"kind": "client_level", "clip": 1, "noise_multiplier": 1,
                                      "noise_at": "cloud"}},
     "algorithms[0].privacy.noise_at", "hierarchical"),
    ({"name": "fedavg", "privacy": {"kind": "client_level", "clip": 1, "noise_multiplier": 1,
                                    "noise_at": "edge"}},
     "algorithms[0].privacy.noise_at", "edge_preaggregate"),
    ({"name": "hierfavg", "aggregate": {"edge": {"kind": "median"}},
      "secure_aggregation": {"at": "edge"}}, "algorithms[0].secure_aggregation.at",
     "hides"),
    ({"name": "fedavg", "round": {"policy": "fedasync"},
      "aggregate": {"cloud": {"kind": "median"}}}, "algorithms[0].aggregate", "asynchronous"),
    ({"name": "fedavg", "aggregate": {"cloud": {"kind": "krum"}}},
     "algorithms[0].aggregate.cloud", "needs f"),
])
def test_meaningless_combinations_are_refused(tmp_path, capsys, entry, key, words):
    path = _write(tmp_path, scenario_doc(BASE, algorithms=[entry]))
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert key in err and words in err and "Traceback" not in err, err


def test_krum_with_too_few_clients_per_round_is_refused(tmp_path, capsys):
    path = _write(tmp_path, scenario_doc(BASE, algorithms=[
        {"name": "fedavg", "aggregate": {"cloud": {"kind": "krum", "f": 3}}}]))
    assert main(["validate", path]) == 2          # 8 clients per round: Krum needs > 8
    err = capsys.readouterr().err
    assert "algorithms[0].aggregate.cloud" in err and "2f + 2 = 8" in err, err


def test_validate_names_each_entrys_protections_and_its_attackers(tmp_path, capsys):
    doc = scenario_doc(BASE, attack={"kind": "sign_flip", "clients": [2, 7]})
    doc["algorithms"] = [{"name": "fedavg", "aggregate": {"cloud": {"kind": "median"}}},
                         {"name": "fedavg", "label": "dp", "attack": {"kind": "none"},
                          "privacy": {"kind": "client_level", "clip": 1.0,
                                      "noise_multiplier": 1.0}}]
    assert main(["validate", _write(tmp_path, doc)]) == 0
    out = capsys.readouterr().out
    fedavg, dp = [ln for ln in out.splitlines() if ln.startswith("  algorithm ")]
    assert "aggregate {cloud={kind='median'}" in fedavg and "2 attacker(s) [2, 7]" in fedavg
    assert "noise_at='cloud'" in dp and "attack" not in dp


def test_dp_sgd_run_accounts_the_worst_client(tmp_path):
    """sample_level: epsilon after each round is the RDP epsilon of the most DP-SGD steps any
    client took at the largest q = B / n_k (Poisson), here 4 steps a round at q = 8 / 32 (40
    samples, a fifth of them the test set)."""
    o = _run(tmp_path, [{"name": "fedavg", "label": "sgd", "privacy": {
        "kind": "sample_level", "clip": 1.0, "noise_multiplier": 1.2}}],
        **{"train.clients_per_round": "all", "train.rounds": 3})
    eps = [float(r["epsilon"]) for r in o.metrics["sgd"]]
    steps = {}
    for r in o.clients["sgd"]:
        steps[r["client"]] = steps.get(r["client"], 0) + int(r["steps"])
    assert max(steps.values()) == 12
    for t in range(1, 4):
        acc = rdp.RdpAccountant()
        acc.compose(dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(8 / 32, dpa.GaussianDpEvent(1.2)), 4 * t))
        assert eps[t] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)


def test_dp_sgd_is_refused_where_it_bounds_nothing(tmp_path, capsys):
    doc = scenario_doc(BASE, algorithms=[{"name": "fedavg", "privacy": {
        "kind": "sample_level", "clip": 1.0, "noise_multiplier": 1.0}}],
        model={"name": "cnn", "channels": [2], "dense": 4, "batch_norm": True},
        data={"name": "digits", "test_fraction": 0.2})
    assert main(["run", _write(tmp_path, doc), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "algorithms[0].privacy.kind" in err and "BatchNorm" in err and "Traceback" not in err
    doc = scenario_doc(BASE, algorithms=[{"name": "scaffold", "privacy": {
        "kind": "sample_level", "clip": 1.0, "noise_multiplier": 1.0}}])
    assert main(["validate", _write(tmp_path, doc, "b")]) == 2
    assert "algorithms[0].privacy" in capsys.readouterr().err


@pytest.mark.parametrize("attack, key, words", [
    ({"kind": "sign_flip", "clients": [2, 99]}, "attack.clients", "ids 0..11"),
    ({"kind": "label_flip", "fraction": 0.5, "mapping": [0, 1]}, "attack", "3 classes"),
])
def test_an_attack_that_does_not_fit_is_named(tmp_path, capsys, attack, key, words):
    path = _write(tmp_path, scenario_doc(BASE, attack=attack))
    assert main(["run", path, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f": {key}" in err and words in err and "Traceback" not in err, err


def test_noise_beside_a_robust_rule_at_one_tier_is_refused(tmp_path, capsys):
    """The noise is calibrated to the mean's sensitivity; a median there has another."""
    path = _write(tmp_path, scenario_doc(BASE, algorithms=[
        {"name": "fedavg", "aggregate": {"cloud": {"kind": "median"}},
         "privacy": {"kind": "client_level", "clip": 1, "noise_multiplier": 1}}]))
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert "algorithms[0].aggregate.cloud.kind" in err and "sensitivity" in err, err


def test_secagg_at_the_cloud_sums_in_the_field_even_where_edges_pre_aggregate(tmp_path):
    """A flat algorithm's cloud unmasks the sum of every masked input: with 8-bit fields the
    model differs from the plain run's, pre-aggregating edges or not (they relay)."""
    doc = scenario_doc(BASE, **{"train.edge_preaggregate": True, "train.rounds": 2})
    doc["algorithms"] = [{"name": "fedavg", "label": "plain"},
                         {"name": "fedavg", "label": "sa8",
                          "secure_aggregation": {"at": "cloud", "bits": 8}}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "o")
    gap = np.abs(o.final("sa8") - o.final("plain")).max()
    assert 0 < gap < 0.5


def test_secagg_round_trips_are_radio_seconds(tmp_path):
    """The protocol's messages are charged as sending and receiving (tx_s, download_s), not
    idle: with SecAgg each client's tx_s is its masked input plus its keys and shares over its
    link's bandwidth."""
    doc = scenario_doc(BASE, **{"topology.edges.count": 1, "topology.clients.count": 4,
                                "topology.clients.link.tx_w": 2.0,
                                "topology.clients.link.rx_w": 1.0,
                                "train.clients_per_round": "all", "train.rounds": 1})
    doc["algorithms"] = [{"name": "hierfavg", "edge_rounds": 1, "label": "sa",
                          "secure_aggregation": {"bits": 16}}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "o")
    p = o.final("sa").size
    up = (2 * 32 + 4) + 3 * (8 + 64 + 28) + math.ceil(p * 16 / 8) + 4 * 32
    for r in o.clients["sa"]:
        assert float(r["tx_s"]) == pytest.approx(up / 1e5, rel=1e-12)


def test_attackers_by_device_class(tmp_path, capsys):
    """attack.device_class: the clients of that class attack (all, or a fraction of them),
    recorded in clients.csv; a class no client has is named before the run."""
    topo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "topologies", "mobile_edge_small.yaml")
    doc = scenario_doc(BASE, topology=topo, **{"train.rounds": 1, "train.clients_per_round":
                                               "all"})
    doc["algorithms"] = [{"name": "fedavg", "label": "laptops",
                          "attack": {"kind": "sign_flip", "device_class": "laptop"}},
                         {"name": "fedavg", "label": "half",
                          "attack": {"kind": "sign_flip", "device_class": "laptop",
                                     "fraction": 0.5}}]
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "o")
    laptops = {r["client"] for r in o.clients["laptops"] if r["device_class"] == "laptop"}
    assert len(laptops) > 1
    assert {r["client"] for r in o.clients["laptops"] if r["attacker"] == "1"} == laptops
    half = {r["client"] for r in o.clients["half"] if r["attacker"] == "1"}
    assert half < laptops and len(half) == math.floor(len(laptops) / 2 + 0.5)
    doc["algorithms"] = [{"name": "fedavg", "attack": {"kind": "sign_flip",
                                                       "device_class": "tablet"}}]
    assert main(["validate", _write(tmp_path, doc, "bad")]) == 2
    err = capsys.readouterr().err
    assert "algorithms[0].attack" in err and "laptop, phone" in err and "Traceback" not in err


def test_secagg_beside_mobility_is_refused(tmp_path, capsys):
    doc = scenario_doc(BASE, algorithms=[
        {"name": "hierfavg", "edge_rounds": 1, "secure_aggregation": {"bits": 16},
         "mobility": {"kind": "markov", "handover_rate_per_s": 0.01}}])
    assert main(["run", _write(tmp_path, doc), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "mobility" in err and "secure aggregation" in err and "Traceback" not in err, err
