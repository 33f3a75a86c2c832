"""Energy (issue 18): each client's joules per aggregation round from its seconds and the powers
of its device and link profiles (sim/energy.py), in clients.csv; the round's total in
metrics.csv; bad powers are validation errors. Hand-computed on a two-client system whose
seconds are known: 4-byte models (linear, one feature, no bias) over 1,000 B/s down and
500 B/s up links."""
from __future__ import annotations

import contextlib
import io
import math

import pytest
import yaml

from hierfl.cli import main

from conftest import make_scenario, run_outputs, write_npz

B = 4.0                         # bytes of one model
DOWN, UP = 1000.0, 500.0        # the clients' link bandwidths, B/s
LAT = 0.01
P = {"power_w": 3.0, "idle_w": 0.5, "tx_w": 2.0, "rx_w": 1.25}


def _doc(tmp_path, algorithms, powers=True, mix=False, timing="auto", **topo):
    npz = write_npz(tmp_path / "d.npz", [([[1.0], [2.0]], [1.0, 2.0]),
                                         ([[1.0], [3.0], [2.0]], [1.0, 2.0, 2.5])],
                    tests="train")
    link = {"latency_s": LAT, "uplink_Bps": UP, "downlink_Bps": DOWN}
    clients = {"count": 2, "compute_flops": {"dist": "choice", "choices": [1e3, 3e3]},
               "link": dict(link)}
    profiles = {}
    if powers and mix:        # the first share as a profile pair, the second the defaults
        profiles = {"devices": {"phone": {"compute_flops": 1e3, "power_w": P["power_w"],
                                          "idle_w": P["idle_w"]}},
                    "links": {"lte": {**link, "tx_w": P["tx_w"], "rx_w": P["rx_w"]}}}
        clients["mix"] = [{"fraction": 0.5, "device": "phone", "link": "lte"},
                          {"fraction": 0.5}]
    elif powers:
        clients.update(power_w=P["power_w"], idle_w=P["idle_w"])
        clients["link"].update(tx_w=P["tx_w"], rx_w=P["rx_w"])
    return {
        "name": "energy", "seed": 3,
        "topology": {"edges": {"count": 1, "link": {"latency_s": 0.02, "bandwidth_Bps": 100.0}},
                     "clients": clients, "profiles": profiles, **topo},
        "data": {"name": "npz", "path": npz},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 3, "clients_per_round": "all", "timing": timing,
                  "local": {"steps": 2, "batch_size": "full", "lr": 0.05}},
        "algorithms": algorithms,
    }


def _f(row, key):
    return float(row[key])


def _check_formula(rows, powers):
    """energy_j from the row's own seconds and the powers of its client (by id)."""
    for r in rows:
        p = powers(int(r["client"]))
        want = (_f(r, "compute_s") * p["power_w"] + _f(r, "tx_s") * p["tx_w"]
                + _f(r, "download_s") * p["rx_w"] + _f(r, "idle_s") * p["idle_w"])
        assert _f(r, "energy_j") == pytest.approx(want, rel=1e-12, abs=1e-15)


def _check_totals(metrics, clients):
    total = 0.0
    for m in metrics[1:] if metrics[0]["round"] == "0" else metrics:
        t = int(m["round"])
        mine = [_f(r, "energy_j") for r in clients if int(r["round"]) == t]
        assert _f(m, "energy_j") == pytest.approx(math.fsum(mine), rel=1e-12)
        total += _f(m, "energy_j")
        assert _f(m, "energy_total_j") == pytest.approx(total, rel=1e-12)


