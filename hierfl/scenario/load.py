"""The only module that reads YAML. Validates a scenario (and its topology) in full before
anything runs, reporting every problem at once as `file:line: key = value: message`.

Hostile input is bounded: files are read with a SafeLoader (no Python objects), at most
MAX_BYTES long, MAX_DEPTH levels deep, with at most MAX_ALIASES aliases and MAX_NODES values
once aliases are expanded (no "billion laughs"); recursive aliases are rejected. Sizes that would
not fit in memory are rejected before anything is allocated (`resource_problems`)."""
from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from typing import Any, NamedTuple

import yaml

from .errors import NO_VALUE, Problem, Problems, ScenarioError, line_of
from .fields import build, is_fail
from .schema import AlgorithmEntry, DataSpec, DistSpec, LocalSpec, ModelSpec, Scenario, \
    ScenarioFile, StragglerSpec, TrainSpec

MAX_BYTES = 10_000_000
MAX_ALIASES = 200
MAX_DEPTH = 64
MAX_NODES = 1_000_000
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


# ============================================================================ safe YAML
class _Loader(yaml.SafeLoader):
    """safe_load with caps on aliases, nesting depth and the number of values."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases (*name)", event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        if self._nodes > MAX_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_NODES} values", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Bomb(Exception):
    def __init__(self, message: str, node: yaml.Node):
        super().__init__(message)
        self.node = node


def _expanded_size(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """Values in the document once aliases are expanded (raises _Bomb past MAX_NODES or on a
    recursive alias). Depth is bounded by MAX_DEPTH, so recursion is safe."""
    k = id(node)
    if k in memo:
        return memo[k]
    if k in active:
        raise _Bomb("a recursive alias (an anchor used inside itself)", node)
    if isinstance(node, yaml.ScalarNode):
        return 1
    active.add(k)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo, active)
            if total > MAX_NODES:
                break
    else:
        for key, value in node.value:
            total += _expanded_size(key, memo, active) + _expanded_size(value, memo, active)
            if total > MAX_NODES:
                break
    active.discard(k)
    if total > MAX_NODES:
        raise _Bomb(f"aliases expand to more than {MAX_NODES} values (an alias bomb?)", node)
    memo[k] = total
    return total


def _key_lines(node: yaml.Node) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """(key path -> 1-based line, duplicates as (path, line, first line)). Each node is visited
    once: the values under an alias are located at their anchor."""
    lines: dict[str, int] = {}
    dups: list[tuple[str, int, int]] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(node, "")]
    while stack:
        n, path = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.SequenceNode):
            for i, child in enumerate(n.value):
                p = f"{path}[{i}]"
                lines.setdefault(p, child.start_mark.line + 1)
                stack.append((child, p))
        elif isinstance(n, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in n.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                p = f"{path}.{key.value}" if path else str(key.value)
                line = key.start_mark.line + 1
                if key.value in first:
                    dups.append((p, line, first[key.value]))
                first.setdefault(key.value, line)
                lines.setdefault(p, line)
                stack.append((value, p))
    return lines, dups


class Doc(NamedTuple):
    data: Any
    lines: dict[str, int]                       # key path -> line
    duplicates: list[tuple[str, int, int]]      # (key path, line, line of the first one)


def _check_file(path: str, what: str) -> None:
    try:
        exists = os.path.exists(path)
    except (ValueError, OSError):
        exists = False
    if not exists:
        raise ScenarioError.one(path, "", path, f"{what} not found")
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "", path, f"{what} is not a regular file")


def read_doc(path: str, what: str = "file") -> Doc:
    """Parse a YAML file safely, with the line of every key; every failure is a ScenarioError
    naming the file."""
    _check_file(path, what)
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise ScenarioError.one(path, "", size, f"{what} larger than {MAX_BYTES} bytes")
        with open(path, "rb") as fh:
            text = fh.read(MAX_BYTES + 1).decode("utf-8")
    except OSError as exc:
        raise ScenarioError.one(path, "", path, f"cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError.one(path, "", path, f"{what} is not UTF-8 text") from None
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return Doc(None, {}, [])
        _expanded_size(node, {}, set())
        lines, dups = _key_lines(node)
        data = loader.construct_document(node)
    except _Bomb as exc:
        raise ScenarioError.one(path, "", None, f"invalid YAML: {exc}",
                                exc.node.start_mark.line + 1) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        msg = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
        line = mark.line + 1 if mark is not None else None
        col = f" (column {mark.column + 1})" if mark is not None else ""
        raise ScenarioError.one(path, "", None, f"invalid YAML: {msg}{col}", line) from None
    except RecursionError:
        raise ScenarioError.one(path, "", None, "YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    return Doc(data, lines, dups)


def read_yaml(path: str, what: str = "file") -> Any:
    """Parse a YAML file safely (see read_doc); the data only."""
    return read_doc(path, what).data


def locate(problems: list[Problem]) -> list[Problem]:
    """Fill in the line of problems raised after loading (data, model, graph building) by
    re-reading their file's key lines. Never raises."""
    cache: dict[str, dict[str, int]] = {}
    out = []
    for p in problems:
        if p.line is None and p.file and p.key and p.file.endswith((".yaml", ".yml")):
            if p.file not in cache:
                try:
                    cache[p.file] = read_doc(p.file).lines
                except Exception:  # noqa: BLE001 - best effort, the problem is reported anyway
                    cache[p.file] = {}
            found = line_of(cache[p.file], p.key)
            if found is not None:
                p = dataclasses.replace(p, line=found)
        out.append(p)
    return out


