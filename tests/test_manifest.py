"""OUT/run.json: a reused --out is refused unless --force, the report shows only the manifest's
labels in its order, a resume of the same scenario is allowed."""
from __future__ import annotations

import json
import os
import shutil

from conftest import make_scenario
from hierfl.cli import main
from hierfl.outputs import load_run
from hierfl.outputs.manifest import scenario_hash


def _two(tmp_path, name, algos, **kw):
    return make_scenario(tmp_path, name=name, algorithms=algos, **kw)


def test_reused_out_is_refused_and_force_clears_it(tmp_path, capsys):
    a = _two(tmp_path, "a", [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}])
    b = _two(tmp_path, "b", [{"name": "fedprox", "mu": 0.1}], **{"train.rounds": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    m = json.loads((out / "run.json").read_text())
    assert m["labels"] == ["fedavg", "hierfavg"] and m["finished"] is True
    assert m["scenario"] == "a" and len(m["scenario_hash"]) == 64 and m["ended"]
    assert m["versions"]["torch"] and m["versions"]["python"]
    capsys.readouterr()
    # another scenario into the same folder: refused, both named, nothing written
    assert main(["run", b, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'a'" in err and "'b'" in err and "--force" in err and "Traceback" not in err
    assert not (out / "fedprox").exists()
    assert json.loads((out / "run.json").read_text())["scenario"] == "a"
    # the same scenario again is the same run: allowed
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    # --force clears the old run's outputs, keeps other files
    (out / "notes.txt").write_text("mine")
    assert main(["run", b, "--out", str(out), "--quiet", "--force"]) == 0
    assert sorted(p for p in os.listdir(out) if (out / p).is_dir()) == ["fedprox"]
    assert (out / "notes.txt").read_text() == "mine"
    assert [s.label for s in load_run(str(out)).series] == ["fedprox"]
    report = (out / "report.md").read_text()
    assert "hierfavg" not in report


def test_a_run_of_its_own_scenario_copy_into_its_folder(tmp_path, capsys):
    """`hierfl run OUT/scenario.yaml --out OUT` copied the file onto itself: shutil's
    SameFileError, exit 1. The copy is skipped; the usual reused --out rules apply (the same
    scenario: allowed; the file is left as it was)."""
    a = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    copy = out / "scenario.yaml"
    text = copy.read_text()
    capsys.readouterr()
    assert main(["run", str(copy), "--out", str(out), "--quiet", "--no-report"]) == 0, \
        capsys.readouterr().err
    assert copy.read_text() == text
    assert json.loads((out / "run.json").read_text())["finished"] is True


def test_force_keeps_the_scenario_file_it_runs(tmp_path, capsys):
    """`hierfl run OUT/scenario.yaml --out OUT --seed 5 --force`: a different run (its seed),
    so --force clears OUT, but not the scenario file being run (it was deleted: the run then
    finished with no scenario.yaml in OUT)."""
    a = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    copy = out / "scenario.yaml"
    text = copy.read_text()
    assert main(["run", str(copy), "--out", str(out), "--seed", "5", "--force", "--quiet",
                 "--no-report"]) == 0, capsys.readouterr().err
    now = copy.read_text()                      # the scenario as run: seed 5, headed so
    assert "\nseed: 5\n" in now and now.replace("seed: 5", "seed: 0").endswith(text)
    assert json.loads((out / "run.json").read_text())["finished"] is True


def test_results_without_manifest_are_refused(tmp_path, capsys):
    a = _two(tmp_path, "a", [{"name": "fedavg"}])
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    os.unlink(out / "run.json")
    assert main(["run", a, "--out", str(out), "--quiet"]) == 2
    assert "no run.json" in capsys.readouterr().err


def test_report_reads_only_the_manifest_labels_in_its_order(tmp_path):
    a = _two(tmp_path, "a", [{"name": "hierfavg", "edge_rounds": 2}, {"name": "fedavg"}])
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    # a stale folder of another run, written later (today it would be listed last, and shown)
    shutil.copytree(out / "fedavg", out / "scaffold")
    m = json.loads((out / "run.json").read_text())
    m["labels"] = ["fedavg", "hierfavg"]          # order comes from the manifest, not summary
    (out / "run.json").write_text(json.dumps(m))
    assert [s.label for s in load_run(str(out)).series] == ["fedavg", "hierfavg"]
    assert main(["report", str(out)]) == 0
    table = (out / "table.csv").read_text()
    assert "scaffold" not in table
    assert table.index("fedavg") < table.index("hierfavg")


def test_hash_ignores_paths_not_content(tmp_path):
    import hierfl

    p = _two(tmp_path / "one", "a", [{"name": "fedavg"}])
    q = _two(tmp_path / "two", "a", [{"name": "fedavg"}])
    r = _two(tmp_path / "three", "a", [{"name": "fedavg"}], **{"train.rounds": 3})
    h = [scenario_hash(hierfl.load(x, out=str(tmp_path / f"o{i}"))) for i, x in
         enumerate((p, q, r))]
    assert h[0] == h[1] and h[0] != h[2]
    assert scenario_hash(hierfl.load(p, seed=5)) != h[0]


def test_resume_with_matching_manifest_is_allowed(tmp_path):
    a = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 4,
                                                     "train.checkpoint_every": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--stop-after", "2"]) == 0
    assert json.loads((out / "run.json").read_text())["finished"] is False
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report", "--resume"]) == 0
    assert json.loads((out / "run.json").read_text())["finished"] is True
    ref = tmp_path / "ref"        # the resumed run continued: it equals an uninterrupted one
    assert main(["run", a, "--out", str(ref), "--quiet", "--no-report"]) == 0
    assert (out / "fedavg" / "metrics.csv").read_bytes() == \
        (ref / "fedavg" / "metrics.csv").read_bytes()


def test_compare_keeps_each_runs_order(tmp_path):
    a = _two(tmp_path, "a", [{"name": "hierfavg", "edge_rounds": 2}, {"name": "fedavg"}])
    b = _two(tmp_path, "b", [{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}],
             **{"train.rounds": 1})
    ra, rb, out = tmp_path / "ra", tmp_path / "rb", tmp_path / "cmp"
    assert main(["run", a, "--out", str(ra), "--quiet", "--no-report"]) == 0
    assert main(["run", b, "--out", str(rb), "--quiet", "--no-report"]) == 0
    assert main(["compare", str(ra), str(rb), "--out", str(out)]) == 0
    algos = []
    for line in (out / "table.csv").read_text().splitlines()[1:]:
        name = line.split(",")[0]
        if name != "*" and name not in algos:
            algos.append(name)
    assert algos == ["ra/hierfavg", "ra/fedavg", "rb/fedavg", "rb/fedprox"]


def test_settings_that_move_no_number_keep_the_scenario_hash(tmp_path, capsys):
    """--threads, the report target and the checkpoint interval do not make another scenario
    (the resume fingerprint lets them differ too); a changed learning rate does."""
    a = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    b = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1,
                                                      "train.checkpoint_every": 5,
                                                      "report.target_accuracy": 0.5})
    assert main(["run", b, "--out", str(out), "--quiet", "--no-report", "--threads", "2"]) == 0
    c = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1,
                                                      "train.local.lr": 0.5})
    capsys.readouterr()
    assert main(["run", c, "--out", str(out), "--quiet"]) == 2
    assert "--force" in capsys.readouterr().err


def test_force_clears_a_folder_holding_a_dangling_link(tmp_path, capsys):
    """--force compared OUT's entries with the scenario file it keeps: a dangling link in OUT
    (a stale `latest` link, say) made that comparison fail, exit 2."""
    a = _two(tmp_path, "a", [{"name": "fedavg"}], **{"train.rounds": 1})
    out = tmp_path / "X"
    assert main(["run", a, "--out", str(out), "--quiet", "--no-report"]) == 0
    os.symlink(tmp_path / "nowhere", out / "latest")
    assert main(["run", a, "--out", str(out), "--seed", "7", "--force", "--quiet",
                 "--no-report"]) == 0, capsys.readouterr().err