def test_flat_round_energy_by_hand(tmp_path):
    o = run_outputs(make_scenario(tmp_path, _doc(tmp_path, [{"name": "fedavg"}])))
    rows, metrics = o.clients["fedavg"], o.metrics["fedavg"]
    assert len(rows) == 6
    times = {int(m["round"]): _f(m, "sim_time_s") for m in metrics}
    for r in rows:
        t = int(r["round"])
        assert _f(r, "download_s") == B / DOWN            # the model's bytes / the downlink
        assert _f(r, "tx_s") == B / UP                    # the upload's bytes / the uplink
        span = times[t] - times.get(t - 1, 0.0)           # the cloud round: open to close
        idle = span - B / DOWN - _f(r, "compute_s") - B / UP
        assert _f(r, "idle_s") == pytest.approx(max(idle, 0.0), abs=1e-12)
        want = (_f(r, "compute_s") * 3.0 + B / UP * 2.0 + B / DOWN * 1.25
                + max(idle, 0.0) * 0.5)
        assert _f(r, "energy_j") == pytest.approx(want, rel=1e-12)
    # both wait for the same close: what one computes longer, it idles less
    a, b = (r for r in rows if r["round"] == "1")
    assert _f(a, "compute_s") != _f(b, "compute_s")
    assert _f(a, "idle_s") - _f(b, "idle_s") == pytest.approx(
        _f(b, "compute_s") - _f(a, "compute_s"), abs=1e-12)
    _check_totals(metrics, rows)
    assert _f(metrics[-1], "energy_total_j") > 0


def test_hierarchical_both_timings_agree_and_add_up(tmp_path):
    algos = [{"name": "hierfavg", "edge_rounds": 2}, {"name": "fedavg"}]
    got = {}
    for timing in ("auto", "events"):
        o = run_outputs(make_scenario(tmp_path / timing, _doc(tmp_path, algos, timing=timing)))
        rows = o.clients["hierfavg"]
        assert len(rows) == 3 * 2 * 2              # rounds x edge rounds x clients
        _check_formula(rows, lambda k: P)
        _check_totals(o.metrics["hierfavg"], rows)
        got[timing] = {la: [{k: r[k] for k in ("download_s", "tx_s", "idle_s", "energy_j")}
                            for r in o.clients[la]] for la in o.labels}
    assert got["auto"] == got["events"]            # the closed form writes the same doubles


def test_profiles_give_each_class_its_powers_and_absent_is_zero(tmp_path):
    o = run_outputs(make_scenario(tmp_path / "a", _doc(tmp_path, [{"name": "fedavg"}],
                                                       mix=True)))
    rows = o.clients["fedavg"]
    phone = {int(r["client"]) for r in rows if r["device_class"] == "phone"}
    assert len(phone) == 1
    zero = dict.fromkeys(P, 0.0)
    _check_formula(rows, lambda k: P if k in phone else zero)
    assert all(_f(r, "energy_j") == 0.0 for r in rows if int(r["client"]) not in phone)
    o = run_outputs(make_scenario(tmp_path / "b", _doc(tmp_path, [{"name": "fedavg"}],
                                                       powers=False)))
    assert {r["energy_j"] for r in o.clients["fedavg"]} == {"0.0"}
    assert {m["energy_j"] for m in o.metrics["fedavg"]} == {"0.0"}


def test_dropped_stragglers_pay_compute_and_no_upload(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}])
    doc["stragglers"] = {"fraction": 0.5}
    o = run_outputs(make_scenario(tmp_path, doc))
    rows = o.clients["fedavg"]
    strag = [r for r in rows if r["straggler"] == "1"]
    assert strag and all(r["dropped"] == "1" and _f(r, "tx_s") == 0.0 for r in strag)
    assert all(_f(r, "compute_s") > 0 and _f(r, "download_s") == B / DOWN for r in strag)
    _check_formula(rows, lambda k: P)
    _check_totals(o.metrics["fedavg"], rows)


def _validate(path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["validate", str(path)])
    return rc, err.getvalue()


@pytest.mark.parametrize("key, value, why", [
    ("clients.power_w", -1.0, "must be >= 0"),
    ("clients.link.tx_w", "lots", "expected"),
    ("clients.idle_w", 5e6, "milliwatts"),
    ("profiles.devices.phone.power_w", {"dist": "uniform", "low": -1.0, "high": 2.0},
     "uniform low must be >= 0"),
    ("edges.link.tx_w", 2.5, "clients' links only"),        # was accepted and ignored
    ("edges.link.rx_w", 1.5, "clients' links only"),
])
def test_bad_powers_are_scenario_errors(tmp_path, key, value, why):
    doc = _doc(tmp_path, [{"name": "fedavg"}], mix=True)
    topo = doc.pop("topology")
    node = topo
    *head, last = key.split(".")
    for part in head:
        node = node[part]
    node[last] = value
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(topo))
    doc["topology"] = "t.yaml"
    rc, err = _validate(make_scenario(tmp_path, doc))
    assert rc == 2 and "Traceback" not in err
    assert "t.yaml" in err and key in err and str(value if not isinstance(value, dict)
                                                  else "low")[:4] in err and why in err


