"""Determinism, for every registered algorithm (the registry is iterated, so a new algorithm is
covered as soon as its module exists):

- same scenario + seed -> byte-identical metrics.csv and clients.csv (two separate runs);
- adding algorithms to a scenario does not change an algorithm's numbers (each algorithm alone
  vs all of them in one scenario, in either order) -- every generator is keyed by the scenario
  seed and a stable name, never by what ran before;
- client sampling is identical across algorithms (the clients of each round in clients.csv),
  and so are straggler draws and step budgets across the flat algorithms;
- a different seed does change the numbers (the comparisons above are not vacuous)."""
from __future__ import annotations

import dataclasses
import os
import typing
from collections import defaultdict

import pytest

from hierfl.algorithms.base import Algorithm
from hierfl.algorithms.registry import REGISTRY
from conftest import make_scenario, read_csv, run_outputs

NAMES = sorted(REGISTRY)

BASE = {
    "name": "det",
    "seed": 11,
    "topology": {"edges": {"count": 2},
                 "clients": {"count": 6, "assignment": "random",
                             "compute_flops": {"dist": "lognormal", "median": 1.0e6,
                                               "sigma": 0.5},
                             "link": {"latency_s": 0.01, "bandwidth_Bps": 1.0e5}}},
    "data": {"name": "synthetic", "dim": 5, "classes": 3,
             "samples": {"dist": "uniform", "low": 12, "high": 30}},
    "model": {"name": "logreg"},
    "train": {"rounds": 2, "clients_per_round": 3,
              "local": {"steps": 3, "batch_size": 5, "lr": 0.05},
              "executor": {"threads": 1}},
    "stragglers": {"fraction": 0.34},
}


def _required(cls: type) -> dict:
    """Values for Params fields without defaults (none today; keeps new algorithms covered)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if f.init and f.default is dataclasses.MISSING and \
                f.default_factory is dataclasses.MISSING:
            tp = hints[f.name]
            out[f.name] = {float: 0.1, int: 1, bool: False, str: "x"}.get(tp, 0.1)
    return out


def _entry(name: str) -> dict:
    e = {"name": name, **_required(REGISTRY[name].Params)}
    if REGISTRY[name].hierarchical and "edge_rounds" in {
            f.name for f in dataclasses.fields(REGISTRY[name].Params)}:
        e["edge_rounds"] = 2
    return e


def _run(tmp, tag: str, names: list[str], seed: int = 11) -> str:
    path = make_scenario(tmp, BASE, name=tag, seed=seed, algorithms=[_entry(n) for n in names])
    return run_outputs(path, out=os.path.join(tmp, tag)).folder


def _bytes(out: str, label: str, file: str) -> bytes:
    with open(os.path.join(out, label, file), "rb") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("det"))
    solo = {n: (_run(tmp, f"{n}-a", [n]), _run(tmp, f"{n}-b", [n])) for n in NAMES}
    together = _run(tmp, "all", NAMES)
    reverse = _run(tmp, "all-reversed", NAMES[::-1])
    other_seed = _run(tmp, "seed12", ["fedavg"], seed=12)
    return solo, together, reverse, other_seed


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_bytes(runs, name):
    solo = runs[0]
    a, b = solo[name]
    for file in ("metrics.csv", "clients.csv"):
        assert _bytes(a, name, file) == _bytes(b, name, file), file
    rows = read_csv(os.path.join(a, name, "metrics.csv"))
    assert [r["round"] for r in rows] == ["0", "1", "2"]


@pytest.mark.parametrize("name", NAMES)
def test_other_algorithms_do_not_change_the_numbers(runs, name):
    solo, together, reverse, _ = runs
    alone = _bytes(solo[name][0], name, "metrics.csv")
    assert _bytes(together, name, "metrics.csv") == alone
    assert _bytes(reverse, name, "metrics.csv") == alone
    assert _bytes(together, name, "clients.csv") == _bytes(solo[name][0], name, "clients.csv")


def test_a_different_seed_changes_the_numbers(runs):
    solo, _, _, other_seed = runs
    assert _bytes(other_seed, "fedavg", "metrics.csv") != \
        _bytes(solo["fedavg"][0], "fedavg", "metrics.csv")


def _clients(out: str, label: str) -> list[dict]:
    return read_csv(os.path.join(out, label, "clients.csv"))


def test_client_sampling_is_shared(runs):
    together = runs[1]
    selected = {}
    for n in NAMES:
        per_round = defaultdict(set)
        for r in _clients(together, n):
            per_round[int(r["round"])].add(int(r["client"]))
        selected[n] = dict(per_round)
    first = selected[NAMES[0]]
    assert sorted(first) == [1, 2] and all(len(v) == 3 for v in first.values())
    for n in NAMES:
        assert selected[n] == first, n


def test_straggler_draws_and_budgets_are_shared_by_flat_algorithms(runs):
    together = runs[1]
    flat = [n for n in NAMES if not REGISTRY[n].hierarchical]
    assert "fedavg" in flat

    def key(n):
        return [(r["round"], r["edge_round"], r["client"], r["straggler"], r["budget"])
                for r in _clients(together, n)]
    ref = key("fedavg")
    assert any(s == "1" for _, _, _, s, _ in ref)              # a straggler was drawn
    assert any(s == "1" and b != "3" for _, _, _, s, b in ref)  # and it lost budget
    for n in flat:
        if REGISTRY[n].round_steps is Algorithm.round_steps:
            assert key(n) == ref, n
        else:       # its own step counts (ProxSkip's coin): the straggler draws are shared
            assert [k[:4] for k in key(n)] == [k[:4] for k in ref], n
