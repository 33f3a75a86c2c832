"""The report's privacy and robustness sections (issue 43; docs/privacy.md, docs/robustness.md),
each shown only where a run recorded something for it, like the energy section.

Privacy, where any series has a finite `epsilon` in metrics.csv: test accuracy against the
privacy spent (x = metrics.csv's epsilon, one curve per entry with privacy) and a table of each
such entry's settings (read from summary.json's copy of the entry) with its final epsilon and
accuracy.

Robustness, where any entry faced an attack: the accuracy under attack per aggregator (the
attack, its attackers, the edge and cloud rules, the final and best accuracy) for the entries
under attack, the entries with a robust rule, and the entries with no protection at all (the
clean references), and a bar chart of the final accuracies. The attack is read from summary.json
(its entry's `attack`, the scenario's or its own); only a run whose summary records none of
issue 43's keys (written before they were recorded) is looked up in clients.csv's attacker
column, through the report's one cached read of that file."""
from __future__ import annotations

import math
from typing import Any, Callable

from ..outputs import Run, Series
from ..outputs.summary_columns import as_list
from ..robust.spec import ATTACK_KEYS, RULE_KEYS
from . import plots
from .model import Figure, Section
from .stats import Group
from .tables import num, pm, task_of

KEYS = ("privacy", "aggregate", "attack", "secure_aggregation")
PRIVACY_HEAD = ["algorithm", "kind", "noise at", "z", "C", "δ", "final ε"]
ROBUST_HEAD = ["algorithm", "attack", "attackers", "edge rule", "cloud rule"]
PRIVACY_TEXT = (
    "ε: the privacy spent by the end of the run for the entry's δ (metrics.csv's epsilon, "
    "Google's dp-accounting RDP accountant with the sampling rates the run had; "
    "docs/privacy.md). Client level: each update clipped to norm C, Gaussian noise of std "
    "z C over the m updates of an aggregate, i.e. z C / m on their mean, added where `noise at` "
    "says (client: local DP, std z C on each update); sample level (DP-SGD): each sample's "
    "gradient clipped to C, noise z C on each local step's sum. ∞: no noise (z = 0) protects "
    "nothing. With several seeds: mean ± sample standard deviation (ddof=1).")
ROBUST_TEXT = (
    "Attackers: the Byzantine clients of the entry's attack (round(fraction × N), drawn from the "
    "scenario seed, or the ids given), the same clients for every entry of a run that faces "
    "the scenario's attack; they train, then send what the attack says instead of their update "
    "(docs/robustness.md). Rules: how each edge combines its clients and the cloud its children "
    "(— : a flat algorithm has no edge rule). Entries without attack or rule are the clean "
    "references. Best: the best evaluation of the run. With several seeds: mean ± sample "
    "standard deviation (ddof=1).")


# ------------------------------------------------------------------------------ what a run recorded
def recorded_entries(runs: list[Run]) -> dict[tuple[str, str], dict]:
    """(run name, label) -> the entry as summary.json records it (its issue-43 keys where it
    has them)."""
    out = {}
    for r in runs:
        for a in ((r.summary or {}).get("scenario") or {}).get("algorithms") or []:
            if isinstance(a, dict):
                out[(r.name, str(a.get("label") or a.get("name")))] = a
    return out


def _records_keys(run: Run) -> bool:
    """The run's summary records issue 43's keys: one of its entries has one (a writer that
    records them records every entry's)."""
    return any(isinstance(a, dict) and any(k in a for k in KEYS)
               for a in ((run.summary or {}).get("scenario") or {}).get("algorithms") or [])


def _n_clients(run: Run | None) -> int | None:
    counts = ((run.summary if run else None) or {}).get("data", {}).get("train_counts")
    return len(as_list(counts)) if counts is not None else None


def _entry(entries: dict, s: Series) -> dict:
    return entries.get((s.run, s.label)) or {}


