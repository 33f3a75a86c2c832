"""The loader's part for user extensions: a scenario's `plugins:` imported before any name is
resolved, and the files of a data set (a built-in's or a plugin's) made absolute."""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from .. import plugins
from ..config.errors import Problems, ScenarioError
from ..config.schema import DataSpec
from ..data.registry import DATASETS, PATH_KEYS, is_registered


def load_plugins(raw: dict, base_dir: str, p: Problems) -> tuple[str, ...]:
    """Import the files of `plugins:` (relative to the scenario). A plugin that cannot be loaded
    stops the reading here (its names would show as unknown): raises every problem so far."""
    items = raw.get("plugins")
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return ()           # the ScenarioFile build reports a wrong type
    try:
        return tuple(plugins.load_all(items, base_dir, p.file, "plugins"))
    except ScenarioError as exc:
        for prob in exc.problems:
            p.add(prob.key, prob.value, prob.message)
        p.raise_if_any()
        raise               # pragma: no cover - raise_if_any raised


def resolve_data_paths(data: DataSpec, base_dir: str) -> DataSpec:
    """The files of `data` made absolute (relative to the scenario folder): a built-in set's
    declared files key (root:, path:), a registered (plugin) set's `path:` / `root:` options."""
    if not is_registered(data):
        facts = DATASETS.facts(data.name)
        keys = ((facts.files,) if facts.files is not None else ()) + facts.more_files
        made = {k: os.path.join(base_dir, getattr(data, k)) for k in keys if getattr(data, k)}
        return dataclasses.replace(data, **made) if made else data
    opts: dict[str, Any] = dict(data.options)  # type: ignore[attr-defined]
    for key in PATH_KEYS:
        if isinstance(opts.get(key), str):
            opts[key] = os.path.join(base_dir, opts[key])
    return dataclasses.replace(data, options=opts) \
        if opts != data.options else data  # type: ignore[attr-defined]
