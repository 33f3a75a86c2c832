"""Instability short of divergence (issue 17, point 5): a training loss above twice its running
minimum for three evaluations in a row is flagged in metrics.csv's `unstable` column and in the
report's notes, without stopping the run."""
from __future__ import annotations

import math

from hierfl.outputs.stability import unstable_flags, unstable_stretches

from conftest import make_scenario, run_outputs, write_npz

nan = math.nan


def test_the_rule_by_hand():
    # running min 1.0; 2.5, 3, 2.1 are high (> 2 x 1.0): flagged at the third; 1.5 is not high
    losses = [1.0, 2.5, nan, 3.0, 2.1, nan, 1.5, 3.0]
    assert unstable_flags(losses) == [0, 0, 0, 0, 1, 1, 0, 0]
    # a noisy but falling loss is never flagged; losses near zero need a real rise
    assert not any(unstable_flags([1.0, 0.5, 0.8, 0.3, 0.55, 0.2]))
    assert not any(unstable_flags([1e-5, 3e-5, 4e-5, 5e-5]))
    assert unstable_stretches([0, 1, 2, 3, 4, 5, 6, 7], unstable_flags(losses)) == [(4, 5)]
    assert unstable_stretches([0, 1, 2], [0, 1, 1]) == [(1, 2)]


def _doc(tmp_path):
    # every sample x = 1, y = 1, w0 = 0: loss (w - 1)^2 per full-batch GD step is multiplied
    # by (1 - 2 lr)^2: x4 with lr 1.5 (rising, |w| stays far below the divergence bound),
    # x0.25 with lr 0.25
    npz = write_npz(tmp_path / "d.npz", [([[1.0]] * 2, [1.0, 1.0])] * 2, tests="train")
    return {
        "name": "rise", "seed": 0,
        "topology": {"edges": {"count": 1}, "clients": {"count": 2}},
        "data": {"name": "npz", "path": npz},
        "model": {"name": "linear", "bias": False, "init": "zeros"},
        "train": {"rounds": 6, "clients_per_round": "all",
                  "local": {"steps": 1, "batch_size": "full", "lr": 0.25}},
        "algorithms": [{"name": "fedavg", "label": "healthy"},
                       {"name": "fedavg", "label": "rising", "local": {"lr": 1.5}}],
    }


def test_a_rising_loss_is_flagged_and_a_healthy_one_not(tmp_path):
    from hierfl.report import write_report

    o = run_outputs(make_scenario(tmp_path, _doc(tmp_path)), out=tmp_path / "out")
    rising = o.metrics["rising"]
    losses = [float(r["train_loss"]) for r in rising]
    assert [round(b / a, 6) for a, b in zip(losses, losses[1:])] == [4.0] * 6
    # high (> 2 x the round-0 loss) from round 1: the third high evaluation is round 3
    assert [r["unstable"] for r in rising] == ["0", "0", "0", "1", "1", "1", "1"]
    assert len(rising) == 7 and all(r["diverged"] == "0" for r in rising)   # not stopped
    assert all(r["unstable"] == "0" for r in o.metrics["healthy"])
    md = open(write_report(str(tmp_path / "out"))).read()
    notes = md.split("## Divergence and failures")[1]
    assert "rising: unstable" in notes and "rounds 3–6 (still at the end)" in notes
    assert "healthy" not in notes


def test_a_rise_between_evaluations_is_flagged_every_round(tmp_path):
    """Issue 42 item 11: evaluated every 5 rounds, the rising run is flagged at round 3 (its
    third high round, judged on round_loss: a fixed sample of the training rows between
    evaluations), not after a third high evaluation (round 15); the healthy one never is.
    Evaluated rounds keep train_loss as round_loss."""
    doc = _doc(tmp_path)
    doc["train"].update(rounds=8, eval_every=5)
    o = run_outputs(make_scenario(tmp_path, doc), out=tmp_path / "out")
    rising = o.metrics["rising"]
    losses = [float(r["round_loss"]) for r in rising]
    assert [round(b / a, 6) for a, b in zip(losses, losses[1:])] == [4.0] * 8
    assert [r["train_loss"] != "" for r in rising] == [True] + [False] * 4 + [True] + \
        [False] * 2 + [True]
    assert all(r["round_loss"] == r["train_loss"] for r in rising if r["train_loss"])
    assert [r["unstable"] for r in rising] == ["0"] * 3 + ["1"] * 6
    assert all(r["unstable"] == "0" for r in o.metrics["healthy"])
