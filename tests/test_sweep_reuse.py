"""An algorithm unaffected by a grid key runs once per distinct scenario it reads: FedAvg does
not read HierFAVG's edge_rounds, so a grid over it runs FedAvg at the first point only and copies
its folder to the others; the copies are byte for byte what a full rerun writes."""
from __future__ import annotations

import csv
import glob
import os

from hierfl import sweep as sw
from hierfl.scenario.load import load
from hierfl.sweep.reuse import entry_key, owners

from test_sweep import BASE, TOPOLOGY  # the same tiny system and base scenario


def _sweep(tmp_path, grid: str, out: str, reuse: bool = True) -> str:
    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    (tmp_path / "base.yaml").write_text(BASE)
    f = tmp_path / f"{out}.yaml"
    f.write_text("base: base.yaml\ngrid:\n" + "".join(f"  {line}\n" for line in grid.splitlines())
                 + f"output: {out}\npoint_reports: false\nreuse: {str(reuse).lower()}\n")
    return str(f)


def _scenario(tmp_path, text: str):
    p = tmp_path / "one.yaml"
    (tmp_path / "topo.yaml").write_text(TOPOLOGY)
    p.write_text(text)
    return load(str(p), out=str(tmp_path / "o"))


def test_entry_keys_follow_what_each_algorithm_reads(tmp_path):
    a = _scenario(tmp_path, BASE)
    b = _scenario(tmp_path, BASE.replace("edge_rounds: 2", "edge_rounds: 3"))
    assert entry_key(a, 0) == entry_key(b, 0)          # fedavg does not read edge_rounds
    assert entry_key(a, 1) != entry_key(b, 1)
    c = _scenario(tmp_path, BASE.replace("train:\n", "train:\n  edge_round: {policy: deadline_drop, "
                                         "deadline_s: 5.0}\n"))
    assert entry_key(a, 0) == entry_key(c, 0)          # the edge tier's policy: flat unread
    assert entry_key(a, 1) != entry_key(c, 1)
    d = _scenario(tmp_path, BASE.replace("seed: 3", "seed: 4"))
    assert entry_key(a, 0) != entry_key(d, 0) and entry_key(a, 1) != entry_key(d, 1)
    e = _scenario(tmp_path, BASE.replace("output: ignored", "output: elsewhere\n"
                                         "report: {target_accuracy: 0.5}"))
    assert entry_key(a, 0) == entry_key(e, 0)          # output and report change no number


LOCATION = ("file", "output", "topology_file")     # where the point ran, not what it computed


def _files(folder: str) -> dict[str, object]:
    """Every file of a point folder (summary.json without the keys naming its location; not
    DONE and run.json, which hold wall-clock times)."""
    import json
    out: dict[str, object] = {}
    for root, _, names in os.walk(folder):
        for n in names:
            full = os.path.join(root, n)
            rel = os.path.relpath(full, folder)
            if rel in ("DONE", "run.json"):
                continue
            data = open(full, "rb").read()
            if rel == "summary.json":
                d = json.loads(data)
                d["scenario"] = {k: v for k, v in d["scenario"].items() if k not in LOCATION}
                data = d
            out[rel] = data
    return out


def test_borrowing_point_runs_only_its_own_algorithms_and_equals_a_full_run(tmp_path,
                                                                             monkeypatch):
    """In process, counting runs: point 2 borrows fedavg from point 1 and runs hierfavg only;
    its folder is file for file what running both algorithms there writes."""
    import hierfl.run as run_pkg
    s = sw.load_sweep(_sweep(tmp_path, "algorithms[1].edge_rounds: [1, 2]", "count"))
    p0, p1 = s.points
    assert owners(s.points) == {p0.name: {}, p1.name: {"fedavg": p0.name}}
    calls: list[str] = []
    real = run_pkg.run_algorithm

    def counting(sc, entry, *a, **kw):
        calls.append(entry.label)
        return real(sc, entry, *a, **kw)
    monkeypatch.setattr(run_pkg, "run_algorithm", counting)
    monkeypatch.setattr("hierfl.run.runner.run_algorithm", counting)
    sw.execute_point(p0.text, str(tmp_path / "p0"), False)
    sw.execute_point(p1.text, str(tmp_path / "full"), False)
    assert calls == ["fedavg", "hierfavg"] * 2
    calls.clear()
    blob = sw.reuse.zip_tree(str(tmp_path / "p0" / "fedavg"))
    info = sw.execute_point(p1.text, str(tmp_path / "p1"), True, (),
                            {"fedavg": (p0.name, blob)})
    assert calls == ["hierfavg"] and info["reused"] == {"fedavg": p0.name}
    a, b = _files(str(tmp_path / "p1")), _files(str(tmp_path / "full"))
    assert {k for k in a if not k.startswith(("report", "table", "metrics_all"))
            and not k.endswith((".png", ".svg"))} == set(b)
    for name in b:
        assert a[name] == b[name], name
    assert "fedavg/final_params.npz" in b and "fedavg/metrics.csv" in b


def test_sweep_runs_the_unaffected_algorithm_once(tmp_path):
    grid = "algorithms[1].edge_rounds: [1, 2]"
    f = _sweep(tmp_path, grid, "reuse")
    s = sw.load_sweep(f)
    p0, p1 = s.points
    assert sw.run_sweep(s, "local", workers=1, progress=False) == {}
    import json
    reused = [json.loads(open(os.path.join(s.output, p.name, sw.DONE)).read())["reused"]
              for p in s.points]
    assert reused == [{}, {"fedavg": p0.name}]
    a, b = (_files(os.path.join(s.output, p.name, "fedavg")) for p in (p0, p1))
    assert a == b and a
    with open(os.path.join(s.output, "points.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["algorithm"], r["ran_at"]) for r in rows] == [
        ("fedavg", p0.name), ("hierfavg", p0.name), ("fedavg", p0.name), ("hierfavg", p1.name)]
    md = open(os.path.join(s.output, "sweep.md")).read()
    assert "ran once per distinct scenario" in md and "3 algorithm runs for 4" in md
    # the sweep command again: nothing to run; --tensorboard logs every point's algorithms
    from hierfl.outputs.tensorboard import read_events
    assert sw.main(f, workers=1, progress=False, tensorboard=str(tmp_path / "tb")) == 0
    logs = sorted(os.path.relpath(os.path.dirname(p), tmp_path / "tb") for p in
                  glob.glob(str(tmp_path / "tb" / "*" / "*" / "events.out.tfevents.*")))
    assert logs == [os.path.join(p.name, lb) for p in (p0, p1) for lb in ("fedavg", "hierfavg")]
    ev = read_events(glob.glob(str(tmp_path / "tb" / p1.name / "fedavg" / "events*"))[0])
    assert any(t == "by_round/test_acc" for e in ev for t, _ in e["scalars"])
    off = sw.load_sweep(_sweep(tmp_path, grid, "full", reuse=False))
    assert not off.reuse
