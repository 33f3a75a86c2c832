"""The report's energy section (issue 18; the rule is in sim/energy.py and docs/energy.md): test
accuracy vs the clients' cumulative energy, the energy to reach the target per algorithm, and
energy columns in the breakdown by device and link class. Shown only where a run recorded
energy (metrics.csv's energy_total_j above 0: its topology gives powers)."""
from __future__ import annotations

import math
from typing import Any, Callable

from ..outputs import Series
from ..outputs.classes import read_class_totals
from . import plots
from .model import Figure, Section
from .stats import Group
from .tables import num, pm, task_of

HEAD = ["algorithm", "client energy (J)", "per cloud round (J)", "energy to target (J)",
        "rounds to target"]
TEXT = ("Client energy: the joules of every client-round of clients.csv (compute seconds × "
        "power_w + sending seconds × tx_w + receiving seconds × rx_w + idle seconds × idle_w; "
        "docs/energy.md), summed over the run. Energy to target: the cumulative client energy "
        "at the first evaluation at or past the target (≤: crossed after the previous "
        "evaluation). With several seeds: mean ± sample standard deviation (ddof=1).")
CLASS_HEAD = ["client energy (J)", "J per client-round"]


def has_energy(groups: list[Group]) -> bool:
    return any(s.last("energy_total_j") > 0 for g in groups for s in g.members)


def energy_numbers(s: Series, target: float) -> dict[str, float]:
    """Total and per-round client energy of one series, and its energy and round at the first
    evaluation reaching `target` (NaN when not reached); `after`: the evaluated round before."""
    hit = s.first_reaching(target) if math.isfinite(target) else None
    prev = s.evaluated_before(hit) if hit else None
    total, last = s.last("energy_total_j"), s.last("round")
    return {"energy": total, "per_round": total / last if last and last > 0 else math.nan,
            "to_target": hit.get("energy_total_j", math.nan) if hit else math.nan,
            "rounds": hit["round"] if hit else math.nan,
            "after": prev["round"] if prev else math.nan}


def energy_rows(groups: list[Group], target: float) -> list[list[str]]:
    rows = []
    for g in groups:
        per = [energy_numbers(s, target) for s in g.members]
        v = {k: [p[k] for p in per] for k in per[0]}
        row = [g.label, pm(v["energy"], lambda x: num(x, ".4g")),
               pm(v["per_round"], lambda x: num(x, ".4g"))]
        if not any(math.isfinite(x) for x in v["to_target"]):
            row += ["not reached", "not reached"]
        else:
            le = "≤ " if any(r - a > 1 for r, a in zip(v["rounds"], v["after"])
                             if math.isfinite(r) and math.isfinite(a)) else ""
            row += [le + pm(v["to_target"], lambda x: num(x, ".4g")),
                    le + pm(v["rounds"], lambda x: num(x, ".0f") if g.n == 1 else num(x, ".1f"))]
        rows.append(row)
    return rows


def class_energy(groups: list[Group]) -> list[list[str]]:
    """Per algorithm and class, in the classes table's order (classes.class_rows): the class's
    client energy and its mean per client-round."""
    out = []
    for g in groups:
        totals = read_class_totals([s.folder for s in g.members])
        for _, t in sorted(totals.items()):
            n = t.counts.get("energy_j", 0)
            out.append([num(t.sums["energy_j"], ".4g") if n else "—",
                        num(t.mean("energy_j"), ".3g") if n else "—"])
    return out


def add_energy(sec: dict[str, Section], groups: list[Group], colours: dict[str, str],
               target: float, p: Callable[[str], str], notes: list[str],
               safe: Callable[..., Any]) -> None:
    """Fill the energy section and extend the class table, where any run recorded energy."""
    if not has_energy(groups):
        return
    e = sec["energy"]
    e.head, e.rows, e.text = HEAD, energy_rows(groups, target), TEXT
    path = safe(notes, "accuracy vs energy", plots.accuracy_figure, groups, colours,
                "energy_total_j", "client energy, cumulative (J, log)",
                p("accuracy_vs_energy.png"), True)
    if path:
        what = "Test MSE" if task_of(groups) == "regression" else "Test accuracy"
        e.figures.append(Figure(path, f"{what} vs the clients' cumulative energy"))
    classes = sec.get("classes")
    if classes is not None and classes.rows:
        extra = class_energy(groups)
        if len(extra) == len(classes.rows):
            classes.head = classes.head + CLASS_HEAD
            classes.rows = [r + x for r, x in zip(classes.rows, extra)]
