"""Nothing read back blindly (issue 42.2): a checkpoint rewritten with one NaN resumed with exit
0 and a different run; an output file changed inside the part a checkpoint vouches for was
continued; a damaged run.json was rewritten silently by --resume and ignored by `hierfl report`;
a text value in a metrics.csv number column was dropped without a word. Each is now exit 2
naming the file (and the array, or the line and column), with nothing rewritten. A checkpoint
of a hierfl that recorded no checksums is accepted, with a note."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
import yaml

from hierfl.cli import main
from hierfl.config.errors import ScenarioError
from hierfl.outputs import read_metrics
from hierfl.outputs.manifest import MANIFEST, read_manifest
from hierfl.run.checkpoint import CHECKSUMS
from conftest import CHECKPOINTED, scenario_doc


def _scenario(tmp_path) -> str:
    doc = scenario_doc(CHECKPOINTED, name="sealed",
                       algorithms=[{"name": "fedavg"}, {"name": "scaffold"}])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _run(path, out, *extra) -> int:
    return main(["run", path, "--out", str(out), "--no-report", "--quiet", *extra])


def _files(out) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(d, f), out): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(out) for f in fs}


def _paused(tmp_path):
    path = _scenario(tmp_path)
    out = tmp_path / "o"
    assert _run(path, out, "--stop-after", "4") == 0
    return path, out


def _rewrite_npz(f, change) -> None:
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    f.write_bytes(buf.getvalue())


def _refused(path, out, capsys, *names) -> str:
    before = _files(out)
    capsys.readouterr()
    assert _run(path, out, "--resume") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(n in err for n in names), err
    assert _files(out) == before                     # nothing rewritten, nothing cut
    return err


def test_a_checkpoint_array_changed_is_refused_naming_it(tmp_path, capsys):
    path, out = _paused(tmp_path)
    f = out / "scaffold" / "checkpoint.npz"

    def one_nan(arrays):
        k = next(k for k in sorted(arrays) if k.startswith("state/") and arrays[k].size > 1)
        arrays[k] = arrays[k].copy()
        arrays[k].reshape(-1)[0] = np.nan
    _rewrite_npz(f, one_nan)
    err = _refused(path, out, capsys, str(f), "state/")
    assert "changed after it was written" in err


@pytest.mark.parametrize("name", ["metrics.csv", "trace.csv", "clients.csv"])
def test_an_output_changed_inside_what_the_checkpoint_vouches_for_is_refused(tmp_path, capsys,
                                                                          name):
    path, out = _paused(tmp_path)
    f = out / "fedavg" / name
    data = bytearray(f.read_bytes())
    i = data.index(b"\n") + 1                        # the first row: same length, one digit
    j = next(k for k in range(i, len(data)) if chr(data[k]).isdigit())
    data[j] = ord("7") if data[j] != ord("7") else ord("8")
    f.write_bytes(bytes(data))
    _refused(path, out, capsys, str(f), "first", "sha256")


def test_a_checkpoint_without_checksums_resumes_with_a_note(tmp_path, capsys):
    """Checkpoints written before checksums were recorded are accepted, unchecked, saying so."""
    path, out = _paused(tmp_path)
    for label in ("fedavg", "scaffold"):
        def strip(arrays):
            del arrays[CHECKSUMS]
            meta = json.loads(bytes(arrays["meta"]).decode())
            del meta["outputs_sha256"]
            arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        _rewrite_npz(out / label / "checkpoint.npz", strip)
    capsys.readouterr()
    assert _run(path, out, "--resume") == 0
    err = capsys.readouterr().err
    assert "recorded no checksums" in err and "checkpoint.npz" in err, err
    assert _run(path, tmp_path / "ref") == 0
    ref = _files(tmp_path / "ref")
    got = _files(out)
    assert {k: v for k, v in got.items() if "/" in k} == {k: v for k, v in ref.items() if "/" in k}


def test_a_damaged_manifest_is_refused_by_resume_and_report(tmp_path, capsys):
    path, out = _paused(tmp_path)
    m = out / MANIFEST
    m.write_text(m.read_text()[:-5] + "x")
    err = _refused(path, out, capsys, f"{m}:", "line", "column")
    assert "not valid JSON" in err
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{m}:" in err and "column" in err and "Traceback" not in err, err
    with pytest.raises(ScenarioError):
        read_manifest(str(out))
    m.write_text("[1, 2]\n")                         # JSON, but not a manifest
    assert main(["report", str(out)]) == 2
    assert str(m) in capsys.readouterr().err
    assert _run(path, out) == 2                      # a plain run: another folder's results?
    assert "damaged" in capsys.readouterr().err
    assert _run(path, out, "--force") == 0           # --force clears it, as any stale run


def test_a_text_value_in_a_metrics_number_column_is_named(tmp_path, capsys):
    path = _scenario(tmp_path)
    out = tmp_path / "o"
    assert _run(path, out) == 0
    f = out / "scaffold" / "metrics.csv"
    lines = f.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    col = header.index("test_acc")
    cells = lines[3].rstrip("\n").split(",")
    cells[col] = "abc"
    lines[3] = ",".join(cells) + "\n"
    f.write_text("".join(lines))
    with pytest.raises(ScenarioError) as e:
        read_metrics(str(f), "scaffold")
    assert str(e.value).startswith(f"{f}:4: test_acc = 'abc': column {col + 1} ")
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:4: test_acc = 'abc'" in err and "Traceback" not in err, err
    assert main(["compare", str(out), str(out / ".."), "--out", str(tmp_path / "c")]) == 2
