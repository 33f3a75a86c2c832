"""The report's privacy and robustness sections (issue 43, report/protection.py): shown where a
run recorded privacy (a finite epsilon) or an attack, absent otherwise, and their numbers are
the runs' own (metrics.csv's epsilon and scores, the attackers the attack names); the settings
come from summary.json, which records each entry's privacy, rules, attack and secure
aggregation (and so the resume fingerprint sees an edit to them)."""
from __future__ import annotations

import json
import math

import pytest
import yaml

from hierfl.config.errors import ScenarioError
from hierfl.report.write import compare_runs, write_report
from hierfl.run import run_scenario
from hierfl.scenario.load import load

from conftest import PROTECT_BASE, run_outputs, scenario_doc

# 12 clients under 3 edges, 8 a round; a quarter of the clients send -4 times their update
DOC = {**PROTECT_BASE, "name": "rp", "seed": 1,
       "attack": {"kind": "scaling", "factor": -4.0, "fraction": 0.25},
       "algorithms": [
           {"name": "fedavg", "label": "clean", "attack": {"kind": "none"}},
           {"name": "fedavg", "label": "mean"},
           {"name": "hierfavg", "label": "h_rule", "edge_rounds": 2,
            "aggregate": {"edge": {"kind": "trimmed_mean", "beta": 0.25},
                          "cloud": {"kind": "median"}}},
           {"name": "fedavg", "label": "dp", "attack": {"kind": "none"},
            "privacy": {"kind": "client_level", "clip": 0.5, "noise_multiplier": 1.1}}]}
PLAIN = {"attack": None, "algorithms": [{"name": "fedavg"},
                                        {"name": "hierfavg", "edge_rounds": 2}]}


