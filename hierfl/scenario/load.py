"""The scenario loader: validates a scenario (and its topology) in full before anything runs,
reporting every problem at once as `file:line: key = value: message`, and returns a typed
`Scenario`. YAML is read through config/yamldoc (bounded, safe); sizes that would not fit in
memory are rejected before anything is allocated (config/limits `resource_problems`)."""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from typing import Any


from ..config.errors import Problem, Problems, ScenarioError
from ..compress.spec import CompressSpec, given_problems
from ..config.mobility import MobilitySpec
from ..config.fields import build, convert, is_fail
from ..config.limits import model_params, resource_problems
from ..config.yamldoc import add_duplicates, check_file, read_doc
from .checks import check_algorithms, check_asynchrony, check_output, check_overrides, \
    check_rounds, check_work, label_problem
from ..config.schema import AlgorithmEntry, DataSpec, LocalSpec, ModelSpec, Scenario, \
    RoundSpec, ScenarioFile, StragglerSpec, TrainSpec
from ..algorithms.registry import REGISTRY, EdgeRounds, TierRounds
from ..config.topology import TopologySpec
from ..data.check import build_data, data_problems
from ..data.registry import DATASETS, Shape, is_registered
from ..learn import local_train
from ..models.registry import MODELS, option_problems
from ..registry import broken_note, code_problem
from ..topology.check import check_spec
from ..topology.traces import device_rows
from .extend import load_plugins, resolve_data_paths
from .protect import KEYS as PROTECT_KEYS, entry_keys, entry_problems, scenario_attack

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


# ============================================================================ topology
def load_topology(raw: Any, base_dir: str, file: str, problems: Problems) -> tuple[Any, str]:
    """Resolve `topology:` (path or inline mapping) to (TopologySpec | None, topology file),
    validating it in full (structure as well as types)."""

    topo_file, lines, prefix = file, problems.lines, "topology"
    if isinstance(raw, str):    # named relative to the scenario, as the user wrote it
        topo_file = os.path.normpath(os.path.join(os.path.dirname(file), raw))
        try:
            check_file(topo_file, "topology file")
        except ScenarioError as exc:
            problems.add("topology", raw, f"{exc.problems[0].message}: {topo_file}")
            return None, topo_file
        try:
            doc = read_doc(topo_file, "topology file")
        except ScenarioError as exc:
            problems.items.extend(exc.problems)
            return None, topo_file
        raw, lines, prefix = doc.data, doc.lines, ""
        tp = Problems(topo_file, lines)
        add_duplicates(tp, doc)
        problems.items.extend(tp.items)
    if not isinstance(raw, dict):
        if prefix:
            problems.add("topology", raw, "expected a file path or a mapping")
        else:
            problems.items.append(Problem(topo_file, "", raw,
                                          "a topology must be a mapping of keys"))
        return None, topo_file
    tp = Problems(topo_file, lines)
    spec = build(TopologySpec, raw, tp, prefix)
    if not is_fail(spec):
        spec = _with_traced_clients(spec, topo_file, tp, prefix)
        if spec is None:                # a bad trace: reported
            problems.items.extend(tp.items)
            return None, topo_file
        check_spec(spec, tp, prefix)
    problems.items.extend(tp.items)
    return (None if is_fail(spec) else spec), topo_file


def _with_traced_clients(spec: Any, topo_file: str, tp: Problems, prefix: str) -> Any:
    """clients: {trace: devices.csv}: the file is checked now (a bad line names the file and
    the line) and the client count is its rows (a count: given must agree)."""

    c = spec.clients
    if c is None or c.trace is None:
        return spec
    path = os.path.join(os.path.dirname(os.path.abspath(topo_file)), c.trace)
    try:
        n = device_rows(path)
    except ScenarioError as exc:
        tp.items.extend(exc.problems)
        return None
    if c.count is not None and c.count != n:
        key = f"{prefix}.clients.count" if prefix else "clients.count"
        tp.add(key, c.count, f"the trace {c.trace} lists {n} clients")
        return None
    return dataclasses.replace(spec, clients=dataclasses.replace(c, count=n))


# ============================================================================ resources
def data_shape(data: DataSpec, n_clients: int) -> "Shape | None":
    """(expected training rows per client, dim, classes, most rows of a client) of a set that
    declares its size before loading (None for npz, LEAF and plugins: sized when loaded)."""

    shape = None if is_registered(data) else DATASETS.facts(data.name).shape
    return shape(data, n_clients) if shape is not None else None