# ============================================================================ topology
def topology_file(sc: Scenario) -> str:
    """The file that holds a scenario's topology (the scenario itself when inline)."""
    if isinstance(sc.topology, str):
        return os.path.normpath(os.path.join(os.path.dirname(sc.file), sc.topology))
    return sc.file


def load_topology(raw: Any, base_dir: str, file: str, problems: Problems) -> tuple[Any, str]:
    """Resolve `topology:` (path or inline mapping) to (TopologySpec | None, topology file),
    validating it in full (structure as well as types)."""
    from ..topology.check import check_spec
    from ..topology.schema import TopologySpec

    topo_file, lines, prefix = file, problems.lines, "topology"
    if isinstance(raw, str):    # named relative to the scenario, as the user wrote it
        topo_file = os.path.normpath(os.path.join(os.path.dirname(file), raw))
        try:
            _check_file(topo_file, "topology file")
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
        for key, line, first in doc.duplicates:
            tp.add(key, NO_VALUE, f"key given twice (first on line {first}); say it once", line)
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
        check_spec(spec, tp, prefix)
    problems.items.extend(tp.items)
    return (None if is_fail(spec) else spec), topo_file


# ============================================================================ resources
STATE_COPIES = 3        # (N, P) tensors an algorithm may keep (models, control variates, ...)
ROUND_COPIES = 6        # (C, P) tensors of one round (start, iterate, gradient, anchors, ...)
GRAPH_BYTES = 2_000     # networkx node + two link attribute dicts, per node
DEFAULT_SAMPLES_MEAN = math.exp(4 + 2 ** 2 / 2) + 50   # int(lognormal(4, 2)) + 50