def test_drawn_powers_past_the_bound_are_scenario_errors(tmp_path):
    """A distribution whose parameters pass (median 1 W) can still draw a tail past the bound:
    each drawn value is checked, naming the client (as drawn latencies and bandwidths are)."""
    doc = _doc(tmp_path, [{"name": "fedavg"}])
    clients = doc["topology"]["clients"]
    clients["count"] = 50
    doc["data"] = {"name": "synthetic", "dim": 3, "classes": 2, "samples": 10}
    doc["model"] = {"name": "logreg"}
    clients["power_w"] = {"dist": "lognormal", "median": 1.0, "sigma": 8.0}
    clients["link"]["rx_w"] = {"dist": "uniform", "low": 0.0, "high": 2.0}
    rc, err = _validate(make_scenario(tmp_path, doc))
    assert rc == 2 and "Traceback" not in err
    named = [line for line in err.splitlines() if ".power_w = " in line]
    assert named and all("must be in [0, 100000] W" in line for line in named)
    assert all(float(line.split(" = ")[1].split(":")[0]) > 1e5 for line in named)
    assert "rx_w" not in err
    clients["power_w"] = {"dist": "lognormal", "median": 1.0, "sigma": 0.5}
    rc, err = _validate(make_scenario(tmp_path, doc))
    assert rc == 0, err


def test_report_has_energy_to_target_curve_and_classes(tmp_path):
    from hierfl.report.write import write_report

    doc = _doc(tmp_path, [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}], mix=True)
    doc["train"]["eval_every"] = 1
    out = tmp_path / "out"
    o = run_outputs(make_scenario(tmp_path, doc), out=out)
    target = _f(o.metrics["fedavg"][1], "test_mse")       # fedavg reaches it at round 1
    assert target < _f(o.metrics["fedavg"][0], "test_mse")
    md = open(write_report(str(out), target=target)).read()
    html = (out / "report.html").read_text()
    assert "## Energy" in md and "Energy</h2>" in html
    assert (out / "accuracy_vs_energy.png").is_file()
    # energy to target: the cumulative energy of the first row at or below the target MSE
    for label in ("fedavg", "hierfavg"):
        first = next(m for m in o.metrics[label] if _f(m, "test_mse") <= target)
        line = next(x for x in md.splitlines() if x.startswith(f"| {label} |")
                    and "not reached" not in x and x.count("|") == 6)
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[3]) == pytest.approx(_f(first, "energy_total_j"), rel=1e-3)
        assert cells[4] == first["round"] and int(first["round"]) > 0
        assert float(cells[1]) == pytest.approx(_f(o.metrics[label][-1], "energy_total_j"),
                                                rel=1e-3)
    # the class table gains the class's energy: phone / lte pays all of it
    row = next(x for x in md.splitlines() if x.startswith("| fedavg | phone / lte |"))
    total = math.fsum(_f(r, "energy_j") for r in o.clients["fedavg"])
    assert float(row.strip("|").split("|")[-2]) == pytest.approx(total, rel=1e-3)


def test_resume_continues_the_running_total(tmp_path):
    from hierfl import load, run_scenario

    doc = _doc(tmp_path, [{"name": "fedavg"}])
    doc["train"].update(rounds=4, checkpoint_every=1)
    path = make_scenario(tmp_path, doc)
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    cut = load(path, out=str(tmp_path / "cut"))
    run_scenario(cut, progress=False, stop_after=2)
    run_scenario(cut, progress=False, resume=True)
    ref, got = ((p / "fedavg" / "metrics.csv").read_bytes() for p in (tmp_path / "ref",
                                                                       tmp_path / "cut"))
    assert got == ref and b"energy_total_j" in got


