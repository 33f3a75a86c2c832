"""The only module that reads YAML. Validates a scenario (and its topology) in full, reporting
every problem at once with file, key path and value."""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from typing import Any

import yaml

from .errors import Problems, ScenarioError
from .fields import build, is_fail
from .schema import AlgorithmEntry, LocalSpec, Scenario, ScenarioFile

MAX_BYTES = 10_000_000
MAX_ALIASES = 200
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class _Loader(yaml.SafeLoader):
    """safe_load with a cap on aliases (no 'billion laughs')."""

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases = getattr(self, "_aliases", 0) + 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases")
        return super().compose_node(parent, index)


def read_yaml(path: str, what: str = "file") -> Any:
    """Parse a YAML file safely, turning every failure into a ScenarioError naming the file."""
    if not os.path.exists(path):
        raise ScenarioError.one(path, "", path, f"{what} not found")
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "", path, f"{what} is not a regular file")
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise ScenarioError.one(path, "", size, f"{what} larger than {MAX_BYTES} bytes")
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except OSError as exc:
        raise ScenarioError.one(path, "", path, f"cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError.one(path, "", path, f"{what} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        msg = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError.one(path, where, None, f"invalid YAML: {msg}") from None
    except RecursionError:
        raise ScenarioError.one(path, "", None, "YAML nested too deeply") from None


def load_topology(raw: Any, base_dir: str, file: str, problems: Problems) -> tuple[Any, str]:
    """Resolve `topology:` (path or inline mapping) to (TopologySpec | None, topology file)."""
    from ..topology.schema import TopologySpec

    topo_file = file
    if isinstance(raw, str):
        topo_file = os.path.normpath(os.path.join(base_dir, raw))
        try:
            raw = read_yaml(topo_file, "topology file")
        except ScenarioError as exc:
            problems.items.extend(exc.problems)
            return None, topo_file
    if not isinstance(raw, dict):
        problems.add("topology", raw, "expected a file path or a mapping")
        return None, topo_file
    tp = Problems(topo_file)
    spec = build(TopologySpec, raw, tp, "" if topo_file != file else "topology")
    problems.items.extend(tp.items)
    return (None if is_fail(spec) else spec), topo_file


def load(path: str, seed: int | None = None, rounds: int | None = None,
         out: str | None = None) -> tuple[Scenario, Any]:
    """Read and validate a scenario file. Returns (Scenario, TopologySpec)."""
    from ..algorithms.registry import REGISTRY

    raw = read_yaml(path, "scenario file")
    file = path
    p = Problems(file)
    if not isinstance(raw, dict):
        raise ScenarioError.one(file, "", raw, "a scenario must be a mapping of keys")
    base_dir = os.path.dirname(os.path.abspath(path))
    sf = build(ScenarioFile, raw, p)
    topo_spec, _ = (load_topology(raw["topology"], base_dir, file, p)
                    if "topology" in raw else (None, file))
    if is_fail(sf):
        p.raise_if_any()
    assert isinstance(sf, ScenarioFile)
    if not NAME_RE.match(sf.name) or ".." in sf.name:
        p.add("name", sf.name, "use letters, digits, '.', '-' and '_' only (it names a folder)")
    train = sf.train
    if rounds is not None:
        train = dataclasses.replace(train, rounds=rounds)
    # ---- algorithms
    raw_local = (raw.get("train") or {}).get("local") or {}
    entries: list[AlgorithmEntry] = []
    labels: set[str] = set()
    if not sf.algorithms:
        p.add("algorithms", sf.algorithms, "list at least one algorithm")
    for i, a in enumerate(sf.algorithms):
        key = f"algorithms[{i}]"
        if not isinstance(a, dict) or "name" not in a:
            p.add(key, a, "expected a mapping with a name: key")
            continue
        name = a["name"]
        if name not in REGISTRY:
            close = difflib.get_close_matches(str(name), list(REGISTRY), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.add(f"{key}.name", name, f"unknown algorithm{hint}; known: {', '.join(sorted(REGISTRY))}")
            continue
        cls = REGISTRY[name]
        label = a.get("label", name)
        if not isinstance(label, str) or not NAME_RE.match(label) or ".." in label:
            p.add(f"{key}.label", label, "use letters, digits, '.', '-' and '_' only")
            continue
        if label in labels:
            p.add(f"{key}.label", label, "labels must be unique (add label: to tell entries apart)")
        labels.add(label)
        local_raw = a.get("local", {})
        if not isinstance(local_raw, dict):
            p.add(f"{key}.local", local_raw, "expected a mapping")
            continue
        merged = {**raw_local, **local_raw}
        if "steps" in local_raw and "epochs" not in local_raw:
            merged.pop("epochs", None)
        if "epochs" in local_raw and "steps" not in local_raw:
            merged.pop("steps", None)
        local = build(LocalSpec, merged, p, f"{key}.local")
        hp = {k: v for k, v in a.items() if k not in ("name", "label", "local")}
        params = build(cls.Params, hp, p, key)
        if is_fail(local) or is_fail(params):
            continue
        if local.gamma is not None and not cls.supports_gamma:
            p.add(f"{key}.local.gamma", local.gamma,
                  f"{name} has no single local objective; gamma stops are not defined for it")
        edge_rounds = getattr(params, "edge_rounds", 1) if cls.hierarchical else 1
        entries.append(AlgorithmEntry(name, label, params, local, edge_rounds))
    # ---- cross-key checks
    if topo_spec is not None:
        n = topo_spec.clients.count
        cpr = train.clients_per_round
        if cpr != "all" and cpr > n:
            p.add("train.clients_per_round", cpr, f"more than the {n} clients of the topology")
    if sf.data.name == "npz":
        if not sf.data.path:
            p.add("data.path", None, "npz data needs path:")
        elif not os.path.isfile(os.path.join(base_dir, sf.data.path)):
            p.add("data.path", sf.data.path, "file not found")
    if sf.data.name in ("synthetic", "synthetic_iid") and sf.model.name == "linear":
        p.add("model.name", "linear", "synthetic data are labelled classes: use logreg or mlp")
    if sf.data.name == "digits" and sf.model.name == "linear":
        p.add("model.name", "linear", "digits are labelled classes: use logreg or mlp")
    output = out if out is not None else (
        os.path.join(base_dir, sf.output) if sf.output else os.path.join("reports", sf.name))
    p.raise_if_any()
    data = sf.data
    if data.path:
        data = dataclasses.replace(data, path=os.path.join(base_dir, data.path))
    sc = Scenario(name=sf.name, seed=sf.seed if seed is None else seed, file=file,
                  topology=sf.topology, data=data, model=sf.model, train=train,
                  algorithms=tuple(entries), stragglers=sf.stragglers, report=sf.report,
                  output=os.path.normpath(output))
    return sc, topo_spec