def memory_limit() -> int:
    """This machine's physical memory (64 GiB where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 64 << 30


def model_params(model: ModelSpec, dim: int, out_dim: int) -> int:
    widths = [dim, *model.hidden, out_dim] if model.name == "mlp" else [dim, out_dim]
    return sum(a * b + (b if model.bias else 0) for a, b in zip(widths[:-1], widths[1:]))


def _mean(d: Any) -> float:
    if not isinstance(d, DistSpec):
        return float(d)
    if d.dist == "constant":
        return float(d.value)  # type: ignore[arg-type]
    if d.dist == "uniform":
        return (float(d.low) + float(d.high)) / 2  # type: ignore[arg-type]
    if d.dist == "lognormal":
        return float(d.median) * math.exp(min(float(d.sigma) ** 2 / 2, 700))  # type: ignore
    if d.dist == "normal":
        return max(float(d.mean), float(d.min) if d.min is not None else -math.inf)  # type: ignore
    w = d.weights or [1.0] * len(d.choices or [])
    return sum(a * b for a, b in zip(d.choices or [], w)) / max(sum(w), 1e-300)


def data_shape(data: DataSpec, n_clients: int) -> tuple[float, int, int] | None:
    """(expected training rows per client, dim, classes) of the built-in sets; None for npz."""
    if data.name in ("synthetic", "synthetic_iid"):
        mean = DEFAULT_SAMPLES_MEAN if data.samples is None else max(_mean(data.samples), 2.0)
        return min(mean, data.max_samples), data.dim, data.classes
    if data.name == "digits":
        from ..data.real import DIGITS_SAMPLES
        return DIGITS_SAMPLES / max(n_clients, 1), 64, 10
    return None


def resource_problems(model: ModelSpec, n_clients: int, n_nodes: int, clients_per_round: int,
                      rows_per_client: float, dim: int, out_dim: int,
                      locals_: list[LocalSpec], max_rows: float) -> list[tuple[str, float, str]]:
    """(key, value, message) for a scenario that would not fit in this machine's memory: an
    estimate of clients x parameters (state), of one round's batches and of the data."""
    p = model_params(model, dim, out_dim)
    c = clients_per_round
    parts = {
        "client state": 4.0 * p * n_clients * STATE_COPIES,
        "one round": 4.0 * p * c * ROUND_COPIES,
        "data": 4.0 * n_clients * rows_per_client * (dim + 1),
        "topology graph": float(GRAPH_BYTES) * (n_clients + n_nodes + 1),
    }
    plan, plan_key, plan_value = 0.0, "train.local", None
    width = max(model.hidden) if model.name == "mlp" and model.hidden else 0
    for loc in locals_:
        b = max_rows if loc.batch_size == "full" else float(loc.batch_size)
        if loc.steps is not None:
            s = float(loc.steps)
        elif loc.batch_size == "full":
            s = 1.0
        else:
            s = (loc.epochs or 1) * math.ceil(max(rows_per_client, 1) / b)
        size = 12.0 * c * s * b + 8.0 * c * b * (width + dim + out_dim)
        if size > plan:
            plan = size
            plan_key, plan_value = (("train.local.batch_size", loc.batch_size) if b >= s else
                                    ("train.local.steps", loc.steps) if loc.steps is not None
                                    else ("train.local.epochs", loc.epochs))
    parts["minibatch plan"] = plan
    total, limit = sum(parts.values()), memory_limit()
    if total <= limit:
        return []
    worst = max(parts, key=lambda k: parts[k])
    detail = ", ".join(f"{k} {v / 2**30:.3g} GiB" for k, v in parts.items() if v >= 2**30 / 10)
    msg = (f"needs about {total / 2**30:.3g} GiB ({detail}; {n_clients} clients x {p} "
           f"parameters), more than this machine's {limit / 2**30:.3g} GiB (resource guard)")
    key, value = {"client state": ("model", f"{p} parameters"),
                  "one round": ("train.clients_per_round", c),
                  "data": ("data", f"{n_clients * rows_per_client:.3g} rows x {dim}"),
                  "topology graph": ("topology.clients.count", n_clients),
                  "minibatch plan": (plan_key, plan_value)
                  }[worst]
    return [(key, value, msg)]


