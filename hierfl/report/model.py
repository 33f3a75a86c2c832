"""The report as data: a title, intro paragraphs and sections, each with what it shows (a
key-value table, a table with a note, a list of notes, figures). The Markdown and HTML renderers
both render this model and nothing else; `build.py` fills it from the runs' files."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..config.compress import described
from ..config.fields import compact
from ..config.schema import RoundSpec, StragglerSpec
from ..outputs.summary_columns import as_list, is_client
from .stats import Group
from .tables import local_overrides


@dataclass
class Figure:
    path: str                   # the PNG (its SVG sits next to it)
    caption: str


@dataclass
class Section:
    key: str                    # anchor: scenario, table, curves, stragglers, timeline, notes
    name: str                   # heading
    facts: list[tuple[str, str]] = field(default_factory=list)   # key-value table
    head: list[str] = field(default_factory=list)                # a table: head and rows
    rows: list[list[str]] = field(default_factory=list)
    owners: list = field(default_factory=list)      # each row's group (stats.Group)
    text: str = ""              # a paragraph under the table
    notes: list[str] | None = None     # a list (None: the section has none)
    empty: str = ""             # said instead of an empty list
    figures: list[Figure] = field(default_factory=list)

    @property
    def shown(self) -> bool:
        return bool(self.facts or self.head or self.notes is not None or self.figures)


@dataclass
class Report:
    title: str
    out: str
    intro: list[str]
    sections: list[Section]
    target: float               # accuracy target of the table
    groups: list[Group] = field(default_factory=list)   # the curves (for table.csv)

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)

    @property
    def shown(self) -> list[Section]:
        return [s for s in self.sections if s.shown]


SECTIONS = [("scenario", "Scenario"), ("table", "Time and bytes to accuracy"),
            ("curves", "Accuracy and loss"), ("fairness", "Accuracy across clients"),
            ("energy", "Energy"),
            ("privacy", "Privacy"), ("robustness", "Accuracy under attack"),
            ("stragglers", "Stragglers and γ"),
            ("classes", "By device and link class"),
            ("timeline", "Timeline of one round"), ("notes", "Divergence and failures")]
NO_NOTES = "None: every algorithm ran to the end with all selected clients aggregated."


def sections() -> list[Section]:
    """The report's sections, empty, in order."""
    return [Section(k, n) for k, n in SECTIONS]


# ------------------------------------------------------------------------------ set-up facts
def _topology_fact(nodes: dict) -> str:
    client = is_client(nodes["role"])                   # 10^6 nodes at city scale: a C loop
    n = min(len(client), len(nodes["depth"]))
    aggs, per = np.unique(np.array(nodes["depth"][:n])[~client[:n]], return_counts=True)
    n = min(len(client), len(nodes["flops"]))
    flops = np.sort(np.array(nodes["flops"][:n], dtype=float)[client[:n]])
    return (f"1 cloud, {' + '.join(map(str, per.tolist()))} aggregators in {len(aggs)} tier(s), "
            f"{len(flops)} clients; client speed {flops[0] / 1e9:.3g}–{flops[-1] / 1e9:.3g} "
            f"GFLOP/s (median {flops[len(flops) // 2] / 1e9:.3g})")


def _training_facts(tr: dict) -> list[tuple[str, str]]:
    loc = tr.get("local") or {}
    work = (f"{loc['steps']} steps" if loc.get("steps") else
            f"{loc['epochs']} epochs" if loc.get("epochs") else "1 epoch")
    rows = [("training", f"{tr.get('rounds')} cloud rounds, {tr.get('clients_per_round')}"
             f" clients per round; local: {work}, batch {loc.get('batch_size')}, "
             f"lr {loc.get('lr')}" + (f", γ target {loc['gamma']}" if loc.get("gamma")
                                      is not None else ""))]
    rp = tr.get("round") or {}
    if rp and rp.get("policy") not in (None, "wait_all"):
        rows.append(("round policy", compact({k: v for k, v in rp.items() if v is not None})))
    return rows


