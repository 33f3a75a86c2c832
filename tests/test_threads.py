"""Outputs do not depend on --threads: every registered algorithm writes the same bytes with 1,
2 and 3 torch intra-op threads (HierFAVG's gamma once moved at 1e-8: the softmax over a strided
dimension of the full-data gradient, models/functional._softmax_1); and the report's SVGs are
byte-identical between two identical runs."""
from __future__ import annotations

import dataclasses
import os

import pytest
import torch
import yaml

from hierfl.algorithms.registry import REGISTRY
from hierfl.models.functional import _softmax_1
from hierfl.run import run_scenario
from hierfl.scenario.load import load

FILES = ("metrics.csv", "clients.csv", "trace.csv", "final_params.npz")


def _scenario(tmp_path, model):
    algos = [{"name": n, **({"edge_rounds": 2} if REGISTRY[n].hierarchical else {})}
             for n in sorted(REGISTRY)]
    doc = {"name": "threads", "seed": 4,
           "topology": {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
                        "clients": {"count": 6, "compute_flops": {"dist": "uniform", "low": 1e6,
                                                                  "high": 4e6},
                                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}}},
           "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 30, "high": 90},
                    "dim": 12, "classes": 5},
           "model": model,
           "train": {"rounds": 3, "clients_per_round": 4,
                     "local": {"steps": 4, "batch_size": 16, "lr": 0.05}},
           "algorithms": algos}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _run(path, out, threads):
    sc = load(path, out=out)
    ex = dataclasses.replace(sc.train.executor, threads=threads)
    sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    before = torch.get_num_threads()
    try:
        run_scenario(sc, progress=False)
    finally:
        torch.set_num_threads(before)
    return {(e.label, f): open(os.path.join(out, e.label, f), "rb").read()
            for e in sc.algorithms for f in FILES}


@pytest.mark.parametrize("model", [{"name": "logreg"}, {"name": "mlp", "hidden": [16]}])
def test_outputs_do_not_depend_on_threads(tmp_path, model):
    path = _scenario(tmp_path, model)
    one = _run(path, str(tmp_path / "t1"), 1)
    for n in (2, 3):
        other = _run(path, str(tmp_path / f"t{n}"), n)
        changed = sorted(k for k in one if one[k] != other[k])
        assert not changed, f"--threads {n}: {changed}"
    gam = [ln for ln in one["hierfavg", "clients.csv"].decode().splitlines()[1:]
           if ln.split(",")[9]]
    assert gam                                      # the gamma column is really compared


def test_softmax_is_the_one_thread_kernel():
    """The shapes where torch's strided softmax once depended on the thread count."""
    gen = torch.Generator().manual_seed(0)
    before = torch.get_num_threads()
    try:
        for _ in range(50):
            c, b = (int(v) for v in torch.randint(1, 200, (2,), generator=gen))
            z = torch.randn(c % 5 + 1, 3, b + 5, generator=gen)
            torch.set_num_threads(1)
            ref = torch.softmax(z, 1)
            torch.set_num_threads(2)
            assert torch.equal(_softmax_1(z), ref)
            assert torch.get_num_threads() == 2        # restored
    finally:
        torch.set_num_threads(before)


def test_svgs_are_byte_identical_between_two_runs(tmp_path):
    from hierfl.report import write_report
    doc = yaml.safe_load(open(_scenario(tmp_path, {"name": "logreg"})))
    doc["algorithms"] = [{"name": "fedavg"}, {"name": "hierfavg"}]
    doc["train"]["rounds"] = 2
    path = tmp_path / "s2.yaml"
    path.write_text(yaml.safe_dump(doc))
    svgs = []
    for out in ("a", "b"):
        sc = load(str(path), out=str(tmp_path / out))
        run_scenario(sc, progress=False)
        write_report(sc.output, sc.name, None)
        svgs.append({f: open(os.path.join(sc.output, f), "rb").read()
                     for f in sorted(os.listdir(sc.output)) if f.endswith(".svg")})
    assert svgs[0] and svgs[0] == svgs[1]
