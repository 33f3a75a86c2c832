"""docs/scenario.md is generated from the schema and must be up to date (CI runs this), and the
generator documents a key exactly as its dataclass field says."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hierfl.cli import docs as docs_gen
from hierfl.config.fields import positive, spec
from hierfl.config.schema import Dist


def test_docs_scenario_md_is_up_to_date():
    diff = docs_gen.stale()
    assert not diff, ("docs/scenario.md is out of date with the schema; run `hierfl docs` "
                      "and commit the result:\n" + "\n".join(diff[:40]))


@dataclass(frozen=True)
class Leaf:
    speed: Dist = spec(1e9, "FLOP/s")


@dataclass(frozen=True)
class Root:
    name: str = spec(doc="a name")
    mode: Literal["a", "b"] = spec("a", "the mode")
    k: int | Literal["all"] = spec(3, "how many", check=positive)
    leaf: Leaf = spec(default_factory=Leaf, doc="one leaf")
    leaves: list[Leaf] | None = spec(None, "more leaves")
    named: dict[str, Leaf] = spec(default_factory=dict, doc="leaves by name")
    widths: list[int] = spec(default_factory=lambda: [4, 2], doc="widths")
    on: bool = spec(True, "switch")


def test_generator_rows_follow_the_dataclass_fields():
    assert docs_gen.rows(Root) == [
        ("name", "string", "**required**", "a name"),
        ("mode", "one of `a`, `b`", "`a`", "the mode"),
        ("k", "integer or `all`", "`3`", "how many"),
        ("leaf", "mapping", "(mapping)", "one leaf"),
        ("leaf.speed", "number or distribution", "`1e+09`", "FLOP/s"),
        ("leaves", "list of mapping or null", "`null`", "more leaves"),
        ("leaves[].speed", "number or distribution", "`1e+09`", "FLOP/s"),
        ("named", "mapping of name → mapping", "`{}`", "leaves by name"),
        ("named.<name>.speed", "number or distribution", "`1e+09`", "FLOP/s"),
        ("widths", "list of integer", "`[4, 2]`", "widths"),
        ("on", "boolean", "`true`", "switch"),
    ]


def test_check_exit_status(tmp_path, capsys):
    path = tmp_path / "scenario.md"
    assert docs_gen.main(check=True, path=str(path)) == 1          # missing
    assert docs_gen.main(path=str(path)) == 0                       # write
    assert docs_gen.main(check=True, path=str(path)) == 0
    text = path.read_text()
    assert "| `train.local.lr` | number | `0.01` | local learning rate |" in text
    assert "### fedavg" in text and "### hierfavg" in text
    path.write_text(text.replace("local learning rate", "a stale description"))
    capsys.readouterr()
    assert docs_gen.main(check=True, path=str(path)) == 1
    err = capsys.readouterr().err
    assert "out of date" in err and "-| `train.local.lr` | number | `0.01` | a stale" in err


def test_docs_path_under_a_file_is_named_as_one(tmp_path, capsys):
    """`hierfl docs --path afile/x.md`: a bare 'cannot read or write afile: File exists'
    before; now the option, its value, and that afile is a file, not a folder (exit 2)."""
    from hierfl.cli import main

    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["docs", "--path", str(afile / "x.md")]) == 2
    err = capsys.readouterr().err
    assert "--path = " in err and f"x.md': {afile} is a file, not a folder\n" in err, err
    assert afile.read_text() == "x"