def _mapping(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _g(v: float) -> str:
    return format(v, "g") if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _score(groups: list[Group]) -> tuple[str, bool]:
    reg = task_of(groups) == "regression"
    return ("test MSE" if reg else "accuracy"), reg


# ------------------------------------------------------------------------------ privacy
def has_privacy(groups: list[Group]) -> bool:
    return any(_finite_epsilon(s) for g in groups for s in g.members)


def _finite_epsilon(s: Series) -> bool:
    return any(math.isfinite(r.get("epsilon", math.nan)) for r in s.rows)


def _eps(v: float) -> str:
    return "∞" if v == math.inf else num(v, ".3g")


def privacy_row(g: Group, entry: dict, reg: bool) -> list[str]:
    """One entry's settings and its final epsilon and score."""
    p = _mapping(entry.get("privacy"))
    kind = p.get("kind", "—")
    where = "local steps" if kind == "sample_level" else p.get("noise_at") or "—"
    z = p.get("noise_multiplier")
    zs = _g(z) if z is not None else (f"for ε ≤ {_g(p['target_epsilon'])}"
                                      if p.get("target_epsilon") is not None else "—")
    if p and z is not None and p.get("target_epsilon") is not None:
        zs += f" (stops at ε {_g(p['target_epsilon'])})"
    c = p.get("clip", "—") if p else "—"
    cs = "∞" if p and c is None else _g(c)           # summary.json writes inf as null
    if p.get("adaptive"):
        cs += " (adaptive)"
    eps = [s.last("epsilon") for s in g.members]
    if all(e == math.inf for e in eps):
        final_eps = "∞"
    else:
        final_eps = pm(eps, lambda x: num(x, ".3g"))
    final = pm([math.nan if s.diverged_at is not None else s.final_acc for s in g.members],
               lambda x: num(x, ".4g" if reg else ".3f"))
    return [g.label, kind, where, zs, cs, _g(p["delta"]) if "delta" in p else "—", final_eps,
            final]


def add_privacy(sec: Section, groups: list[Group], runs: list[Run], colours: dict[str, str],
                p: Callable[[str], str], notes: list[str], safe: Callable[..., Any]) -> None:
    """Fill the privacy section, where any series has a finite epsilon."""
    if not has_privacy(groups):
        return
    entries = recorded_entries(runs)
    what, reg = _score(groups)
    mine = [g for g in groups if any(_finite_epsilon(s) for s in g.members)]
    sec.head = PRIVACY_HEAD + [f"final {what}"]
    sec.rows = [privacy_row(g, _entry(entries, g.members[0]), reg) for g in mine]
    sec.owners = mine
    sec.text = PRIVACY_TEXT
    drawn = [g for g in mine if any(math.isfinite(v) and v > 0 for s in g.members
                                    for v in s.col("epsilon"))]
    if not drawn:
        return
    pos = [v for g in drawn for v in g.mean().col("epsilon") if math.isfinite(v) and v > 0]
    logx = max(pos) / min(pos) > 100
    path = safe(notes, "accuracy vs epsilon", plots.accuracy_figure, drawn, colours, "epsilon",
                "privacy spent ε (each entry's δ)" + (", log" if logx else ""),
                p("accuracy_vs_epsilon.png"), logx)
    if path:
        sec.figures.append(Figure(path, f"Test {what} vs the privacy spent so far (ε)"))


# ------------------------------------------------------------------------------ robustness
def _described(kind: str, spec: dict, table: dict[str, dict[str, Any]],
               names: dict[str, str]) -> str:
    """"trimmed_mean (β 0.2)": the kind and the keys it reads, each where it is not the kind's
    default (a required key always)."""
    reads = table.get(kind, {})
    shown = [f"{names.get(k, k)} {_g(spec[k])}" for k, d in reads.items()
             if spec.get(k) is not None and (not isinstance(d, (int, float, list, type(None)))
                                             or spec[k] != d)]
    return kind + (f" ({', '.join(shown)})" if shown else "")


RULE_NAMES = {"beta": "β", "tau": "τ", "bound": "M", "nu": "ν"}
ATTACK_NAMES = {"epsilon": "ε"}


def rule_text(rule: object) -> str:
    r = _mapping(rule)
    return _described(str(r.get("kind", "mean")), r, RULE_KEYS, RULE_NAMES)


def attack_text(attack: dict) -> str:
    return _described(str(attack.get("kind")), attack, ATTACK_KEYS, ATTACK_NAMES) \
        if attack else "none"


def attackers_text(attack: dict, n: int | None) -> str:
    if not attack:
        return "0"
    if attack.get("clients") is not None:
        k = len(attack["clients"])
    elif attack.get("fraction") is not None and n:
        k = math.floor(float(attack["fraction"]) * n + 0.5)
    else:
        return f"{_g(attack.get('fraction', '?'))} of the clients"
    return f"{k} of {n}" if n else str(k)


def _hierarchical(name: object) -> bool | None:
    try:
        from ..algorithms.registry import REGISTRY

        return bool(REGISTRY.caps(str(name)).hierarchical)
    except Exception:  # noqa: BLE001 - a plugin's algorithm, not registered here
        return None


def _seen_attackers(s: Series, clients: Callable[[str], dict]) -> int:
    """Clients marked attacker in clients.csv (a run whose summary records no attack)."""
    col = clients(s.folder).get("attacker")
    if col is None:
        return 0
    return len({int(k) for k, a in zip(clients(s.folder)["client"], col) if a == 1})


def robust_rows(groups: list[Group], runs: list[Run], clients: Callable[[str], dict]
                ) -> tuple[list[Group], list[list[str]], list[bool]]:
    """The groups of the robustness table, their cells (before the scores) and whether each
    faced an attack; nothing where no entry did."""
    entries = recorded_entries(runs)
    by_name = {r.name: r for r in runs}
    out, cells, attacked = [], [], []
    for g in groups:
        s = g.members[0]
        e = _entry(entries, s)
        run = by_name.get(s.run)
        attack = {k: v for k, v in _mapping(e.get("attack")).items() if v is not None}
        if attack.get("kind") == "none":
            attack = {}
        seen = 0
        if not attack and run is not None and not _records_keys(run):
            seen = _seen_attackers(s, clients)      # a summary that records no attack
        agg = _mapping(e.get("aggregate"))
        robust = any(_mapping(agg.get(t)).get("kind", "mean") != "mean" for t in ("edge", "cloud"))
        plain = not any(e.get(k) for k in KEYS)
        if not (attack or seen or robust or plain):
            continue                                 # privacy or secure aggregation only
        hier = _hierarchical(e.get("name"))
        edge = "—" if hier is False else rule_text(agg.get("edge"))
        who = attackers_text(attack, _n_clients(run)) if attack else \
            (f"{seen} (clients.csv)" if seen else "0")
        kind = attack_text(attack) if attack else ("unrecorded" if seen else "none")
        out.append(g)
        cells.append([g.label, kind, who, edge, rule_text(agg.get("cloud"))])
        attacked.append(bool(attack or seen))
    if not any(attacked):
        return [], [], []
    return out, cells, attacked


def best_score(s: Series, reg: bool) -> float:
    ev = [r[s.score_key] for r in s.evaluated if s.diverged_at is None
          or r["round"] < s.diverged_at]
    return (min(ev) if reg else max(ev)) if ev else math.nan


def add_robustness(sec: Section, groups: list[Group], runs: list[Run],
                   colours: dict[str, str], clients: Callable[[str], dict],
                   p: Callable[[str], str], notes: list[str], safe: Callable[..., Any]) -> None:
    """Fill the robustness section, where any entry faced an attack."""
    mine, cells, attacked = robust_rows(groups, runs, clients)
    if not mine:
        return
    what, reg = _score(groups)
    show = (lambda x: num(x, ".4g")) if reg else (lambda x: num(x, ".3f"))
    finals, bests = [], []
    for g in mine:
        finals.append([math.nan if s.diverged_at is not None else s.final_acc
                       for s in g.members])
        bests.append([best_score(s, reg) for s in g.members])
    sec.head = ROBUST_HEAD + [f"final {what}", f"best {what}"]
    sec.rows = [c + [pm(f, show), pm(b, show)] for c, f, b in zip(cells, finals, bests)]
    sec.owners = mine
    sec.text = ROBUST_TEXT
    path = safe(notes, "accuracy under attack", plots.attack_figure, mine, colours, finals,
                bests, attacked, f"final test {what}" + (" (lower is better)" if reg else ""),
                p("accuracy_under_attack.png"))
    if path:
        sec.figures.append(Figure(path, f"Final test {what} per aggregator (◇: the best "
                                  "evaluation; hatched: no attacker)"))
