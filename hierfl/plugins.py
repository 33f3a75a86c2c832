"""User code that extends hierfl: a plugin is a Python file that registers models, algorithms or
data sets when it is imported (`@hierfl.register_model("name")`, `hierfl.register_algorithm(cls)`,
`@hierfl.register_dataset("name")`).

Plugins are named by a scenario's `plugins:` list (paths relative to the scenario) or by
`--plugin FILE` on any command. Each file is imported once per process under a name derived from
its absolute path, so loading the same file twice (a scenario and the command line, a sweep's
points) registers once, and classes defined in it pickle by reference to that name.

Other processes (sweep workers, Ray workers of the ray executor, on this machine or another)
receive `bundle()` — each loaded file's absolute path and source text — with their task and call
`ensure(bundle)` before they unpickle or build anything: the same modules under the same names,
without needing the files on the worker's disk."""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import traceback

from .config.errors import ScenarioError
from .config.paths import not_a_file

_LOADED: dict[str, str] = {}            # absolute path -> source text, in load order

Bundle = tuple[tuple[str, str], ...]


def module_name(path: str) -> str:
    """The module name a plugin file is imported under (stable across processes)."""
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
    stem = "".join(ch if ch.isalnum() else "_" for ch in os.path.splitext(
        os.path.basename(path))[0])
    return f"hierfl_plugin_{stem}_{digest}"


def load_file(path: str, file: str = "", key: str = "--plugin") -> None:
    """Import one plugin file. Errors name the file that asked for it (`file`, `key`) and the
    plugin's own failing line: a ScenarioError (exit 2), never a traceback."""
    path = os.path.abspath(path)
    if path in _LOADED:
        return
    kind = not_a_file(path)
    if kind:
        raise ScenarioError.one(file, key, path, f"the plugin file is {kind}, not a regular "
                                "file")
    if not os.path.isfile(path):
        raise ScenarioError.one(file, key, path, "no such plugin file")
    if not path.endswith(".py"):
        raise ScenarioError.one(file, key, path, "a plugin is a Python file (.py)")
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError.one(file, key, path, f"cannot be read: {exc}") from None
    _install(path, source, file, key)


def _install(path: str, source: str, file: str, key: str) -> None:
    """Execute `source` as the module of plugin file `path` (registered in sys.modules first, so
    that dataclasses and pickling find it); on error nothing stays registered."""
    name = module_name(path)
    spec = importlib.util.spec_from_file_location(name, path, loader=_SourceText(path, source))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code: a clear message (its
        del sys.modules[name]                 # sys.exit() too: hierfl would end silently, 0)
        text = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        if isinstance(exc, SystemExit):
            text = f"{exc.code!r} (a plugin registers what it defines; it must not exit)"
        raise ScenarioError.one(file, key, path, f"the plugin raised {type(exc).__name__}: "
                                f"{text}{_user_line(exc, path)}") from None
    _LOADED[path] = source


class _SourceText(importlib.abc.SourceLoader):
    """Imports a plugin from its source text, as if from `path` (tracebacks name the file;
    nothing is cached: the import machinery's own compile, no __future__ flags of ours)."""

    def __init__(self, path: str, source: str):
        self.path, self.source = path, source

    def get_filename(self, fullname: str) -> str:
        return self.path

    def get_data(self, path: str) -> bytes:
        return self.source.encode("utf-8")


def _user_line(exc: BaseException, path: str) -> str:
    """" (at FILE:LINE)": where in the plugin file the error was raised."""
    if isinstance(exc, SyntaxError) and exc.filename == path and exc.lineno:
        return f" (at {path}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    return f" (at {path}:{frames[-1].lineno})" if frames else f" (in {path})"


def load_all(paths: list[str] | tuple[str, ...], base_dir: str = "", file: str = "",
             key: str = "plugins") -> list[str]:
    """Import plugin files named relative to `base_dir` (a scenario's folder), in order;
    returns their absolute paths."""
    out = []
    for i, p in enumerate(paths):
        full = os.path.abspath(p if os.path.isabs(p) or not base_dir
                               else os.path.join(base_dir, p))
        load_file(full, file, f"{key}[{i}]" if key == "plugins" else key)
        out.append(full)
    return out


def loaded() -> list[str]:
    """Absolute paths of the plugin files imported in this process, in load order."""
    return list(_LOADED)


def bundle() -> Bundle:
    """(absolute path, source text) of every loaded plugin: what another process needs."""
    return tuple(_LOADED.items())


def ensure(items: Bundle | list | tuple) -> None:
    """In a worker: import every plugin of `items` (from `bundle()`) not imported yet, from its
    source text, under the same module name as in the process that sent it."""
    for path, source in items:
        if path not in _LOADED:
            _install(path, source, "", "plugins")
