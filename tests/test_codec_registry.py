"""Codecs are declared once (hierfl/compress/registry.py, one module per built-in in
hierfl/compress/codecs/): a codec declared at test time through the registry API is a
`compress:` kind like the built-ins (the loader accepts it, a run codes with it and charges its
bytes); unknown kinds are refused naming the known ones; every built-in is documented, and its
declaration imports no torch."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from hierfl.compress import compress, row_bytes
from hierfl.compress import native
from hierfl.compress.registry import CODECS, Codec, declare_codec, seeded
from hierfl.compress.spec import CodecSpec
from hierfl.config.errors import ScenarioError
from hierfl.run import run_scenario
from hierfl.scenario.load import load

from conftest import read_csv
from test_compress_run import _path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILTINS = ("fp16", "int8", "none", "qsgd", "randk", "sign", "topk")


def _half_size(spec, p):
    return 4.0 * p, "half"                  # dense: 4 bytes per entry


def _half(x, spec, draws):
    return x / 2                            # the receiver gets half of every entry


@pytest.fixture
def half():
    """The toy codec "half", declared for one test (the registry as it was afterwards)."""
    snap = CODECS.snapshot()
    declare_codec(Codec("half", _half_size, _half, summary="x / 2, dense"))
    yield
    CODECS.restore(snap)


def test_a_codec_declared_through_the_registry_codes_and_is_charged(tmp_path, half):
    x = torch.tensor([[1.0, -3.0, 0.5]])
    coded = compress(x, CodecSpec(kind="half"))
    assert coded.decoded.tolist() == [[0.5, -1.5, 0.25]] and coded.bytes.tolist() == [12.0]
    assert row_bytes(CodecSpec(kind="half"), 27) == 108.0 and not seeded("half")
    assert not native.takes(CodecSpec(kind="half"))         # the torch path codes it
    entries = [{"name": "fedavg", "label": "dense"},
               {"name": "fedavg", "label": "half", "compress": {"up": {"kind": "half"}}}]
    sc = load(_path(tmp_path, entries, rounds=2), out=str(tmp_path / "o"))
    assert sc.algorithms[1].compress.up.kind == "half"
    run_scenario(sc, progress=False)
    rows = read_csv(tmp_path / "o" / "half" / "clients.csv")
    assert rows and {r["up_bytes"] for r in rows} == {"108.0"}       # P = 27 entries x 4 B
    assert {r["encoding"] for r in rows} == {"half"} and {r["compress"] for r in rows} == {"half"}
    with np.load(tmp_path / "o" / "dense" / "final_params.npz") as a, \
            np.load(tmp_path / "o" / "half" / "final_params.npz") as b:
        assert any(not np.array_equal(a[k], b[k]) for k in a.files)  # the halves were applied


def test_a_declared_codec_takes_only_the_keys_it_reads(tmp_path, half):
    path = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "half", "k": 3}}}])
    with pytest.raises(ScenarioError, match=r"compress\.up.*ratio and k apply to randk and "
                                            r"topk, not 'half'"):
        load(path, out=str(tmp_path / "o"))
    with pytest.raises(ValueError, match="not a codec key"):
        Codec("bad", _half_size, _half, reads=("width",))


def test_unknown_kinds_are_refused_naming_the_known_ones(tmp_path, half):
    path = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "halve"}}}])
    with pytest.raises(ScenarioError) as err:
        load(path, out=str(tmp_path / "o"))
    text = str(err.value)
    assert "algorithms[0].compress.up.kind" in text and "must be one of" in text
    assert all(repr(name) in text for name in (*BUILTINS, "half"))
    assert "did you mean 'half'?" in text
    with pytest.raises(ValueError, match="must be one of"):
        CodecSpec(kind="zip")


def test_the_builtins_are_declared_documented_and_the_kernels_name_only_them():
    assert [n for n in CODECS if CODECS.is_builtin(n)] == list(BUILTINS)
    page = open(os.path.join(ROOT, "docs", "compression.md")).read()
    for name in BUILTINS:
        decl = CODECS.declaration(name)
        assert decl.summary and f"| `{name}` |" in page, name
        assert decl.origin == f"hierfl.compress.codecs.{name}"
    assert set(native.KINDS) <= set(BUILTINS)
    assert [n for n in BUILTINS if seeded(n)] == ["qsgd", "randk"]


PROBE = textwrap.dedent("""
    import sys
    from hierfl.compress.registry import CODECS, codec
    from hierfl.compress.spec import CodecSpec, CompressSpec
    for name in CODECS:
        c = codec(name)
        kw = {"levels": 4} if c.needs == (("levels",),) else {"k": 3} if c.needs else {}
        spec = CodecSpec(kind=name, **kw)
        assert c.size(spec, 650)[0] > 0
    print("torch" in sys.modules)
""")


def test_declarations_and_byte_rules_import_no_torch():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


PLUGIN = textwrap.dedent("""
    from hierfl.compress.registry import Codec, declare_codec

    def size(spec, p):
        return 4.0 * p, "half"

    def encode(x, spec, draws):
        return x / 2

    declare_codec(Codec("half", size, encode, summary="x / 2, dense"))
""")


def test_a_plugin_file_declares_a_codec(tmp_path):
    (tmp_path / "half_codec.py").write_text(PLUGIN)
    path = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "half"}}}])
    text = open(path).read() + "plugins: [half_codec.py]\n"
    open(path, "w").write(text)
    proc = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
