"""OUT/scenario.yaml says what the run did: the scenario file as written, or, when the command
line overrode its seed, rounds or threads (`--seed`, `--rounds`, `--threads`), the file with
those values put in and a header naming them."""
from __future__ import annotations

import os
from typing import Any

import yaml

from ..config.schema import ExecutorSpec, TrainSpec
from ..outputs import atomic_text
from ..outputs.summary import SCENARIO_COPY


def _overrides(doc: dict, sc: Any) -> dict[str, tuple[Any, Any]]:
    """key -> (value in the file or its default, value the run used), where they differ."""
    train = doc.get("train") if isinstance(doc.get("train"), dict) else {}
    ex = train.get("executor") if isinstance(train.get("executor"), dict) else {}
    pairs = {"seed": (doc.get("seed", 0), sc.seed),
             "train.rounds": (train.get("rounds", TrainSpec().rounds), sc.train.rounds),
             "train.executor.threads": (ex.get("threads", ExecutorSpec().threads),
                                        sc.train.executor.threads)}
    return {k: v for k, v in pairs.items() if v[0] != v[1]}


def _put(doc: dict, key: str, value: Any) -> None:
    *path, last = key.split(".")
    for part in path:
        if not isinstance(doc.get(part), dict):
            doc[part] = {}
        doc = doc[part]
    doc[last] = value


def write_scenario_copy(sc: Any, out: str | None = None) -> str | None:
    """Rewrite OUT/scenario.yaml (already a verbatim copy) when the command line overrode the
    file; returns the overridden keys' summary, or None if the copy stands."""
    path = os.path.join(out or sc.output, SCENARIO_COPY)
    if not (sc.file and os.path.isfile(sc.file) and os.path.isfile(path)):
        return None
    try:
        with open(sc.file) as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    changed = _overrides(doc, sc)
    if not changed:
        return None
    for key, (_, new) in changed.items():
        _put(doc, key, new)
    said = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in changed.items())
    header = (f"# {os.path.basename(sc.file)} as run: the command line overrode {said}\n")
    atomic_text(path, header + yaml.safe_dump(doc, sort_keys=False))
    return said
