"""The round runner hands the executor the clients' full local data only where something reads
it: a measured round (train.eval_every, the last), a gamma target, or a program that prepares
(SCAFFOLD option I); otherwise an empty batch of the right shape (no rows gathered)."""
from __future__ import annotations

import os

import yaml

from hierfl.exec.local import BatchedExecutor
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load


class Recording(BatchedExecutor):
    """The batched executor, noting (clients, full-batch rows) of every call."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[int, int]] = []

    def run(self, program, plan, full, budgets, *a, **k):
        self.calls.append((int(budgets.shape[0]), int(full.x.shape[1])))
        return super().run(program, plan, full, budgets, *a, **k)


def _widths(tmp_path, algorithm: dict, gamma=None) -> list[tuple[int, int]]:
    local = {"epochs": 1, "batch_size": 5, "lr": 0.05}
    if gamma is not None:
        local["gamma"] = gamma
    doc = {"name": "fb", "seed": 1,
           "topology": {"edges": {"count": 2}, "clients": {"count": 8}},
           "data": {"name": "synthetic", "dim": 4, "classes": 3, "samples": 20},
           "model": {"name": "logreg"},
           "train": {"rounds": 4, "clients_per_round": 4, "eval_every": 2, "local": local},
           "algorithms": [algorithm]}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load(str(path), out=str(tmp_path / "out"))
    world = build_world(sc)
    rec = Recording()
    entry = sc.algorithms[0]
    run_algorithm(sc, entry, world, os.path.join(sc.output, entry.label), progress=False,
                  executor=rec)
    return rec.calls


def test_full_data_only_in_measured_rounds(tmp_path):
    calls = _widths(tmp_path, {"name": "fedavg"})
    assert len(calls) == 4 and all(c == 4 for c, _ in calls)
    widths = [w for _, w in calls]            # rounds 1..4, measured: 2 and 4 (eval_every 2)
    assert widths[0] == 0 and widths[2] == 0
    assert widths[1] > 0 and widths[3] > 0


def test_full_data_every_round_for_a_preparing_program_or_a_gamma(tmp_path):
    assert all(w > 0 for _, w in _widths(tmp_path, {"name": "scaffold", "option": 1}))
    assert all(w > 0 for _, w in _widths(tmp_path / "g", {"name": "fedavg"}, gamma=0.5))
    assert _widths(tmp_path / "o2", {"name": "scaffold", "option": 2})[0][1] == 0
