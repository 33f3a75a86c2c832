"""What a run records about its own set-up, for the report: a verbatim copy of the scenario (and
topology) file, and `summary.json` with the resolved scenario, every node's drawn speed and link,
and the data split (samples per client, label counts per client when small enough)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
from typing import Any

import numpy as np

from ..config.errors import ScenarioError
from ..config.yamldoc import read_yaml
from ..string_column import StringColumn
from . import summary_columns
from .files import atomic_text, same_file
from .jsontext import dumps_indent1

SUMMARY = "summary.json"
SCENARIO_COPY = "scenario.yaml"
TOPOLOGY_COPY = "topology.yaml"
MAX_LABEL_CELLS = 200_000      # clients x classes kept in the label-mix table


def _plain(obj: Any) -> Any:
    """JSON-ready copy of dataclasses, tuples, numpy scalars; non-finite floats become None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)


def scenario_dict(sc: Any) -> dict:
    """The resolved scenario as plain data (algorithms with their typed parameters)."""
    d = _plain(sc)
    d["algorithms"] = [_entry_dict(e) for e in sc.algorithms]
    if isinstance(d.get("topology"), dict) and d["topology"].get("mobility", 0) is None:
        del d["topology"]["mobility"]       # absent: the hash of before
    return d


# an entry's keys recorded only where it has them (issue 43's: privacy, robust rules, the
# attack it faces, the scenario's or its own, and secure aggregation; the report reads them)
ENTRY_OPTIONAL = ("stragglers", "round", "compress", "mobility", "privacy", "aggregate",
                  "attack", "secure_aggregation")


def _entry_dict(e: Any) -> dict:
    """An algorithm entry; its own stragglers:, round:, compress:, mobility:, privacy:,
    aggregate:, attack: (the scenario's where it has none) and secure_aggregation: only where
    it has them (absent: the hash of before; present: the resume fingerprint and the
    manifest's hash see an edit to them, and the report reads them)."""
    d = {"name": e.name, "label": e.label, "edge_rounds": e.edge_rounds,
         "params": _plain(e.params), "local": _plain(e.local)}
    for key in ENTRY_OPTIONAL:
        if getattr(e, key, None) is not None:
            d[key] = _plain(getattr(e, key))
    return d


def topology_dict(topo: Any) -> dict:
    """Every node below the cloud: role, parent, depth (cloud 0), FLOP/s and the link to its
    parent (latency, bandwidth up and down); works for any number of aggregator tiers. The
    cloud's FLOP/s is null where a graph file gives none (strict JSON has no NaN)."""
    nodes = topo.node_table()               # from the topology's arrays (no graph walk)
    edges = list(topo.edges)
    return {"cloud": {"flops": _plain(float(topo.tree.flops[0]))}, "nodes": nodes,
            "clients": StringColumn(list(topo.clients)),
            "client_edge": StringColumn([edges[e] for e in topo.edge_of], edges, topo.edge_of),
            **class_dict(topo)}


def class_dict(topo: Any) -> dict:
    """Per client (in `clients` order) its device and link class ("" where none: no
    `clients.mix`), and the link levels bottom up (metrics.csv's bytes_up_<level>)."""
    n = len(topo.clients)

    def classes(key: str) -> list[str]:          # no classes: "" each, coded as such
        given = list(getattr(topo, key, ()) or [""] * n)
        return given if given.count("") < len(given) else \
            StringColumn(given, [""], np.zeros(len(given), np.uint8))
    return {"device_class": classes("device_class"), "link_class": classes("link_class"),
            "tier_names": list(getattr(topo, "tier_names", ("cloud", "edge", "client"))),
            "levels": list(getattr(topo, "levels", {"client_edge": "", "edge_cloud": ""}))}


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def data_dict(data: Any) -> dict:
    out = {"train_counts": data.counts.tolist(), "test_counts": data.test_counts.tolist(),
           "dim": data.dim, "classes": int(data.n_classes)}
    n, c = data.n_clients, int(data.n_classes)
    if c and n * c <= MAX_LABEL_CELLS:
        y = data.y.numpy()
        owner = np.repeat(np.arange(n), data.counts)
        table = np.zeros((n, c), np.int64)
        np.add.at(table, (owner, y), 1)
        out["label_counts"] = table.tolist()
    return out


