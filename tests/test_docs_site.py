"""Docs that cannot drift: the site builds with `mkdocs build --strict` (no broken link or
anchor, every page in the nav, nothing fetched from the network), every complete scenario and
topology shown in docs/ and README.md loads with hierfl's own loader, every `hierfl ...` command
shown parses with the real argument parser, and the generated reference pages are current.

Markers. A complete scenario in a page is a fenced block whose info string is
`yaml title="scenario"` (a topology: `yaml title="topology"`; Material shows the title as the
block's caption); a plain `yaml` block is a fragment and is not loaded. A marked block is written
into `scenarios/` of a scratch copy of the repository's layout (`topologies/` linked in), so
`../topologies/...` resolves as it would from a shipped scenario, and the data files it names
under `root:` are made up in the real formats (tests/datasets_util.py).

A command is a line in a fenced code block that starts with `hierfl `, `$ hierfl `,
`.venv/bin/hierfl ` or `python -m hierfl `, or an inline code span that starts so. Its
subcommand must exist and every `--option` must be one that subcommand takes; a code-block line
without usage notation (`[...]`, `a|b`, `...`) must also parse as it stands."""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

import pytest
import yaml

from hierfl.cli import docs as docs_gen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pages() -> list[str]:
    found = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [os.path.join(ROOT, "README.md"), *found]


