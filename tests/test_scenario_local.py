"""The report's Scenario table shows each algorithm's per-algorithm `local:` overrides (the keys
of its resolved local spec that differ from train.local), and nothing for an entry without."""
from __future__ import annotations

from hierfl.report.model import summary_rows
from hierfl.report.tables import local_overrides

TRAIN_LOCAL = {"batch_size": 5, "epochs": None, "lr": 0.05, "steps": 4}


def _summary(algorithms: list[dict]) -> dict:
    return {"scenario": {"name": "t", "seed": 0, "train": {"rounds": 2, "clients_per_round": 3,
                                                           "local": TRAIN_LOCAL},
                         "algorithms": algorithms}}


def test_local_overrides_are_the_differing_keys():
    assert local_overrides({**TRAIN_LOCAL, "lr": 400.0, "steps": 2}, TRAIN_LOCAL) == \
        {"lr": 400.0, "steps": 2}
    assert local_overrides(dict(TRAIN_LOCAL), TRAIN_LOCAL) == {}
    assert local_overrides(None, TRAIN_LOCAL) == {}


def test_scenario_table_names_local_overrides():
    rows = dict(summary_rows(_summary([
        {"name": "fedavg", "label": "fedavg", "params": {}, "local": dict(TRAIN_LOCAL)},
        {"name": "pfedmac", "label": "pm", "params": {"lam": 0.001},
         "local": {**TRAIN_LOCAL, "lr": 400.0}}])))
    assert rows["algorithm fedavg"] == "fedavg"
    assert rows["algorithm pm"] == "pfedmac (lam=0.001, local={lr=400.0})"


def test_report_of_a_run_shows_overrides(tmp_path):
    from hierfl.report import write_report
    from hierfl.run import run_scenario
    from hierfl.scenario.load import load
    (tmp_path / "s.yaml").write_text(
        "name: t\nseed: 1\ntopology: {edges: {count: 1}, clients: {count: 2}}\n"
        "data: {name: synthetic, dim: 4, classes: 2}\nmodel: {name: logreg}\n"
        "train: {rounds: 1, clients_per_round: 2, local: {steps: 2, batch_size: 4, lr: 0.1}}\n"
        "algorithms:\n  - {name: fedavg}\n  - {name: fedprox, mu: 0.5, local: {lr: 0.3}}\n"
        "output: out\n")
    sc = load(str(tmp_path / "s.yaml"), out=str(tmp_path / "out"))
    run_scenario(sc, progress=False)
    md = write_report(str(tmp_path / "out"), "t")
    text = open(md if isinstance(md, str) and md.endswith(".md")
                else tmp_path / "out" / "report.md").read()
    assert "| algorithm fedprox | fedprox (mu=0.5, local={lr=0.3}) |" in text
    assert "| algorithm fedavg | fedavg |" in text