def guard_resources(sc: Scenario, n_clients: int, n_nodes: int, dim: int, out_dim: int,
                    rows: int) -> None:
    """The resource guard once the data is built (npz sets are only sized then)."""
    cpr = sc.train.clients_per_round
    c = n_clients if cpr == "all" else min(int(cpr), n_clients)
    probs = resource_problems(sc.model, n_clients, n_nodes, c, rows / max(n_clients, 1), dim,
                              out_dim, [e.local for e in sc.algorithms] or [sc.train.local],
                              float(rows))
    if probs:
        raise ScenarioError([Problem(sc.file, k, v, m) for k, v, m in probs])


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


def _algorithms(raw: dict, p: Problems) -> list[AlgorithmEntry]:
    """Validate every algorithm entry (even when other sections are wrong)."""
    from ..algorithms.registry import REGISTRY

    items = raw.get("algorithms")
    if not isinstance(items, list):
        return []           # reported by the ScenarioFile build
    if not items:
        p.add("algorithms", items, "list at least one algorithm")
    train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
    raw_local = train.get("local") if isinstance(train.get("local"), dict) else {}
    train_local_ok = _part(LocalSpec, raw_local) is not None
    entries: list[AlgorithmEntry] = []
    labels: dict[str, int] = {}
    known = ", ".join(sorted(REGISTRY))
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
            close = difflib.get_close_matches(name, list(REGISTRY), n=1) \
                if isinstance(name, str) else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.add(f"{key}.name", name, f"unknown algorithm{hint}; known: {known}")
            continue
        cls = REGISTRY[name]
        label = a.get("label", name)
        if not _check_name(p, f"{key}.label", label, "a label"):
            continue
        if label in labels:
            p.add(f"{key}.label", label, f"labels must be unique (also algorithms[{labels[label]}]"
                  "; add label: to tell entries apart)")
        labels.setdefault(label, i)
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
        hp = {k: v for k, v in a.items() if k not in ("name", "label", "local", "stragglers")}
        params = build(cls.Params, hp, p, key)
        strag = None
        if "stragglers" in a:      # per-entry override of the scenario's stragglers:
            raw_s = raw.get("stragglers") if isinstance(raw.get("stragglers"), dict) else {}
            if not isinstance(a["stragglers"], dict):
                p.add(f"{key}.stragglers", a["stragglers"], "expected a mapping")
                continue
            strag = build(StragglerSpec, {**raw_s, **a["stragglers"]}, p, f"{key}.stragglers")
            if is_fail(strag):
                continue
        if is_fail(local) or is_fail(params):
            continue
        if local.gamma is not None and not cls.supports_gamma:
            p.add(f"{key}.local.gamma", local.gamma,
                  f"{name} has no single local objective; gamma stops are not defined for it")
        edge_rounds = getattr(params, "edge_rounds", 1) if cls.hierarchical else 1
        entries.append(AlgorithmEntry(name, label, params, local, edge_rounds, strag))
    return entries


def _n_aggregators(topo: Any) -> int:
    tiers = getattr(topo, "tier_list", None)
    if tiers is not None:
        return sum(int(t.count) for t in tiers)
    edges = getattr(topo, "edges", None)
    return int(getattr(edges, "count", 1))