def test_failed_clients_pay_no_upload(tmp_path):
    doc = _doc(tmp_path, [{"name": "fedavg"}], failures={"crash_p": 0.5})
    doc["train"]["rounds"] = 6
    o = run_outputs(make_scenario(tmp_path, doc))
    rows = o.clients["fedavg"]
    failed = [r for r in rows if r["failed"] == "1"]
    assert failed and len(failed) < len(rows)
    assert all(_f(r, "tx_s") == 0.0 and _f(r, "download_s") == B / DOWN for r in failed)
    assert all(_f(r, "tx_s") == B / UP for r in rows if r["failed"] == "0")
    _check_formula(rows, lambda k: P)
    _check_totals(o.metrics["fedavg"], rows)


def test_graph_file_powers_are_read_and_checked(tmp_path):
    import networkx as nx

    from hierfl.config.errors import ScenarioError
    from hierfl.sim.energy import ClientPowers
    from hierfl.topology.graph import Topology

    g = nx.DiGraph()
    g.add_node("cloud", role="cloud", flops=1.0)
    g.add_node("edge0", role="edge", flops=1.0, parent="cloud")
    g.add_node("client0", role="client", flops=1.0, parent="edge0", power_w=2.0, idle_w=0.1)
    g.add_node("client1", role="client", flops=1.0, parent="edge0")
    for n in ("edge0", "client0", "client1"):
        par = g.nodes[n]["parent"]
        g.add_edge(n, par, latency_s=0.0, bandwidth_Bps=10.0)
        g.add_edge(par, n, latency_s=0.0, bandwidth_Bps=20.0)
    g.edges["client0", "edge0"].update(tx_w=1.5, rx_w=0.5)
    pw = ClientPowers.of(Topology.from_graph(g))
    assert (pw.power_w, pw.idle_w, pw.tx_w, pw.rx_w) == ([2.0, 0.0], [0.1, 0.0], [1.5, 0.0],
                                                        [0.5, 0.0])
    assert (pw.up_Bps, pw.down_Bps) == ([10.0, 10.0], [20.0, 20.0])
    g.nodes["client1"]["power_w"] = -3.0
    g.edges["client0", "edge0"]["rx_w"] = "high"
    with pytest.raises(ScenarioError) as e:
        Topology.from_graph(g, "g.json")
    msg = str(e.value)
    assert "nodes.client1.power_w = -3.0" in msg and "must be in [0, 100000] W" in msg
    assert "links.client0->edge0.rx_w = 'high'" in msg and "g.json" in msg


def test_a_failure_found_after_the_edge_closed_charges_no_upload(tmp_path):
    """client0's link is down throughout: under an asynchronous edge its jobs are abandoned
    when the edge's period ends (settled then as sending) and the lost download fails them
    afterwards, before the cloud round writes the rows. A failed row sends nothing: tx_s 0 and
    no upload energy (a fuzzer found tx_s 0.0004 and its joules on such a row)."""
    doc = {"name": "late_fail", "seed": 0,
           "topology": {"clients": {"count": 2, "link": {"bandwidth_Bps": 1e5,
                                                         "latency_s": 0.01, "tx_w": 2.0}},
                        "edges": {"count": 1, "link": {"latency_s": 0.1}},
                        "failures": {"outages": [{"start_s": 0.0, "end_s": 5.0,
                                                  "link": ["client0", "edge0"]}]}},
           "data": {"name": "synthetic", "dim": 4, "classes": 2, "samples": 20},
           "model": {"name": "logreg"},
           "train": {"rounds": 1, "clients_per_round": 2, "local": {"steps": 1},
                     "edge_round": {"policy": "fedasync"}},
           "algorithms": [{"name": "hierfavg"}]}
    out = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    rows = out.clients["hierfavg"]
    failed = [r for r in rows if r["failed"] == "1"]
    assert failed and all(float(r["tx_s"]) == 0.0 for r in failed)
    for r in failed:                    # no tx_w term: idle (0 W here) and nothing else
        assert float(r["energy_j"]) == 0.0
    assert any(float(r["tx_s"]) > 0 for r in rows if r["failed"] == "0")
