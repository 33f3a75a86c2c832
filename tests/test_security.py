"""Security of the inputs: YAML is read with a SafeLoader only (no Python objects, whatever the
tags say), untrusted data are never unpickled or evaluated, paths in a scenario are resolved
relative to the scenario, outputs stay inside the chosen output folder, and oversized inputs
are refused before they are read or unpacked."""
from __future__ import annotations

import ast
import contextlib
import io
import os
import pathlib

import numpy as np
import pytest

from hierfl.cli import main
from hierfl.data.real import npz_problem
from hierfl.config.errors import ScenarioError
from hierfl.config.limits import MAX_BYTES
from hierfl.config.yamldoc import read_doc

ROOT = pathlib.Path(__file__).resolve().parents[1]

GOOD = """name: sec
topology: {path}
data: {{name: npz, path: {data}}}
model: {{name: logreg}}
train: {{rounds: 1, clients_per_round: 2, local: {{steps: 1, batch_size: 4, lr: 0.1}}}}
algorithms:
  - {{name: fedavg, label: a.b}}
  - {{name: hierfavg, label: c-d_e}}
"""
TOPO = "edges: {count: 2}\nclients: {count: 3}\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _npz(path: pathlib.Path, n: int = 3) -> None:
    g = np.random.default_rng(1)
    np.savez(path, **{k: v for i in range(n) for k, v in
                      ((f"x_{i}", g.normal(size=(8, 2))), (f"y_{i}", np.arange(8) % 2))})


@pytest.mark.parametrize("payload", [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/name:os.system",
    "!!python/module:os",
])
def test_python_tags_are_refused(tmp_path, payload):
    marker = tmp_path / "pwned"
    path = tmp_path / "s.yaml"
    path.write_text(f"name: x\nseed: {payload.format(marker=marker)}\n")
    rc, _, err = cli("validate", str(path))
    assert rc == 2
    assert "invalid YAML" in err and "constructor for the tag" in err
    assert not marker.exists()


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            owner = f.value.id if isinstance(f, ast.Attribute) and \
                isinstance(f.value, ast.Name) else ""
            kw = {k.arg: k.value for k in node.keywords}
            yield node, owner, name, kw


def test_no_unsafe_deserialisation_in_the_sources():
    """Every module of the package: no eval/exec, no pickle, yaml only through the safe loader,
    np.load never with allow_pickle=True, torch.load only with weights_only=True."""
    bad = []
    for path in sorted((ROOT / "hierfl").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                if any(n.split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve")
                       for n in names):
                    bad.append(f"{path}:{node.lineno}: imports a pickle module")
        for node, owner, name, kw in _calls(tree):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if owner == "" and name in ("eval", "exec", "__import__"):
                bad.append(f"{where}: {name}()")
            if owner == "yaml" and name in ("load", "load_all", "unsafe_load", "full_load"):
                loader = kw.get("Loader")
                if name != "load" or not (isinstance(loader, ast.Name) and
                                          loader.id in ("_Loader", "SafeLoader")):
                    bad.append(f"{where}: yaml.{name} without the safe loader")
            if name == "load" and owner == "np" and isinstance(kw.get("allow_pickle"),
                                                                ast.Constant):
                if kw["allow_pickle"].value:
                    bad.append(f"{where}: np.load(allow_pickle=True)")
            if name == "load" and owner == "torch":
                w = kw.get("weights_only")
                if not (isinstance(w, ast.Constant) and w.value is True):
                    bad.append(f"{where}: torch.load without weights_only=True")
    assert bad == []


def test_paths_are_relative_to_the_scenario_and_outputs_stay_inside(tmp_path, monkeypatch):
    """Run from an unrelated working directory: the topology and npz paths resolve against
    the scenario's folder, and every file written lies under the output folder."""
    scen_dir = tmp_path / "project" / "scenarios"
    (scen_dir / "topo").mkdir(parents=True)
    (scen_dir / "topo" / "t.yaml").write_text(TOPO)
    _npz(scen_dir / "d.npz")
    (scen_dir / "s.yaml").write_text(GOOD.format(path="topo/t.yaml", data="d.npz"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    before = {p for p in tmp_path.rglob("*")}
    out = tmp_path / "out"
    rc, _, err = cli("run", str(scen_dir / "s.yaml"), "--out", str(out), "--quiet")
    assert rc == 0, err
    new = {p for p in tmp_path.rglob("*") if p not in before}
    outside = [p for p in new if out not in p.parents and p != out]
    assert outside == []
    assert (out / "a.b" / "metrics.csv").is_file() and (out / "c-d_e" / "metrics.csv").is_file()


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_device_files_are_not_read(tmp_path, target):
    """A topology or data path that is (a link to) a device is refused without being read."""
    (tmp_path / "t.yaml").symlink_to(target)
    (tmp_path / "d.npz").symlink_to(target)
    (tmp_path / "s.yaml").write_text(GOOD.format(path="t.yaml", data="d.npz"))
    rc, _, err = cli("validate", str(tmp_path / "s.yaml"))
    assert rc == 2
    assert "topology = 't.yaml': topology file is a character device, not a regular file" in err
    assert "data.path = 'd.npz': " in err and "d.npz is a character device, not a regular file" in err


def test_oversized_yaml_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as fh:        # sparse: nothing is written or read
        fh.truncate(MAX_BYTES + 1)
    with pytest.raises(ScenarioError) as exc:
        read_doc(str(path), "scenario file")
    assert f"larger than {MAX_BYTES} bytes" in str(exc.value)


def test_npz_unpacked_size_is_checked_before_loading(tmp_path):
    """A highly compressible npz (a zip bomb in miniature): its unpacked size is read from the
    zip directory and compared with the limit before any array is inflated."""
    path = tmp_path / "z.npz"
    np.savez_compressed(path, x_0=np.zeros((1000, 1000)), y_0=np.zeros(1000, np.int64))
    assert os.path.getsize(path) < 100_000                 # ~8 MB unpacked
    msg = npz_problem(str(path), limit=1_000_000)
    assert msg is not None and "unpacks to" in msg and "resource guard" in msg
    assert npz_problem(str(path), limit=100_000_000) is None


def test_npz_members_must_be_arrays(tmp_path):
    import zipfile

    path = tmp_path / "evil.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x_0.pkl", b"\x80\x04K\x01.")
    assert "not an npz file of arrays (member 'x_0.pkl')" in npz_problem(str(path), 1e9)
