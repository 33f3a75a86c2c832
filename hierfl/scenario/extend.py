"""The loader's part for user extensions: a scenario's `plugins:` imported before any name is
resolved, a registered (plugin) data set's keys gathered as its loader's options, and the data
set name checked against the built-in sets and the registry."""
from __future__ import annotations

import os
from typing import Any

from ..config.errors import Problems, ScenarioError
from ..config.schema import DataSpec


def load_plugins(raw: dict, base_dir: str, p: Problems) -> tuple[str, ...]:
    """Import the files of `plugins:` (relative to the scenario). A plugin that cannot be loaded
    stops the reading here (its names would show as unknown): raises every problem so far."""
    from .. import plugins

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


def gather_data_options(raw: dict) -> dict:
    """`raw` with a registered data set's keys (all but name) moved into `data.options`, so
    that they reach its loader unchecked by the built-in sets' fields (an unknown name's too:
    its one problem is the name)."""
    from ..config.schema import BUILTIN_DATA

    data = raw.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or \
            data["name"] in BUILTIN_DATA:
        return raw
    given = data.get("options") if isinstance(data.get("options"), dict) else {}
    rest = {k: v for k, v in data.items() if k not in ("name", "options")}
    return {**raw, "data": {"name": data["name"], "options": {**given, **rest}}}


def data_checks(p: Problems, data: DataSpec, given: object = None) -> bool:
    """A known data set name, only keys (of the raw mapping `given`) a built-in set reads and
    only options a registered set's loader takes; False when the name is unknown (the other data
    checks are then skipped)."""
    from ..data.check import key_problems
    from ..data.registry import name_problem, option_problems

    msg = name_problem(data.name)
    if msg:
        p.add("data.name", data.name, msg)
        return False
    for key, msg in option_problems(data):
        p.add(f"data.{key}", data.options.get(key, data.options), msg)
    for key, value, msg in key_problems(data.name, given):
        p.add(key, value, msg)
    return True


def resolve_data_paths(data: DataSpec, base_dir: str) -> DataSpec:
    """A registered data set's `path:` / `root:` options made absolute (like the built-ins')."""
    import dataclasses

    from ..data.registry import PATH_KEYS

    opts: dict[str, Any] = dict(data.options)
    for key in PATH_KEYS:
        if isinstance(opts.get(key), str):
            opts[key] = os.path.join(base_dir, opts[key])
    return dataclasses.replace(data, options=opts) if opts != data.options else data
