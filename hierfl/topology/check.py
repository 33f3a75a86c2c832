"""Checks of a topology spec that types alone cannot express, run when the file is loaded (so
every problem is reported at once, with its line, before any graph is built): explicit
assignment lists must make a tree (every id under exactly one parent), tier and profile names
must resolve, and every distribution must only draw values its attribute allows (latencies
>= 0, bandwidths and speeds > 0). The drawn values are checked again once built
(`build.check_tree`; a graph file: `graph.validate_graph`)."""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from ..config.errors import Problems
from ..config.limits import MAX_LATENCY_S, MAX_POWER_W, MIN_BANDWIDTH_BPS, MIN_FLOPS
from ..config.schema import DistSpec

GRAPH_SUFFIXES = (".json", ".graphml", ".xml")
TIER_NAME = re.compile(r"^[A-Za-z_][A-Za-z_-]{0,30}$")


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def check_assignment(lists: Any, n_children: int, n_parents: int, child: str, parent: str,
                     key: str, p: Problems) -> None:
    """One list of child ids per parent; together they name every id 0..n_children-1 once."""
    if not isinstance(lists, list):
        return
    if len(lists) != n_parents:
        p.add(key, f"{len(lists)} lists", f"needs one list per {parent} ({n_parents} lists)")
    where: dict[int, int] = {}
    for e, lst in enumerate(lists):
        for j, c in enumerate(lst):
            k = f"{key}[{e}][{j}]"
            if not 0 <= c < n_children:
                p.add(k, c, f"{child} id out of range: ids are 0..{n_children - 1}")
            elif c in where:
                twice = f"in the list of {parent} {e}" if where[c] == e else \
                    f"under {parent}s {where[c]} and {e}"
                p.add(k, c, f"{child} {c} is listed twice ({twice}): each {child} hangs under "
                      f"exactly one {parent}, the topology must be a tree")
            else:
                where[c] = e
    missing = [c for c in range(n_children) if c not in where]
    if missing:
        shown = ", ".join(str(c) for c in missing[:10]) + (", ..." if len(missing) > 10 else "")
        ids = f"id {shown} is" if len(missing) == 1 else f"ids {shown} are"
        p.add(key, missing if len(missing) <= 10 else f"{len(missing)} ids",
              f"{child} {ids} under no {parent}: "
              f"list every id 0..{n_children - 1} exactly once")


def _dist_problem(d: Any, strict: bool) -> str | None:
    """Why `d` may draw a value below 0 (strict: <= 0), or None."""
    bad = (lambda v: v <= 0) if strict else (lambda v: v < 0)
    need = "> 0" if strict else ">= 0"
    if not isinstance(d, DistSpec):
        return f"must be {need}" if isinstance(d, (int, float)) and bad(d) else None
    if d.dist == "constant" and bad(d.value):
        return f"value must be {need}"
    if d.dist == "uniform" and bad(d.low):
        return f"uniform low must be {need}"
    if d.dist == "normal" and (d.min is None or bad(d.min)):
        return f"a normal distribution can draw values that are not {need}: set min: {need}"
    if d.dist == "choice" and any(bad(c) for c in d.choices or []):
        return f"every choice must be {need}"
    return None


dist_problem = _dist_problem


def _extremes(d: Any) -> tuple[float, float]:
    """The smallest and largest value a distribution states (lognormal: its median)."""
    if not isinstance(d, DistSpec):
        return float(d), float(d)
    vals = {"constant": [d.value], "uniform": [d.low, d.high], "lognormal": [d.median],
            "normal": [d.mean] + ([d.min] if d.min is not None else []),
            "choice": list(d.choices or [])}[d.dist]
    return min(vals), max(vals)


