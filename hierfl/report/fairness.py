"""The report's section on how accuracy is spread over clients (issue 44; the columns are
outputs/fairness.py's): a table of the final evaluation's spread per algorithm (global model,
and personal models where there are), the spread over rounds (band p10-p90, worst 10%) read
from metrics.csv, and the CDF of the final per-client accuracies read from the end of
clients_eval.csv. Shown only where a run recorded the columns (classification runs)."""
from __future__ import annotations

import math
import os
from typing import Any, Callable

from ..outputs.fairness import read_last_eval
from .model import Figure, Section
from .plots.fairness import cdf_figure, spread_figure
from .stats import Group
from .tables import num, pm

HEAD = ["algorithm", "model", "round", "mean", "weighted mean", "std", "min", "p10", "median",
        "p90", "worst 10%", "Jain"]
KEYS = ["mean", "wmean", "std", "min", "p10", "p50", "p90", "worst10", "jain"]
TEXT = ("Test accuracy of each client with test rows at the final evaluation, the clients "
        "counted alike (the weighted mean counts test rows: it is test_acc). std: population "
        "(ddof 0); percentiles: numpy's linear interpolation; worst 10%: the mean of the lowest "
        "ceil(10%) clients; Jain: (Σx)² / (n Σx²), 1 when every client scores the same. "
        "metrics.csv's client_acc_* / personal_client_acc_* columns; each client's accuracy in "
        "clients_eval.csv. With several seeds: mean ± sample standard deviation (ddof=1).")
PREFIXES = (("global", "client_acc_"), ("personal", "personal_client_acc_"))


def _last(s, prefix: str) -> dict[str, float] | None:
    """The last row of a series with the spread of `prefix` (its final evaluation)."""
    for r in reversed(s.rows):
        if math.isfinite(r.get(prefix + "p50", math.nan)):
            return r
    return None


def has_fairness(groups: list[Group]) -> bool:
    return any(_last(s, "client_acc_") for g in groups for s in g.members)


def fairness_rows(groups: list[Group]) -> list[list[str]]:
    rows = []
    for g in groups:
        for model, prefix in PREFIXES:
            last = [_last(s, prefix) for s in g.members]
            if not any(last):
                continue
            got = [r for r in last if r]
            rounds = sorted({int(r["round"]) for r in got})
            row = [g.label, model, "/".join(map(str, rounds))]
            row += [pm([r[prefix + k] for r in got], lambda x: num(x, ".4f")) for k in KEYS]
            rows.append(row)
    return rows


def add_fairness(sec: Section, groups: list[Group], colours: dict[str, str],
                 p: Callable[[str], str], notes: list[str], safe: Callable[..., Any]) -> None:
    """Fill the section where any run recorded the per-client spread."""
    if not has_fairness(groups):
        return
    sec.head, sec.rows, sec.text = HEAD, fairness_rows(groups), TEXT
    for model, prefix in PREFIXES:
        path = safe(notes, f"{model} accuracy spread", spread_figure, groups, colours, prefix,
                    p(f"client_accuracy_spread{'' if model == 'global' else '_personal'}.png"))
        if path:
            what = "global model" if model == "global" else "personal models"
            sec.figures.append(Figure(path, f"Test accuracy over the clients, {what}: the 10th-"
                                            "90th percentile band, the median and the mean of "
                                            "the worst 10% (dashed), per algorithm"))
    curves = []
    for g in groups:
        s = g.members[0]              # one seed's clients (the first)
        f = os.path.join(s.folder, "clients_eval.csv")
        if not s.folder or not os.path.isfile(f):
            continue
        _, acc, personal = read_last_eval(f)
        curves.append((g.label, colours[g.label], acc, "-"))
        curves.append((f"{g.label} (personal)", colours[g.label], personal, "--"))
    path = safe(notes, "client accuracy CDF", cdf_figure, curves, p("client_accuracy_cdf.png"))
    if path:
        sec.figures.append(Figure(path, "CDF of the clients' test accuracies at the final "
                                        "evaluation (dashed: personalised models; several "
                                        "seeds: the first seed's clients)"))
