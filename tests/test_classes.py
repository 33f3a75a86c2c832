"""Device and link classes kept (issue 17, point 6): each client's profile classes in
clients.csv and summary.json, and the report's breakdown by class, checked by hand on a
one-parameter model (compute and upload times from the speeds and links)."""
from __future__ import annotations

import json

from conftest import make_scenario, run_outputs, write_npz


def _doc(tmp_path):
    npz = write_npz(tmp_path / "d.npz", [([[1.0], [2.0]], [1.0, 2.0])] * 6, tests="train")
    return {
        "name": "classes", "seed": 3,
        "topology": {
            "edges": {"count": 2},
            "clients": {"count": 6, "mix": [{"fraction": 0.5, "device": "phone", "link": "lte"},
                                            {"fraction": 0.5, "device": "laptop"}]},
            "profiles": {"devices": {"phone": {"compute_flops": 1e3},
                                     "laptop": {"compute_flops": 1e5}},
                         "links": {"lte": {"latency_s": 0.05, "bandwidth_Bps": 100}}},
        },
        "data": {"name": "npz", "path": npz},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 2, "clients_per_round": "all",
                  "local": {"steps": 1, "batch_size": "full", "lr": 0.1}},
        "algorithms": [{"name": "hierfavg", "edge_rounds": 1}],
    }


def test_classes_in_clients_csv_summary_and_report(tmp_path):
    from hierfl.report import write_report

    o = run_outputs(make_scenario(tmp_path, _doc(tmp_path)), out=tmp_path / "out")
    topo = json.load(open(tmp_path / "out" / "summary.json"))["topology"]
    dev, link = topo["device_class"], topo["link_class"]
    assert sorted(dev) == ["laptop"] * 3 + ["phone"] * 3
    assert [lk for d, lk in zip(dev, link)] == ["lte" if d == "phone" else "" for d in dev]
    assert topo["levels"] == ["client_edge", "edge_cloud"]
    rows = o.clients["hierfavg"]
    assert len(rows) == 12
    flops = dict(zip(topo["nodes"]["name"], topo["nodes"]["flops"]))
    for r in rows:
        k = int(r["client"])
        assert (r["device_class"], r["link_class"]) == (dev[k], link[k])
        # 1 step x 2 samples x 3 x 2 FLOPs = 12 FLOPs; lte: 4 B / 100 B/s + 0.05 s
        assert flops[f"client{k}"] == (1e3 if dev[k] == "phone" else 1e5)
        assert float(r["compute_s"]) == 12 / flops[f"client{k}"]
        if dev[k] == "phone":
            assert abs(float(r["upload_s"]) - 0.09) < 1e-12
    md = open(write_report(str(tmp_path / "out"))).read()
    sec = md.split("## By device and link class")[1].split("## ")[0]
    lines = [ln for ln in sec.splitlines() if ln.startswith("| hierfavg")]
    assert lines == [
        "| hierfavg | laptop / (default) | 3 | 6 | 1.0 | 0.00012 | 3.2e-08 | 24 B | 0.0 % |",
        "| hierfavg | phone / lte | 3 | 6 | 1.0 | 0.012 | 0.09 | 24 B | 0.0 % |"]


def test_no_classes_no_section_and_empty_cells(tmp_path):
    from hierfl.report import write_report

    doc = _doc(tmp_path)
    doc["topology"] = {"edges": {"count": 2}, "clients": {"count": 6}}
    o = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    assert {(r["device_class"], r["link_class"]) for r in o.clients["hierfavg"]} == {("", "")}
    md = open(write_report(str(tmp_path / "out"))).read()
    assert "By device and link class" not in md


def test_bytes_uploaded_by_class_count_only_what_was_sent(tmp_path):
    """Half the clients straggle and HierFAVG drops them: their rows keep the coded size in
    up_bytes, but nothing was sent (tx_s 0). The class table summed those rows too (a
    reader's FedAvg with dropped stragglers showed 73.2 kB uploaded against metrics.csv's
    36.6 kB)."""
    import csv

    from hierfl.outputs.classes import read_class_totals
    doc = _doc(tmp_path)
    doc["stragglers"] = {"fraction": 0.5}          # HierFAVG drops them: they send nothing
    o = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    rows = o.clients["hierfavg"]
    dropped = [r for r in rows if r["dropped"] == "1"]
    assert dropped and all(float(r["tx_s"]) == 0 and float(r["up_bytes"]) > 0 for r in dropped)
    totals = read_class_totals([str(tmp_path / "out" / "hierfavg")])
    sent = sum(float(r["up_bytes"]) for r in rows if float(r["tx_s"]) > 0)
    assert sum(t.sums["up_bytes"] for t in totals.values()) == sent
    with open(tmp_path / "out" / "hierfavg" / "metrics.csv") as fh:
        last = list(csv.DictReader(fh))[-1]
    assert sent == float(last["bytes_up_client_edge"])