# ============================================================================ scenario
def _part(cls: type, raw: Any) -> Any:
    """Build one section silently (its problems are reported by the full build)."""
    if not isinstance(raw, dict):
        return None
    out = build(cls, raw, Problems(""))
    return None if is_fail(out) else out


def _check_name(p: Problems, key: str, value: Any, what: str) -> bool:
    if isinstance(value, str) and NAME_RE.match(value) and ".." not in value:
        return True
    p.add(key, value, f"use 1-100 letters, digits, '.', '-' and '_', starting with a letter or "
          f"digit, and no '..' ({what} is a folder name inside the output folder)")
    return False


def _check_label(p: Problems, key: str, label: Any, labels: dict[str, int], i: int) -> bool:
    """A usable folder name, clear of the report's files, unique (else False if unusable)."""
    if not _check_name(p, f"{key}.label", label, "a label"):
        return False
    if label_problem(label):
        p.add(f"{key}.label", label, label_problem(label))
        return False
    if label in labels:
        p.add(f"{key}.label", label, f"labels must be unique (also algorithms[{labels[label]}]"
              "; add label: to tell entries apart)")
    labels.setdefault(label, i)
    return True


def _hyperparameters(cls: Any, name: str, hp: dict, p: Problems, key: str) -> dict | None:
    """An entry's hyperparameters, with every key that is neither one of them nor an entry key
    a problem whose "allowed:" names both (a misspelt `lable:` is closest to an entry key, not
    to a hyperparameter); None when there is such a key."""
    own = sorted(f.name for f in dataclasses.fields(cls.Params) if f.init)
    if getattr(cls.Params, "EXTRA_KEYS", None) is not None:
        return hp
    bad = [k for k in hp if k not in own]
    for k in bad:
        close = difflib.get_close_matches(str(k), own + list(ENTRY_KEYS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        mine = f"{name}'s hyperparameters: {', '.join(own)}" if own else \
            f"{name} has no hyperparameters"
        p.add(f"{key}.{k}", hp[k], f"unknown key{hint}; allowed: {mine}; and the entry keys: "
              f"{', '.join(ENTRY_KEYS)}")
    return None if bad else hp


def _algorithms(raw: dict, p: Problems) -> list[AlgorithmEntry]:
    """Validate every algorithm entry (even when other sections are wrong)."""

    items = raw.get("algorithms")
    if not isinstance(items, list):
        return []           # reported by the ScenarioFile build
    if not items:
        p.add("algorithms", items, "list at least one algorithm")
    train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
    raw_local = train.get("local") if isinstance(train.get("local"), dict) else {}
    train_local_ok = _part(LocalSpec, raw_local) is not None
    entries: list[AlgorithmEntry] = []
    named: set = set()          # (key, plugin name) reported once, not once per entry
    labels: dict[str, int] = {}
    known = ", ".join(sorted(REGISTRY))
    attack = scenario_attack(raw, p)
    for i, a in enumerate(items):
        key = f"algorithms[{i}]"
        if not isinstance(a, dict) or "name" not in a:
            hint = ""
            if isinstance(a, dict):
                close = difflib.get_close_matches("name", [str(k) for k in a], n=1)
                hint = f" (did you mean name: instead of {close[0]}:?)" if close else ""
            elif isinstance(a, str):
                close = difflib.get_close_matches(a, list(REGISTRY), n=1)
                hint = f" (write {{name: {close[0] if close else a}}})"
            p.add(key, a, f"expected a mapping with a name: key{hint}; known algorithms: {known}")
            continue
        name = a["name"]
        if not isinstance(name, str) or name not in REGISTRY:
            p.add(f"{key}.name", name, REGISTRY.unknown(name))
            continue
        why = code_problem(REGISTRY.declaration(name))
        if why:
            p.add(f"{key}.name", name, why)
            continue
        cls = REGISTRY.info(name)       # Params and flags, without importing it (torch)
        label = a.get("label", name)
        if not _check_label(p, key, label, labels, i):
            continue
        local_raw = a.get("local", {})
        if not isinstance(local_raw, dict):
            p.add(f"{key}.local", local_raw, "expected a mapping")
            continue
        merged = {**raw_local, **local_raw}
        if "steps" in local_raw and "epochs" not in local_raw:
            merged.pop("epochs", None)
        if "epochs" in local_raw and "steps" not in local_raw:
            merged.pop("steps", None)
        lp = Problems(p.file, p.lines)
        local = build(LocalSpec, merged, lp, f"{key}.local")
        for prob in lp.items:   # keep what this entry says; train.local reports its own
            leaf = prob.key[len(f"{key}.local."):] if prob.key.startswith(f"{key}.local.") \
                else None
            if (leaf in local_raw) or (leaf is None and train_local_ok):
                p.items.append(prob)
        hp = {k: v for k, v in a.items() if k not in ENTRY_KEYS}
        known_hp = _hyperparameters(cls, a["name"], hp, p, key)
        params = build(cls.Params, known_hp, p, key) if known_hp is not None else None
        over = _entry_overrides(raw, a, p, key)
        comp = convert(CompressSpec, a["compress"], f"{key}.compress", p) \
            if "compress" in a else None
        given_problems(p, f"{key}.compress", a.get("compress"), cls.hierarchical,
                       None if cls.codes_down else a["name"])
        mob = convert(MobilitySpec, a["mobility"], f"{key}.mobility", p) \
            if "mobility" in a else None
        prot = entry_keys(a, key, p, attack)
        if prot is None:
            continue
        if over is None or params is None or is_fail(local) or is_fail(params) or is_fail(comp) or is_fail(mob):
            continue
        strag, round_ = over
        if local.gamma is not None and not cls.supports_gamma:
            where = f"{key}.local.gamma" if "gamma" in local_raw else "train.local.gamma"
            p.add(where, local.gamma, f"{name} ({key}) has no single local objective; gamma "
                  "stops are not defined for it")
        if not local.optimizer.plain and not cls.optimizers:
            where = f"{key}.local.optimizer" if "optimizer" in local_raw \
                else "train.local.optimizer"
            p.add(where, local_raw.get("optimizer", raw_local.get("optimizer")),
                  f"{name} ({key}) takes plain SGD steps only (optimizer {{name: sgd}}, every "
                  f"key zero): {cls.optimizers_why}")
        elif cls.optimizer_check is not None and \
                (bad := cls.optimizer_check(local.optimizer)) is not None:
            opt_raw = local_raw.get("optimizer", raw_local.get("optimizer"))
            where = f"{key}.local.optimizer" if "optimizer" in local_raw \
                else "train.local.optimizer"
            sub, why = bad
            p.add(f"{where}.{sub}", opt_raw.get(sub) if isinstance(opt_raw, dict) else opt_raw,
                  f"{name} ({key}) does not take it: {why}")
        if local.clip is not None and not cls.optimizers:
            where = f"{key}.local.clip" if "clip" in local_raw else "train.local.clip"
            p.add(where, local_raw.get("clip", raw_local.get("clip")),
                  f"{name} ({key}) takes plain SGD steps only, unclipped: "
                  f"{cls.optimizers_why}")
        for field, registry in (("solver", "LOCAL_TRAINS"), ("loss", "LOSSES")):
            value = getattr(local, field)
            where = f"{key}.local.{field}" if field in local_raw else f"train.local.{field}"
            msg = None if value is None else _plugin_name(registry, value)
            if msg and (where, value) not in named:
                named.add((where, value))
                p.add(where, value, msg)
        if local.solver is not None:
            _local_train_problems(p, key, name, local, local_raw, raw_local)
        # the schedule, read once here from the algorithm's hyperparameters
        edge_rounds = params.edge_rounds if isinstance(params, EdgeRounds) else 1
        tier_rounds = params.tier_rounds if isinstance(params, TierRounds) else None
        entries.append(AlgorithmEntry(name, label, params, local, edge_rounds, strag,
                                      None if tier_rounds is None else tuple(tier_rounds),
                                      round_, comp, mob, **prot))
    return entries


ENTRY_KEYS = ("name", "label", "local", "stragglers", "round", "compress", "mobility",
              *PROTECT_KEYS)


def _plugin_name(registry: str, name: str) -> str | None:
    """None where `name` is registered in learn/local_train.py's `registry` (torch-free),
    else the problem (a close match, or how to register one)."""
    known = getattr(local_train, registry)
    if name in known:
        return None
    if not known.names(everything=True):
        deco = "register_local_train" if registry == "LOCAL_TRAINS" else "register_loss"
        return (f"unknown {known.kind}: none is registered (@hierfl.{deco} in a plugin file "
                "named by plugins: or --plugin; docs/howto/local-training.md)")
    return known.unknown(name)


def _local_train_problems(p: Problems, key: str, name: str, local: LocalSpec, local_raw: dict,
                          raw_local: dict) -> None:
    """A local training plugin (train.local.solver) replaces plain SGD steps on F_k: refused
    for an algorithm whose local program is another (Capabilities.local_train), and beside an
    optimizer or clipping of ours (the plugin takes its own steps)."""
    where = f"{key}.local.solver" if "solver" in local_raw else "train.local.solver"
    if not REGISTRY.caps(name).local_train:
        plain = ", ".join(n for n in REGISTRY if REGISTRY.caps(n).local_train)
        p.add(where, local.solver, f"{name} ({key}) has a local program of its own (terms, "
              "corrections or inner steps); a local training plugin replaces plain SGD steps "
              f"on F_k only, which {plain} take")
    per_step = local.lr_schedule is not None and local.lr_schedule.every == "step"
    for other, given in (("optimizer", not local.optimizer.plain),
                         ("clip", local.clip is not None), ("lr_schedule", per_step)):
        if given:
            at = f"{key}.local.{other}" if other in local_raw else f"train.local.{other}"
            p.add(at, local_raw.get(other, raw_local.get(other)),
                  f"does not apply beside solver {local.solver!r} ({where}): the local training "
                  "plugin takes its own steps (write the optimizer, clipping or per-step "
                  "schedule in it; ctx.lr is the round's lr)")


def _entry_overrides(raw: dict, a: dict, p: Problems, key: str) -> tuple[Any, Any] | None:
    """An entry's own `stragglers:` (merged over the scenario's) and `round:` (the cloud
    tier's round policy for this algorithm, in place of train.round: complete on its own);
    None when one is malformed (reported)."""
    strag = round_ = None
    if "stragglers" in a:
        raw_s = raw.get("stragglers") if isinstance(raw.get("stragglers"), dict) else {}
        if not isinstance(a["stragglers"], dict):
            p.add(f"{key}.stragglers", a["stragglers"], "expected a mapping")
            return None
        strag = build(StragglerSpec, {**raw_s, **a["stragglers"]}, p, f"{key}.stragglers")
    if "round" in a:
        if not isinstance(a["round"], dict):
            p.add(f"{key}.round", a["round"], "expected a mapping (a round policy)")
            return None
        round_ = build(RoundSpec, a["round"], p, f"{key}.round")
    if is_fail(strag) or is_fail(round_):
        return None
    return strag, round_


def _n_aggregators(topo: Any) -> int:
    tiers = getattr(topo, "tier_list", None)
    if tiers is not None:
        return sum(int(t.count) for t in tiers)
    edges = getattr(topo, "edges", None)
    return int(getattr(edges, "count", 1))


def _n_top(topo: Any) -> int | None:
    """Aggregators directly under the cloud (None for a graph file)."""
    tiers = getattr(topo, "tier_list", None)
    return int(tiers[0].count) if tiers and getattr(topo, "graph", None) is None else None


def _model_checks(p: Problems, model: ModelSpec) -> None:
    """A registered model name, and only options its factory takes."""

    if model.name not in MODELS:
        close = difflib.get_close_matches(model.name, list(MODELS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        p.add("model.name", model.name, f"unknown model{hint}; registered: "
              f"{', '.join(MODELS)} (more with hierfl.register_model){broken_note()}")
        return
    why = code_problem(MODELS.declaration(model.name))
    if why:
        p.add("model.name", model.name, why)
        return
    for key, msg in option_problems(model):
        value = model.options[key] if key in model.options else getattr(model, key)
        p.add(f"model.{key}", value, msg)


def _cross_checks(raw: dict, p: Problems, base_dir: str, topo: Any, data: DataSpec | None,
                  model: ModelSpec | None, train: TrainSpec | None,
                  entries: list[AlgorithmEntry], topo_file: str = "") -> None:
    clients = getattr(topo, "clients", None)
    n = int(clients.count) if clients is not None else None
    cpr = raw.get("train", {}).get("clients_per_round") if isinstance(raw.get("train"), dict) \
        else None
    cpr = train.clients_per_round if train is not None else cpr
    if n is not None and isinstance(cpr, int) and not isinstance(cpr, bool) and cpr > n:
        p.add("train.clients_per_round", cpr,
              f"more than the {n} clients of the topology (at most {n}, or all)")
    if data is not None:
        for key, value, msg in data_problems(data, base_dir, n):
            p.add(key, value, msg)
    if model is not None:
        _model_checks(p, model)
    if data is not None and model is not None and model.name == "linear" and \
            not is_registered(data) and DATASETS.facts(data.name).labelled:
        p.add("model.name", "linear", f"{data.name} data are labelled classes: use logreg or mlp")
    if train is not None:
        check_algorithms(p, entries, train.rounds, _n_top(topo))
        check_asynchrony(p, train, entries)
        items = raw.get("algorithms") if isinstance(raw.get("algorithms"), list) else []
        by_label = {lab: a for a in items if isinstance(a, dict)
                    and isinstance(lab := a.get("label", a.get("name")), str)}
        for i, e in enumerate(entries):
            entry_problems(p, i, e, REGISTRY.caps(e.name), train, by_label.get(e.label, {}), n)
    if data is None or model is None or train is None or n is None:
        return
    cpr = train.clients_per_round
    c = n if cpr == "all" else min(int(cpr), n)
    check_rounds(p, train, c, entries)
    shape = data_shape(data, n)
    if shape is None:
        return
    rows, dim, out, max_rows = shape
    check_work(p, train, entries, c, n, rows, model_params(model, dim, out), topo, topo_file)
    for key, value, msg in resource_problems(model, n, _n_aggregators(topo), c, rows, dim, out,
                                             [e.local for e in entries] or [train.local],
                                             max_rows):
        p.add(key, value, msg)


def load(path: str, seed: int | None = None, rounds: int | None = None,
         out: str | None = None) -> Scenario:
    """Read and validate a scenario file in full (its topology resolved into `.topology`)."""
    doc = read_doc(path, "scenario file")
    raw, file = doc.data, path
    p = Problems(file, doc.lines)
    if not isinstance(raw, dict):
        what = "empty" if raw is None else f"a {type(raw).__name__}"
        raise ScenarioError.one(file, "", raw, f"a scenario must be a mapping of keys (the file "
                                f"is {what}); see scenarios/quickstart.yaml")
    add_duplicates(p, doc)
    base_dir = os.path.dirname(os.path.abspath(path))
    plugins = load_plugins(raw, base_dir, p)    # before any algorithm, model or data name
    sf = build(ScenarioFile, raw, p)
    data = build_data(raw.get("data"), p)       # the named set's own spec
    topo_spec, topo_file = (load_topology(raw["topology"], base_dir, file, p)
                            if "topology" in raw else (None, file))
    if "name" in raw and isinstance(raw["name"], str):
        _check_name(p, "name", raw["name"], "the name")
    check_overrides(p, seed, rounds)
    entries = _algorithms(raw, p)
    model, train = _part(ModelSpec, raw.get("model")), _part(TrainSpec, raw.get("train", {}))
    _cross_checks(raw, p, base_dir, topo_spec, data, model, train, entries, topo_file)
    if isinstance(raw.get("output"), str) and raw["output"]:    # even when --out overrides
        check_output(p, "output", os.path.join(base_dir, raw["output"]))
    if out is not None:
        check_output(p, "--out", out)
    p.raise_if_any()
    assert isinstance(sf, ScenarioFile)
    train = sf.train
    if rounds is not None:
        train = dataclasses.replace(train, rounds=rounds)
    output = out if out is not None else (
        os.path.join(base_dir, sf.output) if sf.output else os.path.join("reports", sf.name))
    assert data is not None
    data = resolve_data_paths(data, base_dir)
    sc = Scenario(name=sf.name, seed=sf.seed if seed is None else seed, file=file,
                  topology=topo_spec, data=data, model=sf.model, train=train,
                  algorithms=tuple(entries), stragglers=sf.stragglers, report=sf.report,
                  output=os.path.normpath(output), monitor=sf.monitor,
                  topology_file=topo_file, plugins=plugins)
    return sc
