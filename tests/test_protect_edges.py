"""Issue 43's protections on the batched edge path of a hierarchical round (exec/edges.py:
every edge of a tier round trained in one call, then each edge aggregated): each edge's
aggregation is the one RoundRunner.edge_close makes, with its own noise stream (round, edge
round, first client), an edge of one arrival included, so the batched and the per-edge paths
write the same files, a resumed run the uninterrupted one's, and the accountant composes one
event per edge round."""
from __future__ import annotations

import dataclasses

import yaml

import hierfl.exec.protect as protect
import hierfl.exec.round as round_
from hierfl.run import run_scenario
from hierfl.scenario.load import load

from conftest import scenario_doc

# 12 clients under 3 edges; 5 a round, so some edge may aggregate a single client
DOC = {"name": "pe", "seed": 2,
       "topology": {"edges": {"count": 3, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e6}},
                    "clients": {"count": 12, "compute_flops": 1e7,
                                "link": {"latency_s": 0.02, "bandwidth_Bps": 1e5}}},
       "data": {"name": "synthetic", "samples": 40, "dim": 6, "classes": 3},
       "model": {"name": "logreg"},
       "train": {"rounds": 4, "clients_per_round": 5, "checkpoint_every": 1,
                 "local": {"steps": 3, "batch_size": 8, "lr": 0.1}},
       "algorithms": [
           {"name": "hierfavg", "edge_rounds": 2, "label": "dp_edge",
            "privacy": {"kind": "client_level", "clip": 0.5, "noise_multiplier": 0.7,
                        "noise_at": "edge"}},
           {"name": "hierfavg", "edge_rounds": 2, "label": "secagg",
            "secure_aggregation": {"protocol": "secagg", "bits": 12, "range": 1.0}}]}
FILES = ("metrics.csv", "clients.csv", "trace.csv", "final_params.npz")


def _path(tmp_path) -> str:
    path = tmp_path / "pe.yaml"
    path.write_text(yaml.safe_dump(scenario_doc(DOC)))
    return str(path)


def _files(out, label):
    return {f: (out / label / f).read_bytes() for f in FILES}


def test_batched_and_per_edge_paths_and_a_resume_write_the_same_files(tmp_path, monkeypatch):
    path = _path(tmp_path)
    run_scenario(load(path, out=str(tmp_path / "batched")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    run_scenario(sc, progress=False, stop_after=2)
    run_scenario(sc, progress=False, resume=True)
    monkeypatch.setattr(round_.RoundRunner, "batches_edges", property(lambda self: False))
    run_scenario(load(path, out=str(tmp_path / "per_edge")), progress=False)
    for label in ("dp_edge", "secagg"):
        ref = _files(tmp_path / "batched", label)
        assert _files(tmp_path / "per_edge", label) == ref, label
        assert _files(tmp_path / "cut", label) == ref, label


def test_noise_at_the_edges_is_accounted_once_per_edge_round(tmp_path, monkeypatch):
    """Two edge rounds per cloud round: two events per round, each at the largest share of an
    edge's clients that aggregated (here m_e / 4 for m_e of an edge's 4 clients)."""
    steps: list[float] = []
    real = protect.Accountant.step

    def step(self, q, count=1):
        steps.extend([q] * count)
        return real(self, q, count)
    monkeypatch.setattr(protect.Accountant, "step", step)
    sc = load(_path(tmp_path), out=str(tmp_path / "out"))
    sc = dataclasses.replace(sc, algorithms=sc.algorithms[:1])
    run_scenario(sc, progress=False)
    assert len(steps) == 4 * 2
    assert all(q in (0.25, 0.5, 0.75, 1.0) for q in steps)
    assert steps[0::2] == steps[1::2]       # the same clients in both edge rounds of a round
    assert max(steps) >= 0.5                # 5 clients over 3 edges: one has 2 or more
