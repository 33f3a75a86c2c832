"""report.md: the report model as Markdown for a Git forge, the figures linked next to it."""
from __future__ import annotations

import os

from .model import Report, Section


def md_table(head: list[str], rows: list[list[str]]) -> str:
    """A pipe table ('|' in cells escaped)."""
    esc = [[c.replace("|", "\\|") for c in r] for r in [head, *rows]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def _section(sec: Section) -> list[str]:
    parts = [f"## {sec.name}", ""]
    if sec.facts:
        parts += [md_table(["", ""], [[k, v] for k, v in sec.facts]), ""]
    if sec.head:
        parts += [md_table(sec.head, sec.rows), ""]
    if sec.text:
        parts += [sec.text, ""]
    if sec.notes is not None:
        parts += [f"- {n}" for n in sec.notes] or [sec.empty]
        parts.append("")
    for f in sec.figures:
        parts += [f"### {f.caption}", "", f"![{f.caption}]({os.path.basename(f.path)})", ""]
    return parts


def render_md(rep: Report) -> str:
    parts = [f"# hierfl report{': ' + rep.title if rep.title else ''}", "", *rep.intro, "",
             "Self-contained version with every figure: [report.html](report.html). "
             "Long-format metrics for pandas: [metrics_all.csv](metrics_all.csv).", ""]
    for sec in rep.shown:
        parts += _section(sec)
    return "\n".join(parts) + "\n"