def summary_rows(summary: dict | None) -> list[tuple[str, str]]:
    """The set-up of a run (summary.json) as (what, value) facts."""
    if not summary:
        return []
    sc = summary.get("scenario") or {}
    rows: list[tuple[str, str]] = []
    rows.append(("scenario", f"{sc.get('name', '?')}" + (f" ({sc['file']})" if sc.get("file")
                                                         else "")))
    rows.append(("seed", str(sc.get("seed", "?"))))
    nodes = (summary.get("topology") or {}).get("nodes")
    if nodes:
        rows.append(("topology", _topology_fact(nodes)))
    data = summary.get("data") or {}
    d = sc.get("data") or {}
    tc = as_list(data.get("train_counts"))           # (an array where summary_columns.npz is)
    if tc:
        rows.append(("data", f"{d.get('name', '?')}: {sum(tc)} training samples over "
                     f"{len(tc)} clients ({min(tc)}–{max(tc)} each), "
                     f"{sum(as_list(data.get('test_counts')) or [])} test samples, dim "
                     f"{data.get('dim')}"
                     + (f", {data['classes']} classes" if data.get("classes") else "")))
    elif d:
        rows.append(("data", str(d.get("name", "?"))))
    m = summary.get("model") or {}
    ms = sc.get("model") or {}
    if m or ms:
        rows.append(("model", f"{m.get('name') or ms.get('name', '?')}"
                     + (f", {m['n_params']} parameters" if m.get("n_params") else "")))
    tr = sc.get("train") or {}
    if tr:
        rows += _training_facts(tr)
    st = sc.get("stragglers") or {}
    if st and st.get("fraction"):
        rows.append(("stragglers", compact(st)))
    for a in sc.get("algorithms") or []:
        if isinstance(a, dict):
            params = a.get("params") if isinstance(a.get("params"), dict) else {
                k: v for k, v in a.items() if k not in ("name", "label")}
            params = {k: v for k, v in params.items() if v is not None}
            loc = local_overrides(a.get("local"), tr.get("local"))
            if loc:                            # this entry's local: overrides of train.local
                params["local"] = "{" + compact(loc) + "}"
            for key in ("round", "stragglers"):    # its own round policy / stragglers
                own = _non_default(key, a.get(key))
                if own:
                    params[key] = "{" + compact(own) + "}"
            rows.append((f"algorithm {a.get('label') or a.get('name')}",
                         f"{a.get('name')}" + (f" ({compact(params)})" if params else "")
                         + _compress_fact(a.get("compress"))
                         + _mobility_fact(a.get("mobility"))
                         + _protect_fact(a)))
    return rows


def _protect_fact(entry: dict) -> str:
    """An entry's privacy, rules, attack and secure aggregation (issue 43), where it has them
    ("; privacy {kind=client_level, clip=1.0, ...}"; a rule of mean, the default, left out)."""
    out = ""
    for key in ("privacy", "aggregate", "attack", "secure_aggregation"):
        v = entry.get(key)
        if not isinstance(v, dict):
            continue
        if key == "aggregate":
            v = {t: r for t, r in v.items() if isinstance(r, dict) and r.get("kind") != "mean"}
        v = _without_none(v)
        if v:
            out += f"; {key} {{{compact(v)}}}"
    return out


def _without_none(d: dict) -> dict:
    return {k: _without_none(v) if isinstance(v, dict) else v for k, v in d.items()
            if v is not None}


def _mobility_fact(mob: object) -> str:
    """An entry's own mobility ("; mobility {kind=markov, handover_rate_per_s=0.1, ...}")."""
    if not isinstance(mob, dict) or mob.get("kind", "none") == "none":
        return ""
    return "; mobility {" + compact({k: v for k, v in mob.items() if v is not None}) + "}"


def _non_default(key: str, value: object) -> dict:
    """An entry's own `round:` / `stragglers:` as the keys that differ from their defaults
    (a round's policy always shown)."""
    if not isinstance(value, dict):
        return {}
    cls = RoundSpec if key == "round" else StragglerSpec
    base = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING
                     else f.default) for f in dataclasses.fields(cls)}
    base = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
            for k, v in base.items()}
    return {k: v for k, v in value.items() if k == "policy" or base.get(k) != v}


def _compress_fact(comp: object) -> str:
    """The directions an entry compresses ("; compress up={kind=topk, ratio=0.01, ...}")."""
    text = described(comp)
    return f"; compress {text}" if text else ""