@dataclass(frozen=True)
class Block:
    file: str
    line: int           # 1-based line of the opening fence
    info: str           # the info string: "yaml title=\"scenario\""
    text: str

    @property
    def where(self) -> str:
        return f"{os.path.relpath(self.file, ROOT)}:{self.line}"

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def title(self) -> str | None:
        m = re.search(r'title="([^"]*)"', self.info)
        return m.group(1) if m else None


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def blocks(path: str) -> list[Block]:
    """Every fenced code block of a Markdown file (indented fences of list items included; the
    indentation is taken off the block's lines)."""
    out: list[Block] = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence)
                                      and lines[j].strip().strip(fence[0]) == ""):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        out.append(Block(path, i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]


def marked(kind: str) -> list[Block]:
    return [b for b in all_blocks() if b.lang == "yaml" and b.title == kind]


# ------------------------------------------------------------------------------ YAML examples
SCENARIO_KEYS = {"name", "topology", "data", "model", "algorithms"}


def looks_like(doc: object) -> str | None:
    """"scenario" / "topology" for a block that is a complete one, else None."""
    if not isinstance(doc, dict):
        return None
    if SCENARIO_KEYS <= set(doc):
        return "scenario"
    if "clients" in doc and ({"edges", "tiers"} & set(doc)):
        return "topology"
    return None


def test_the_docs_mark_their_examples():
    """The markers are found (a parser that finds none would pass everything), and every
    complete scenario or topology in a plain yaml block is marked."""
    assert len(marked("scenario")) >= 5, [b.where for b in marked("scenario")]
    assert len(marked("topology")) >= 2, [b.where for b in marked("topology")]
    unmarked = []
    for b in all_blocks():
        if b.lang != "yaml" or b.title in ("scenario", "topology"):
            continue
        try:
            kind = looks_like(yaml.safe_load(b.text))
        except yaml.YAMLError:
            continue
        if kind:
            unmarked.append(f'{b.where}: a complete {kind}: mark it ```yaml title="{kind}"')
    assert not unmarked, "\n".join(unmarked)


def _make_data(doc: dict, scenario_file: str) -> None:
    """Small files in the real formats where a scenario's data set reads a `root:` folder."""
    import datasets_util

    data = doc.get("data") or {}
    if not isinstance(data, dict) or not isinstance(data.get("root"), str):
        return
    root = os.path.normpath(os.path.join(os.path.dirname(scenario_file), data["root"]))
    if data.get("name") in ("mnist", "fashion_mnist"):
        datasets_util.write_mnist(root)
    elif data.get("name") in ("cifar10", "cifar100"):
        datasets_util.write_cifar_set(root, data["name"])


def _sandbox(tmp_path) -> str:
    os.symlink(os.path.join(ROOT, "topologies"), tmp_path / "topologies")
    os.makedirs(tmp_path / "scenarios")
    return str(tmp_path / "scenarios")


def _problems(exc) -> str:
    return "\n".join(f"  {p}" for p in exc.problems)


@pytest.mark.parametrize("block", marked("scenario"), ids=lambda b: b.where)
def test_scenario_examples_load(block, tmp_path):
    from hierfl.config.errors import ScenarioError
    from hierfl.scenario.load import load

    folder = _sandbox(tmp_path)
    path = os.path.join(folder, "example.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(block.text)
    _make_data(yaml.safe_load(block.text), path)
    try:
        sc = load(path)
    except ScenarioError as exc:
        pytest.fail(f"{block.where}: the scenario shown does not load:\n{_problems(exc)}")
    assert sc.algorithms


@pytest.mark.parametrize("block", marked("topology"), ids=lambda b: b.where)
def test_topology_examples_load(block, tmp_path):
    from hierfl.config.errors import Problems, ScenarioError
    from hierfl.scenario.load import load_topology

    folder = os.path.join(_sandbox(tmp_path), "..", "topologies_shown")
    os.makedirs(folder)
    path = os.path.join(folder, "example.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(block.text)
    problems = Problems(path)
    try:
        spec, _ = load_topology(path, folder, path, problems)
        problems.raise_if_any()
    except ScenarioError as exc:
        pytest.fail(f"{block.where}: the topology shown does not load:\n{_problems(exc)}")
    assert spec is not None


# ------------------------------------------------------------------------------ commands
PREFIX = re.compile(r"^\s*(?:\$\s+)?(?:\.venv/bin/hierfl|python3? -m hierfl|hierfl)\s+(.*)$")
INLINE = re.compile(r"`((?:\.venv/bin/hierfl|python3? -m hierfl|hierfl) [^`]+)`")


@dataclass(frozen=True)
class Shown:
    where: str
    text: str           # the command after `hierfl`
    block: bool         # in a code block (else an inline code span)


def shown_commands() -> list[Shown]:
    out: list[Shown] = []
    for path in pages():
        fenced_lines: set[int] = set()
        for b in blocks(path):
            n_body = b.text.count("\n")
            fenced_lines.update(range(b.line, b.line + n_body + 2))
            if b.lang in ("yaml", "python", "toml"):
                continue
            for k, line in enumerate(b.text.split("\n")):
                m = PREFIX.match(line)
                if m:
                    out.append(Shown(f"{os.path.relpath(path, ROOT)}:{b.line + 1 + k}",
                                     m.group(1), True))
        for k, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
            if k in fenced_lines:
                continue
            for m in INLINE.finditer(line):
                cmd = PREFIX.match(m.group(1))
                if cmd:
                    out.append(Shown(f"{os.path.relpath(path, ROOT)}:{k}", cmd.group(1), False))
    return out


def _subparsers(p: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)


def command_problem(text: str, full: bool) -> str | None:
    """Why the command shown (the words after `hierfl`) is not one hierfl takes, or None."""
    from hierfl import cli

    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        return f"cannot split it into words: {exc}"
    if words in ([], ["..."]) or words[0] == "COMMAND":       # `hierfl COMMAND ...`: any
        return None
    ap = cli.parser()
    p, i = ap, 0
    while (sub := _subparsers(p)) is not None:
        if i >= len(words) or words[i] not in sub.choices:
            got = words[i] if i < len(words) else "nothing"
            return f"{got!r} is not a subcommand of `{p.prog}` ({', '.join(sub.choices)})"
        p, i = sub.choices[words[i]], i + 1
    options = {o for a in p._actions for o in a.option_strings}
    for w in words[i:]:
        for opt in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", w.strip("[]")):
            if opt.startswith("--") and opt not in options:
                return f"`{p.prog}` has no option {opt} (it has {', '.join(sorted(options))})"
    usage = any(("[" in w or "|" in w or w == "..." or w.endswith("...")) for w in words)
    if full and not usage:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                ap.parse_args(words)
            except SystemExit as exc:
                if exc.code:
                    return "the parser refuses it: " + err.getvalue().strip().splitlines()[-1]
    return None


def test_the_docs_show_commands():
    shown = shown_commands()
    assert sum(s.block for s in shown) >= 20 and sum(not s.block for s in shown) >= 20, \
        len(shown)


def test_every_command_shown_parses():
    bad = [f"{s.where}: hierfl {s.text}\n    {why}" for s in shown_commands()
           if (why := command_problem(s.text, s.block))]
    assert not bad, "commands in the docs that hierfl does not take:\n" + "\n".join(bad)


def test_the_command_check_catches_drift():
    assert command_problem("run s.yaml --no-such-option", True)
    assert command_problem("rnu s.yaml", True)
    assert command_problem("data fetch mnist --root", True)            # --root needs a value
    assert command_problem("data fetch NAME --root DIR", False) is None   # inline: options only
    assert command_problem("run s.yaml --plugin my_fl.py --plugin b.py --seed 3", True) is None
    assert command_problem("sweep s.yaml [--backend local|ray] [--workers N]", True) is None
    assert command_problem("docs --plugin my_fl.py --path my_reference.md", True) is None


# ------------------------------------------------------------------------------ generated pages
def test_generated_pages_are_current():
    stale = docs_gen.stale_pages()
    assert not stale, ("generated docs pages are out of date; run `hierfl docs` and commit them:\n"
                       + "\n".join(f"{p}:\n" + "\n".join(d[:20]) for p, d in stale.items()))


def test_the_readme_is_a_front_page():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "make demo" in text and "make test" in text and "make docs" in text
    assert text.count("\n") <= 220, "README.md is the front page: the details go into docs/"


# ------------------------------------------------------------------------------ the site
def test_the_site_builds_strict_and_offline(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason=f"{module} is not installed: "
                            "pip install -e '.[docs]' (make test installs it)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(site), "--config-file", os.path.join(ROOT, "mkdocs.yml")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr[-4000:]}"
    html = [open(p, encoding="utf-8").read()
            for p in glob.glob(str(site / "**" / "*.html"), recursive=True)]
    assert len(html) >= 40
    assert not any("fonts.googleapis.com" in h or "fonts.gstatic.com" in h for h in html), \
        "the site asks for Google fonts (theme.font: false keeps it offline)"
    api = (site / "reference" / "api.html").read_text(encoding="utf-8")
    for name in ("load", "run_scenario", "build_world", "Topology", "REGISTRY", "ScenarioError",
                 "write_report", "register_model", "register_algorithm", "register_dataset",
                 "ClientArrays", "Algorithm", "load_plugins"):
        assert f"hierfl.{name}" in api, name