def _bound_problem(name: str, d: Any) -> str | None:
    """Why `d` states a value that makes simulated times astronomically long, or None."""
    lo, hi = _extremes(d)
    if name.endswith("latency_s") and hi > MAX_LATENCY_S:
        return f"latencies above {MAX_LATENCY_S:g} s make simulated times meaningless"
    if name.endswith("_Bps") and lo < MIN_BANDWIDTH_BPS:
        return f"must be >= {MIN_BANDWIDTH_BPS:g} B/s (smaller makes transfers take forever)"
    if name.endswith("flops") and lo < MIN_FLOPS:
        return f"must be >= {MIN_FLOPS:g} FLOP/s (slower makes compute take forever)"
    if name.endswith("_w") and hi > MAX_POWER_W:
        return f"must be <= {MAX_POWER_W:g} W (a power in watts: milliwatts?)"
    return None


def _rule(name: str) -> bool | None:
    """strict (> 0), non-strict (>= 0) or no rule, by attribute name."""
    if name.endswith("latency_s") or name.endswith("_w"):     # latencies, powers (W)
        return False
    if name.endswith("_Bps") or name.endswith("flops"):
        return True
    return None


def _walk(obj: Any, key: str, p: Problems) -> None:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, DistSpec):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            k = _join(key, f.name)
            strict = _rule(f.name)
            if strict is not None and v is not None:
                msg = _dist_problem(v, strict) or _bound_problem(f.name, v)
                if msg:
                    shown = v if not isinstance(v, DistSpec) else {
                        a: b for a, b in dataclasses.asdict(v).items() if b is not None}
                    p.add(k, shown, msg)
                continue
            _walk(v, k, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk(v, f"{key}[{i}]", p)
    elif isinstance(obj, dict):
        for n, v in obj.items():
            _walk(v, f"{key}.{n}", p)


def check_spec(spec: Any, p: Problems, prefix: str = "") -> None:
    """Record every structural problem of a built TopologySpec in `p` (keys under `prefix`)."""
    _walk(spec, prefix, p)
    graph = getattr(spec, "graph", None)
    if graph is not None:
        base = os.path.dirname(os.path.abspath(p.file)) if p.file else ""
        path = os.path.join(base, graph)
        if not graph.lower().endswith(GRAPH_SUFFIXES):
            p.add(_join(prefix, "graph"), graph, "a graph file is node-link JSON (.json) or "
                  "GraphML (.graphml, .xml)")
        elif not os.path.isfile(path):
            p.add(_join(prefix, "graph"), graph, f"graph file not found: {path}")
        return
    tiers = getattr(spec, "tier_list", None)
    if tiers is None:           # a single edges: tier
        tiers = [spec.edges]
    if not tiers:
        p.add(_join(prefix, "tiers"), [], "list at least one tier of aggregators (clients "
              "hang under the bottom one), or use edges:")
        return
    names = [getattr(t, "name", "edge") for t in tiers]
    for i, name in enumerate(names):
        key = _join(prefix, f"tiers[{i}].name")
        if not TIER_NAME.match(name) or name in ("cloud", "client"):
            p.add(key, name, "tier names are letters, '_' or '-' (no digits: nodes are "
                  "<name><i>), and not 'cloud' or 'client'")
        elif name in names[:i]:
            p.add(key, name, f"tier names must be unique (also tiers[{names.index(name)}])")
    shorthand = getattr(spec, "tiers", None) is None
    for i, t in enumerate(tiers):
        for w in ("tx_w", "rx_w"):
            v = getattr(getattr(t, "link", None), w, 0.0)
            if v is not None and v != 0.0:
                where = "edges.link" if shorthand else f"tiers[{i}].link"
                p.add(_join(prefix, f"{where}.{w}"), v, "a radio power applies to clients' "
                      "links only (clients.link, or profiles.links named by clients.mix): an "
                      "aggregator's link is not counted in the energy; remove it")
    parents = 1
    for i, t in enumerate(tiers):
        check_assignment(getattr(t, "assignment", None), t.count, parents, names[i],
                         "cloud" if i == 0 else names[i - 1],
                         _join(prefix, f"tiers[{i}].assignment"), p)
        parents = t.count
    c = spec.clients
    if c is None:
        return
    check_assignment(c.assignment, c.count, parents, "client", names[-1],
                     _join(prefix, "clients.assignment"), p)
    mix = getattr(c, "mix", None)
    profiles = getattr(spec, "profiles", None)
    if mix:
        total = sum(s.fraction for s in mix)
        if abs(total - 1.0) > 1e-6:
            p.add(_join(prefix, "clients.mix"), [s.fraction for s in mix],
                  f"fractions must sum to 1 (they sum to {total:g})")
        for i, s in enumerate(mix):
            for what, table in (("device", getattr(profiles, "devices", {})),
                                ("link", getattr(profiles, "links", {}))):
                v = getattr(s, what, None)
                if v is not None and v not in table:
                    p.add(_join(prefix, f"clients.mix[{i}].{what}"), v,
                          f"not in profiles.{what}s ({', '.join(table) or 'none defined'})")
    nodes = {"cloud"} | {f"{n}{i}" for n, t in zip(names, tiers) for i in range(t.count)}
    failures = getattr(spec, "failures", None)
    for i, w in enumerate(getattr(failures, "outages", None) or []):
        for j, n in enumerate([w.node] if w.node is not None else (w.link or [])):
            k = f"failures.outages[{i}]." + ("node" if w.node is not None else f"link[{j}]")
            if n in nodes:
                continue
            m = re.fullmatch(r"client(\d+)", n)
            if m and int(m.group(1)) < c.count:
                continue
            p.add(_join(prefix, k), n, f"no such node (nodes: cloud, "
                  f"{', '.join(f'{a}0..{a}{t.count - 1}' for a, t in zip(names, tiers))}, "
                  f"client0..client{c.count - 1})")
    _check_outage_links(spec, names, tiers, p, prefix)


def _place(name: str, names: list[str], tiers: list, spec: Any) -> tuple[int, int] | None:
    """(level, index) of a node name: cloud 0, tier i i + 1, clients below; None if unknown."""
    if name == "cloud":
        return 0, 0
    m = re.fullmatch(r"([A-Za-z_-]+)(\d+)", name)
    if m is None:
        return None
    level = len(tiers) + 1 if m.group(1) == "client" else (
        names.index(m.group(1)) + 1 if m.group(1) in names else None)
    return None if level is None else (level, int(m.group(2)))


def _parent_index(assignment: Any, i: int, n_parents: int) -> int | None:
    """Index of node i's parent in the tier above, where known before drawing (not random)."""
    if isinstance(assignment, list):
        return next((e for e, lst in enumerate(assignment) if i in lst), None)
    return i % n_parents if assignment == "round_robin" else None


def _check_outage_links(spec: Any, names: list[str], tiers: list, p: Problems,
                        prefix: str) -> None:
    """A link outage must name a link of the tree: a node and its parent."""
    counts = [1] + [t.count for t in tiers]
    assigns = [None] + [getattr(t, "assignment", "round_robin") for t in tiers] + \
        [spec.clients.assignment]
    for i, w in enumerate(spec.failures.outages or []):
        if w.link is None:
            continue
        places = [_place(n, names, tiers, spec) for n in w.link]
        if None in places:
            continue        # reported above
        (la, ia), (lb, ib) = sorted(places)
        if lb != la + 1:
            msg = "no such link: a link joins a node and its parent in the tier above"
        else:
            parent = _parent_index(assigns[lb], ib, counts[la])
            child = w.link[0] if places[0][0] == lb else w.link[1]
            msg = None if parent is None or parent == ia else \
                f"no such link: {child} hangs under {names[la - 1]}{parent}"
        if msg:
            p.add(_join(prefix, f"failures.outages[{i}].link"), list(w.link), msg)