def build_summary(sc: Any, world: Any) -> dict:
    return {"scenario": scenario_dict(sc), "topology": topology_dict(world.topo),
            "data": data_dict(world.data),
            "model": {"name": world.model.name, "n_params": int(world.model.n_params),
                      "fwd_flops": float(world.model.fwd_flops)}}


def _copy(src: str, dst: str) -> None:
    """Copy a file, unless it is already there (a run of OUT/scenario.yaml into OUT)."""
    if not same_file(src, dst):
        shutil.copyfile(src, dst)


def write_run_summary(sc: Any, world: Any, out: str | None = None) -> str:
    """Copy the scenario (and topology) file into OUT and write OUT/summary.json, from the
    world the run built (never built again here)."""
    out = out or sc.output
    os.makedirs(out, exist_ok=True)
    if sc.file and os.path.isfile(sc.file):
        _copy(sc.file, os.path.join(out, SCENARIO_COPY))
        topo_file = sc.topology_file
        if topo_file and os.path.abspath(topo_file) != os.path.abspath(sc.file) \
                and os.path.isfile(topo_file):
            _copy(topo_file, os.path.join(out, TOPOLOGY_COPY))
    path = os.path.join(out, SUMMARY)
    spans: list = []       # its long number lists: kept in binary beside it for the report
    text = dumps_indent1(build_summary(sc, world), spans, summary_columns.LONG) + "\n"
    atomic_text(path, text)     # json.dumps(indent=1, sort_keys=True)'s text (jsontext.py)
    try:
        summary_columns.write(out, text, spans)
    except (OSError, MemoryError) as exc:   # a speed-up only: the report then reads the JSON
        print(f"warning: {os.path.join(out, summary_columns.NAME)} not written ({exc}); "
              "reports will read summary.json, more slowly", file=sys.stderr)
    return path


def read_summary(out: str) -> dict | None:
    """OUT/summary.json (its long number lists as numpy arrays where summary_columns.npz was
    written with it), or a minimal summary from OUT/scenario.yaml, or None."""
    p = os.path.join(out, SUMMARY)
    fast = summary_columns.read(out, p)
    if fast is not None:
        return fast
    if os.path.isfile(p):
        try:
            with open(p, encoding="utf-8") as fh:
                return json.load(fh)
        except ValueError as exc:   # edited or cut short (UnicodeDecodeError is one too)
            raise ScenarioError.one(p, "", None, f"cannot read the run's summary (corrupted?): "
                                    f"{type(exc).__name__}: {exc}") from None
    p = os.path.join(out, SCENARIO_COPY)
    if os.path.isfile(p):
        try:
            raw = read_yaml(p, "scenario copy")
        except Exception:  # a damaged copy must not stop a report
            return None
        if isinstance(raw, dict):
            return {"scenario": {k: raw.get(k) for k in ("name", "seed", "data", "model",
                                                         "train", "algorithms")}}
    return None


def comparable(summary: dict | None) -> str | None:
    """A key equal for two runs that differ only by seed (and where their files lie: the
    output folder, the scenario's path, and the topology file's when its contents are in
    scenario.topology; a graph file's are not: its path stays in the key), else None."""
    if not summary or "scenario" not in summary:
        return None
    topo = summary["scenario"].get("topology")
    graph = isinstance(topo, dict) and topo.get("graph") is not None
    drop = ("seed", "output", "file") + (() if graph else ("topology_file",))
    sc = {k: v for k, v in summary["scenario"].items() if k not in drop}
    return json.dumps(sc, sort_keys=True, default=str)
