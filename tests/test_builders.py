"""The shared builders of tests/conftest.py do what the converted tests rely on."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import hierfl
from conftest import DEFAULT_SCENARIO, DROP, TraceBuilder, assert_trace, make_scenario, scenario_doc


def test_overrides_replace_leaves_or_whole_values_and_leave_the_default_alone():
    doc = scenario_doc(seed=7, train__local__lr=0.5, **{"topology.edges.count": 3,
                                                         "train.clients_per_round": DROP,
                                                         "stragglers.fraction": 0.25})
    assert doc["seed"] == 7 and doc["train"]["local"] == {"steps": 2, "batch_size": "full",
                                                          "lr": 0.5}
    assert doc["topology"] == {"edges": {"count": 3}, "clients": {"count": 4}}
    assert "clients_per_round" not in doc["train"] and doc["stragglers"] == {"fraction": 0.25}
    assert DEFAULT_SCENARIO["train"]["local"]["lr"] == 0.1          # a deep copy was changed
    assert DEFAULT_SCENARIO["train"]["clients_per_round"] == "all"
    whole = scenario_doc(doc, train={"rounds": 1})
    assert whole["train"] == {"rounds": 1} and doc["train"]["rounds"] == 2


def test_clients_become_an_npz_the_loader_reads(tmp_path):
    clients = [(np.arange(6.0).reshape(3, 2), [0, 1, 2]), (np.ones((2, 2)), [2, 0])]
    path = make_scenario(tmp_path, name="n", clients=clients, labels=True,
                         topology={"edges": {"count": 1}, "clients": {"count": 2}})
    doc = yaml.safe_load(open(path))
    assert doc["name"] == "n" and doc["data"] == {"name": "npz", "path": "n.npz"}
    with np.load(tmp_path / "n.npz") as z:
        assert sorted(z.files) == ["x_0", "x_1", "x_test_0", "x_test_1",
                                   "y_0", "y_1", "y_test_0", "y_test_1"]
        assert z["y_1"].dtype == np.int64 and z["x_0"].dtype == np.float64
        np.testing.assert_array_equal(z["x_test_0"], z["x_0"])
    world = hierfl.build_world(hierfl.load(path))
    assert world.data.counts.tolist() == [3, 2]


def test_assert_trace_takes_ties_in_any_order_but_not_other_events():
    t = TraceBuilder(4)
    want = [t.send(0.0, "cloud", "edge0"), t.send(0.0, "cloud", "edge1"),
            t.recv(1.5, "edge0", "cloud"), t.compute_start(1.5, "client0", 2)]
    assert_trace([want[1], want[0], want[3], want[2]], want)
    with pytest.raises(AssertionError):
        assert_trace([want[0], want[1], t.recv(1.5, "edge1", "cloud"), want[3]], want)
    with pytest.raises(AssertionError):
        assert_trace([want[2], want[0], want[1], want[3]], want)        # time went backwards
    with pytest.raises(AssertionError):
        assert_trace(want[:3] + [(1.5 + 1e-6, "client0", "compute_start", "", 2)], want)
