"""The closed form's array path (sim/closed_arrays.py, a flat round over cloud -> edges ->
clients) against the keyed closed form and the event loop: the same trace.csv, clients.csv
and metrics.csv, byte for byte, and the array path taken where it claims the round (or left
where a tie needs the keys)."""
from __future__ import annotations

import os

import pytest
import yaml

import hierfl.sim.closed_form as closed_form
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load


def _doc(compute, latency, edge_bw: float, edge_lat) -> dict:
    return {"name": "ca", "seed": 5,
            "topology": {"edges": {"count": 3, "link": {"latency_s": edge_lat,
                                                        "bandwidth_Bps": edge_bw}},
                         "clients": {"count": 24, "compute_flops": compute,
                                     "link": {"latency_s": latency, "bandwidth_Bps": 2e3}}},
            "data": {"name": "synthetic", "dim": 5, "classes": 3, "samples": 20},
            "model": {"name": "logreg"},
            "train": {"rounds": 5, "clients_per_round": 12,
                      "local": {"epochs": 1, "batch_size": 5, "lr": 0.05}},
            "algorithms": [{"name": "fedavg"}, {"name": "scaffold"}]}


LOGNORMAL = {"dist": "lognormal", "median": 1e6, "sigma": 0.6}
UNIFORM = {"dist": "uniform", "low": 0.01, "high": 0.1}


def _runs(tmp_path, monkeypatch, doc: dict) -> tuple[dict, int]:
    """{run: {label: files}} for the array path, the keyed closed form and the event loop;
    and how many rounds the array path timed."""
    taken = [0]
    real = closed_form.two_tier

    def counted(*a):
        got = real(*a)
        taken[0] += got is not None
        return got

    out = {}
    for run, timing, fn in (("arrays", "auto", counted), ("keys", "auto", lambda *a: None),
                            ("events", "events", real)):
        monkeypatch.setattr(closed_form, "two_tier", fn)
        doc["train"]["timing"] = timing
        path = tmp_path / f"{run}.yaml"
        path.write_text(yaml.safe_dump(doc))
        sc = load(str(path), out=str(tmp_path / run))
        world = build_world(sc)
        for entry in sc.algorithms:
            folder = os.path.join(sc.output, entry.label)
            run_algorithm(sc, entry, world, folder, progress=False)
            out.setdefault(run, {})[entry.label] = {
                f: open(os.path.join(folder, f)).read()
                for f in ("trace.csv", "clients.csv", "metrics.csv")}
    return out, taken[0]


@pytest.mark.parametrize("case,edge_bw,edge_lat,arrays", [
    ("heterogeneous", 1e9, UNIFORM, "all"),            # no ties: every round on arrays
    ("queued relays", 3e3, 0.05, "all"),               # edges arrive together, uplinks queue
    ("identical devices", 3e3, 0.05, "none"),          # ties everywhere: the keys order them
])
def test_array_path_writes_what_the_keys_and_the_event_loop_write(tmp_path, monkeypatch, case,
                                                                  edge_bw, edge_lat, arrays):
    identical = case == "identical devices"
    doc = _doc(1e6 if identical else LOGNORMAL, 0.02 if identical else UNIFORM, edge_bw,
               edge_lat)
    out, taken = _runs(tmp_path, monkeypatch, doc)
    for label in ("fedavg", "scaffold"):
        for name in ("trace.csv", "clients.csv", "metrics.csv"):
            assert out["arrays"][label][name] == out["keys"][label][name], (label, name)
            assert out["arrays"][label][name] == out["events"][label][name], (label, name)
    assert taken == (10 if arrays == "all" else 0)      # 5 rounds x 2 algorithms
    if case == "queued relays":        # the uplinks did queue: a relay sends after its recv
        lines = out["arrays"]["fedavg"]["trace.csv"].splitlines()[1:]
        sends = {line.split(",")[0] for line in lines if ",send,cloud," in line}
        recvs = {line.split(",")[0] for line in lines if line.split(",")[3].startswith("client")
                 and ",recv," in line and not line.split(",")[1].startswith("client")}
        assert sends - recvs


def test_float_cells_of_one_value_are_what_repr_writes():
    """clients.csv's float columns formatted once per column of one value (outputs/columns):
    zeros of both signs, NaN beside numbers, an int among floats and a single cell keep their
    own text."""
    from hierfl.outputs.columns import _floats

    nan = float("nan")
    for col in [(0.1 + 0.2,) * 5, (0.0,) * 4, (0.0, -0.0, 0.0), (-0.0, -0.0), (nan,) * 3,
                (nan, 1.0, nan), (2440.0, 2440, 2440.0), (1e-7,), (), (1.5, 1.5, 2.5)]:
        assert _floats(col) == [repr(v) if v == v else "" for v in col], col