def _cross_checks(raw: dict, p: Problems, base_dir: str, topo: Any, data: DataSpec | None,
                  model: ModelSpec | None, train: TrainSpec | None,
                  entries: list[AlgorithmEntry]) -> None:
    clients = getattr(topo, "clients", None)
    n = int(clients.count) if clients is not None else None
    cpr = raw.get("train", {}).get("clients_per_round") if isinstance(raw.get("train"), dict) \
        else None
    cpr = train.clients_per_round if train is not None else cpr
    if n is not None and isinstance(cpr, int) and not isinstance(cpr, bool) and cpr > n:
        p.add("train.clients_per_round", cpr,
              f"more than the {n} clients of the topology (at most {n}, or all)")
    if data is not None and data.name == "npz":
        if not data.path:
            p.add("data.path", None, "npz data needs path: (a file relative to the scenario)")
        else:
            from ..data.real import npz_problem
            msg = npz_problem(os.path.join(base_dir, data.path), memory_limit())
            if msg:
                p.add("data.path", data.path, msg)
    if data is not None and model is not None and model.name == "linear" and \
            data.name in ("synthetic", "synthetic_iid", "digits"):
        p.add("model.name", "linear", f"{data.name} data are labelled classes: use logreg or mlp")
    if data is not None and data.name == "digits" and n is not None:
        from ..data.real import DIGITS_SAMPLES
        if 2 * n > DIGITS_SAMPLES:
            p.add("data.name", "digits", f"digits has {DIGITS_SAMPLES} samples: at most "
                  f"{DIGITS_SAMPLES // 2} clients (two rows each), the topology has {n}")
        elif data.partition.kind == "shards" and n * data.partition.shards_per_client > \
                DIGITS_SAMPLES:
            p.add("data.partition.shards_per_client", data.partition.shards_per_client,
                  f"{n} clients x this many shards is more than the {DIGITS_SAMPLES} samples")
    if data is None or model is None or train is None or n is None:
        return
    shape = data_shape(data, n)
    if shape is None:
        return
    rows, dim, out = shape
    cpr = train.clients_per_round
    c = n if cpr == "all" else min(int(cpr), n)
    max_rows = float(data.max_samples) if data.name != "digits" else float(rows)
    for key, value, msg in resource_problems(model, n, _n_aggregators(topo), c, rows, dim, out,
                                             [e.local for e in entries] or [train.local],
                                             max_rows):
        p.add(key, value, msg)


def load(path: str, seed: int | None = None, rounds: int | None = None,
         out: str | None = None) -> tuple[Scenario, Any]:
    """Read and validate a scenario file in full. Returns (Scenario, TopologySpec)."""
    doc = read_doc(path, "scenario file")
    raw, file = doc.data, path
    p = Problems(file, doc.lines)
    if not isinstance(raw, dict):
        what = "empty" if raw is None else f"a {type(raw).__name__}"
        raise ScenarioError.one(file, "", raw, f"a scenario must be a mapping of keys (the file "
                                f"is {what}); see scenarios/quickstart.yaml")
    for key, line, first in doc.duplicates:
        p.add(key, NO_VALUE, f"key given twice (first on line {first}); say it once", line)
    base_dir = os.path.dirname(os.path.abspath(path))
    sf = build(ScenarioFile, raw, p)
    topo_spec, _ = (load_topology(raw["topology"], base_dir, file, p)
                    if "topology" in raw else (None, file))
    if "name" in raw and isinstance(raw["name"], str):
        _check_name(p, "name", raw["name"], "the name")
    if rounds is not None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 1e7:
            p.add("--rounds", rounds, "must be an integer in 1..10000000")
    entries = _algorithms(raw, p)
    data, model, train = (_part(DataSpec, raw.get("data")), _part(ModelSpec, raw.get("model")),
                          _part(TrainSpec, raw.get("train", {})))
    _cross_checks(raw, p, base_dir, topo_spec, data, model, train, entries)
    p.raise_if_any()
    assert isinstance(sf, ScenarioFile)
    train = sf.train
    if rounds is not None:
        train = dataclasses.replace(train, rounds=rounds)
    output = out if out is not None else (
        os.path.join(base_dir, sf.output) if sf.output else os.path.join("reports", sf.name))
    data = sf.data
    if data.path:
        data = dataclasses.replace(data, path=os.path.join(base_dir, data.path))
    sc = Scenario(name=sf.name, seed=sf.seed if seed is None else seed, file=file,
                  topology=sf.topology, data=data, model=sf.model, train=train,
                  algorithms=tuple(entries), stragglers=sf.stragglers, report=sf.report,
                  output=os.path.normpath(output), monitor=sf.monitor)
    return sc, topo_spec