def _write(tmp_path, doc, name="s") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _table(md: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """The head and rows of the first table under `## heading`."""
    lines = md.split("\n## " + heading + "\n", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines
            if ln.startswith("|") and not ln.startswith("|---")]
    return rows[0], rows[1:]


def _f(cell: str) -> float:
    return float(cell)


@pytest.fixture(scope="module")
def protected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("protected")
    o = run_outputs(_write(tmp, scenario_doc(DOC)), out=tmp / "out")
    md = open(write_report(o.folder)).read()
    return o, md


def test_privacy_table_is_the_runs_epsilon_and_accuracy(protected):
    o, md = protected
    head, rows = _table(md, "Privacy")
    assert head == ["algorithm", "kind", "noise at", "z", "C", "δ", "final ε", "final accuracy"]
    assert [r[0] for r in rows] == ["dp"]          # the only entry with privacy
    row = dict(zip(head, rows[0]))
    assert (row["kind"], row["noise at"], row["z"], row["C"], row["δ"]) == \
        ("client_level", "cloud", "1.1", "0.5", "1e-05")
    last = o.metrics["dp"][-1]
    assert _f(row["final ε"]) == pytest.approx(float(last["epsilon"]), rel=5e-3)
    assert float(last["epsilon"]) > 0
    assert _f(row["final accuracy"]) == pytest.approx(float(last["test_acc"]), abs=5e-4)
    assert "![Test accuracy vs the privacy spent so far (ε)](accuracy_vs_epsilon.png)" in md


def test_robustness_table_is_the_runs_scores_and_attackers(protected):
    o, md = protected
    head, rows = _table(md, "Accuracy under attack")
    assert head == ["algorithm", "attack", "attackers", "edge rule", "cloud rule",
                    "final accuracy", "best accuracy"]
    by = {r[0]: dict(zip(head, r)) for r in rows}
    assert list(by) == ["clean", "mean", "h_rule"]     # not dp: privacy only
    assert [by[k]["attack"] for k in by] == ["none", "scaling (factor -4)",
                                            "scaling (factor -4)"]
    assert by["mean"]["attackers"] == "3 of 12"        # round(0.25 * 12)
    attackers = {r["client"] for r in o.clients["mean"] if r["attacker"] == "1"}
    assert len(attackers) <= 3 and attackers     # the attackers that were selected
    assert (by["mean"]["edge rule"], by["mean"]["cloud rule"]) == ("—", "mean")
    assert (by["h_rule"]["edge rule"], by["h_rule"]["cloud rule"]) == \
        ("trimmed_mean (β 0.25)", "median")
    for label, row in by.items():
        acc = [float(m["test_acc"]) for m in o.metrics[label] if m["test_acc"]]
        assert _f(row["final accuracy"]) == pytest.approx(acc[-1], abs=5e-4)
        assert _f(row["best accuracy"]) == pytest.approx(max(acc), abs=5e-4)
    assert "(accuracy_under_attack.png)" in md


def test_the_sections_are_absent_without_privacy_or_attack(tmp_path):
    """A run without privacy or attack: no section, and no figure left by an earlier report
    in the same folder."""
    path = _write(tmp_path, scenario_doc(DOC, **PLAIN))
    out = tmp_path / "out"
    o = run_outputs(path, out=out)
    assert all(m["epsilon"] == "" for m in o.metrics["fedavg"])
    (out / "accuracy_vs_epsilon.png").write_bytes(b"stale")
    md = open(write_report(str(out))).read()
    assert "## Privacy" not in md and "## Accuracy under attack" not in md
    assert "epsilon" not in md.lower() and "attacker" not in md
    html = (out / "report.html").read_text()
    assert "Privacy</h2>" not in html and "under attack</h2>" not in html
    assert not (out / "accuracy_under_attack.png").exists()


def test_a_robust_rule_without_attack_shows_no_robustness_section(tmp_path):
    doc = scenario_doc(DOC, attack=None, algorithms=DOC["algorithms"][:3],
                       **{"train.rounds": 2})
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    assert all(r["attacker"] == "" for r in o.clients["mean"])
    md = open(write_report(o.folder)).read()
    assert "## Accuracy under attack" not in md and "## Privacy" not in md


def test_summary_records_each_entrys_protections(protected):
    o, _ = protected
    entries = {a["label"]: a for a in
               json.load(open(f"{o.folder}/summary.json"))["scenario"]["algorithms"]}
    assert not any(k in entries["clean"] for k in
                   ("privacy", "aggregate", "attack", "secure_aggregation"))
    assert entries["mean"]["attack"]["kind"] == "scaling"       # the scenario's attack
    assert entries["mean"]["attack"]["fraction"] == 0.25
    assert entries["h_rule"]["aggregate"]["edge"] == {
        "kind": "trimmed_mean", "beta": 0.25, "f": None, "m": None, "iters": None, "nu": None,
        "tol": None, "tau": None, "bound": None}
    assert entries["dp"]["privacy"]["noise_multiplier"] == 1.1
    assert "attack" not in entries["dp"]


def test_a_run_that_recorded_no_attack_is_read_from_clients_csv(protected, tmp_path):
    """A summary.json without the keys (a run of a hierfl that did not record them): the
    attacked entries are found from clients.csv's attacker column."""
    import shutil

    o, _ = protected
    out = tmp_path / "copy"
    shutil.copytree(o.folder, out)
    s = json.loads((out / "summary.json").read_text())
    for a in s["scenario"]["algorithms"]:
        for k in ("privacy", "aggregate", "attack", "secure_aggregation"):
            a.pop(k, None)
    (out / "summary.json").write_text(json.dumps(s))
    md = open(write_report(str(out))).read()
    head, rows = _table(md, "Accuracy under attack")
    by = {r[0]: dict(zip(head, r)) for r in rows}
    seen = len({r["client"] for r in o.clients["mean"] if r["attacker"] == "1"})
    assert by["mean"]["attack"] == "unrecorded"
    assert by["mean"]["attackers"] == f"{seen} (clients.csv)"
    assert by["clean"]["attack"] == "none"


def test_seeds_pool_into_mean_and_std_cells(tmp_path):
    doc = scenario_doc(DOC, algorithms=DOC["algorithms"][1:2] + DOC["algorithms"][3:],
                       **{"train.rounds": 2})
    path = _write(tmp_path, doc)
    outs = []
    for seed in (1, 2):
        outs.append(run_outputs(path, out=tmp_path / f"s{seed}", seed=seed))
    md = open(compare_runs([o.folder for o in outs], str(tmp_path / "cmp"))).read()
    head, rows = _table(md, "Privacy")
    row = dict(zip(head, rows[0]))
    eps = [float(o.metrics["dp"][-1]["epsilon"]) for o in outs]
    mu, _, sd = row["final ε"].partition(" ± ")
    assert _f(mu) == pytest.approx(sum(eps) / 2, rel=5e-3)
    assert _f(sd) == pytest.approx(abs(eps[0] - eps[1]) / math.sqrt(2), rel=5e-2, abs=1e-3)
    head, rows = _table(md, "Accuracy under attack")
    acc = [float(o.metrics["mean"][-1]["test_acc"]) for o in outs]
    row = dict(zip(head, rows[0]))
    assert _f(row["final accuracy"].split(" ± ")[0]) == pytest.approx(sum(acc) / 2, abs=5e-4)


def test_resume_refuses_an_edited_privacy(tmp_path):
    """summary.json's entry carries its privacy, so the fingerprint names an edit to it."""
    doc = scenario_doc(DOC, algorithms=DOC["algorithms"][3:], **{"train.checkpoint_every": 1})
    path = _write(tmp_path, doc)
    sc = load(path, out=str(tmp_path / "out"))
    run_scenario(sc, progress=False, stop_after=2)
    doc["algorithms"][0]["privacy"]["noise_multiplier"] = 2.0
    edited = load(_write(tmp_path, doc, "edited"), out=str(tmp_path / "out"))
    with pytest.raises(ScenarioError, match=r"privacy\.noise_multiplier 1\.1 -> 2\.0"):
        run_scenario(edited, progress=False, resume=True)


def test_a_run_stopped_by_its_privacy_budget_says_so(tmp_path):
    doc = scenario_doc(DOC, attack=None, algorithms=[
        {"name": "fedavg", "label": "dp", "privacy": {
            "kind": "client_level", "clip": 0.5, "noise_multiplier": 1.0,
            "target_epsilon": 6.0}}], **{"train.rounds": 30})
    o = run_outputs(_write(tmp_path, doc), out=tmp_path / "out")
    last = o.metrics["dp"][-1]
    assert int(last["round"]) < 30 and float(last["epsilon"]) <= 6.0
    md = open(write_report(o.folder)).read()
    assert (f"dp: metrics end at round {last['round']} of 30 (the run ended there: the next "
            "round would have spent more than its privacy budget, target_epsilon 6; ε "
            f"{float(last['epsilon']):.3g} spent).") in md
