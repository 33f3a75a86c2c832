"""Built-ins and plugins, one declaration each: the registry of every kind of named thing a
scenario chooses (an algorithm, a model, a data set, a codec, ...).

A built-in is declared once, next to its code, in a torch-free module: its name, its keys (a
frozen dataclass whose fields carry docs and checks), its kind's facts (an algorithm's
capabilities and state sizes, a model's task) and where its code is ("module:attribute",
imported when first used). The cheap commands (`validate`, `docs`, `report`) read declarations
and never import torch; a run imports the code. A registry finds its kind's built-ins by
importing every subpackage of its home package (`hierfl.algorithms.fedprox`, ...) or, for kinds
whose code is torch-free, every module: the import runs the declaration. Adding a built-in is
its package, its tests and its docs page: there is no table elsewhere to edit.

A third party does what the built-ins do, from a module of its own, reached in one of three ways:

- a scenario's `plugins: [file.py]` or `--plugin FILE` (hierfl/plugins.py);
- an entry point of an installed distribution, the ecosystem's convention (pytest's `pytest11`):

      [project.entry-points."hierfl.plugins"]
      my_fl = "my_fl.plugin"

  Entry points are imported when a name is asked for that no built-in or loaded plugin has, or
  when every name is listed (`hierfl docs`), once per process. A broken one is reported as a
  ScenarioError naming the distribution, and only where it matters: a scenario that names built-ins
  never imports them.

The registries of this module are mappings `name -> object` (a lookup imports the object's
module); `declaration(name)` gives the torch-free declaration without importing anything."""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import sys
import traceback
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Callable

from .config.errors import ScenarioError

ENTRY_POINT_GROUP = "hierfl.plugins"


@dataclass(frozen=True)
class Declaration:
    """What a registry knows of one name without importing its code."""

    kind: str               # "algorithm", "model", "data set", "codec", ...
    name: str
    code: str = ""          # "module:attribute" of the object, imported on first lookup
    params: type | None = None      # frozen dataclass of its scenario keys (docs and checks)
    facts: Any = None       # the kind's own torch-free facts (Capabilities, task, ...)
    summary: str = ""       # one line for listings and the generated reference
    origin: str = ""        # the module that declared it (a plugin file, an entry point, ...)
    obj: Any = field(default=None, compare=False)   # the object, once imported or given

    @property
    def builtin(self) -> bool:
        return self.origin.startswith("hierfl.")


class Registry(MutableMapping):
    """name -> object of one kind. Built-ins are found by importing the home package's
    subpackages (or modules, `scan="modules"`) on first use; plugins add theirs with `declare`."""

    def __init__(self, kind: str, home: str, scan: str = "packages",
                 describe: Callable[[Any], dict[str, Any]] | None = None):
        self.kind, self.home, self.scan = kind, home, scan
        self._describe = describe       # object -> Declaration fields, for objects given
        #                                 eagerly (params, facts, summary)
        self._decls: dict[str, Declaration] = {}
        self._scanned = False
        _REGISTRIES.append(self)

    # ------------------------------------------------------------------ declaring
    def declare(self, decl: Declaration) -> Declaration:
        """Add `decl`; the same thing declared again (a plugin module imported anew) replaces
        it, another thing under a taken name is a ValueError."""
        if not decl.builtin:        # a plugin's name checked against every built-in's
            self._builtins()
        have = self._decls.get(decl.name)
        if have is not None and not _same(have, decl):
            raise ValueError(f"{self.kind} name {decl.name!r} is taken by {_where(have)}; "
                             "choose another name")
        self._decls[decl.name] = decl
        return decl

    # ------------------------------------------------------------------ finding
    def _builtins(self) -> None:
        """Import every declaring module of the home package (once)."""
        if self._scanned:
            return
        self._scanned = True
        pkg = importlib.import_module(self.home)
        for m in pkgutil.iter_modules(pkg.__path__):
            if (m.ispkg or self.scan == "modules") and not m.name.startswith("_"):
                importlib.import_module(f"{self.home}.{m.name}")

    def declared(self, name: str) -> Declaration | None:
        """The declaration of `name` among the built-ins and the plugins loaded so far."""
        self._builtins()
        return self._decls.get(name)

    def declaration(self, name: str) -> Declaration:
        """The declaration of `name`, importing no code (KeyError when unknown, after the
        installed entry points were looked at)."""
        self._builtins()
        decl = self._decls.get(name)
        if decl is None and load_entry_points():
            decl = self._decls.get(name)
        if decl is None:
            raise KeyError(name)
        return decl

    def __getitem__(self, name: str) -> Any:
        decl = self.declaration(name)
        if decl.obj is None:
            decl = self._decls[name] = _with_obj(decl, _import(decl))
        return decl.obj

    def __setitem__(self, name: str, obj: Any) -> None:
        more = self._describe(obj) if self._describe else {}
        self.declare(Declaration(self.kind, name, obj=obj, origin=_module_of(obj), **more))

    def __delitem__(self, name: str) -> None:
        del self._decls[name]

    def __contains__(self, name: object) -> bool:       # without importing any code
        try:
            self.declaration(name)          # type: ignore[arg-type]
        except (KeyError, TypeError):
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        self._builtins()
        return iter(sorted(self._decls))

    def __len__(self) -> int:
        self._builtins()
        return len(self._decls)

    def names(self, everything: bool = False) -> list[str]:
        """Every known name, sorted; `everything`: the installed entry points' too."""
        if everything:
            load_entry_points()
        return list(self)

    def snapshot(self) -> dict[str, Declaration]:
        """The declarations as they stand (tests restore them with `restore`)."""
        self._builtins()
        return dict(self._decls)

    def restore(self, snap: dict[str, Declaration]) -> None:
        self._decls = dict(snap)

    def is_builtin(self, name: str) -> bool:
        return name in self and self.declaration(name).builtin

    def unknown(self, name: Any) -> str:
        """Why `name` is not a known name: a 'did you mean', the known names, and the
        entry points that could not be imported."""
        load_entry_points()
        known = list(self)
        close = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown {self.kind}{hint}; known: {', '.join(known)}{broken_note()}"


def forward_to_code(package: str, code: str) -> None:
    """`from hierfl.algorithms.fedavg import FedAvg` (the module path before built-ins became
    packages) keeps working: a name the declaring package lacks is looked up in its code module,
    imported then (PEP 562), when that module lives inside the package."""
    target = code.partition(":")[0]
    module = sys.modules.get(package)
    if module is None or not target.startswith(package + ".") or "__getattr__" in vars(module):
        return

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(target), attr)

    module.__getattr__ = __getattr__        # type: ignore[attr-defined]


_REGISTRIES: list[Registry] = []


def _import(decl: Declaration) -> Any:
    """The object `decl.code` names ("module:attribute"); a failure is a ScenarioError naming
    the declaration and where it was made (a plugin's wrong path, a module that raises)."""
    module, _, attr = decl.code.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a declaration's code, anyone's
        raise ScenarioError.one("", f"{decl.kind} {decl.name!r}", decl.code,
                                f"its code (declared in {_origin_file(decl)}) cannot be "
                                f"imported: {type(exc).__name__}: {exc}{_last_frame(exc)}"
                                ) from None
    return obj


def _origin_file(decl: Declaration) -> str:
    module = sys.modules.get(decl.origin)
    return str(getattr(module, "__file__", None) or decl.origin or "?")


def code_problem(decl: Declaration) -> str | None:
    """Why `decl.code`'s module cannot be found, found without importing it (torch), or None:
    `hierfl validate` refuses a declaration whose run would fail to import its code."""
    if decl.obj is not None or not decl.code:
        return None
    module = decl.code.partition(":")[0]
    try:
        found = importlib.util.find_spec(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a parent package that raises
        found, why = None, f": {type(exc).__name__}: {exc}"
    else:
        why = ""
    if found is None:
        return (f"its code {decl.code!r} (declared in {_origin_file(decl)}) names no "
                f"importable module{why}")
    return None


def _with_obj(decl: Declaration, obj: Any) -> Declaration:
    return Declaration(decl.kind, decl.name, decl.code, decl.params, decl.facts, decl.summary,
                       decl.origin, obj)


def _module_of(obj: Any) -> str:
    return str(getattr(obj, "__module__", "") or "")


def _key(decl: Declaration) -> str:
    """Where a declaration's thing lives: "module:qualname" (or its code string)."""
    if decl.obj is not None:
        return f"{_module_of(decl.obj)}:{getattr(decl.obj, '__qualname__', repr(decl.obj))}"
    return decl.code


def _same(a: Declaration, b: Declaration) -> bool:
    """The same thing declared twice: the same code, or the same module and qualified name
    (a plugin module imported anew in this process defines its class again)."""
    if a.obj is not None and b.obj is not None:
        if a.obj is b.obj:
            return True
        sa, sb = _site(a.obj), _site(b.obj)
        if sa is not None and sb is not None and sa != sb:
            return False        # two definitions of one name (a second `def blobs`)
    return _key(a) == _key(b) or (bool(a.code) and a.code == _key(b)) or \
        (bool(b.code) and b.code == _key(a))


def _site(obj: Any) -> tuple | None:
    """Where `obj` is defined: a function's file and first line, a class's methods' (the
    same definition imported anew has the same site; a second one under the same name in the
    same module has another)."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        return (code.co_filename, code.co_firstlineno)
    if isinstance(obj, type):
        lines = sorted((f.__code__.co_filename, f.__code__.co_firstlineno)
                       for f in vars(obj).values() if hasattr(f, "__code__"))
        return tuple(lines) if lines else None
    return None


def _where(decl: Declaration) -> str:
    """Where the taken name was defined: a declaration's "module:attr" (the same words whether
    its code is imported yet or not), else the function's own file and line."""
    if decl.code:
        return decl.code
    site = _site(decl.obj) if decl.obj is not None else None
    if site and isinstance(site[0], str):       # a function: its own file and line
        return f"{getattr(decl.obj, '__qualname__', '?')} ({site[0]}:{site[1]})"
    return _key(decl) or decl.origin or "?"


# ---------------------------------------------------------------------- entry points
_ENTRY = {"loaded": False}
_BROKEN: list[str] = []                 # "entry point 'x = mod' (distribution d 1.0): why"


def entry_points() -> list[Any]:
    """The installed `hierfl.plugins` entry points (importlib.metadata), in a stable order."""
    from importlib.metadata import entry_points as eps

    return sorted(eps(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value))


def load_entry_points() -> bool:
    """Import every installed plugin module once per process; True the first time (when a
    lookup that missed should look again). A module that fails to import is remembered with
    its distribution (`broken_note`), never raised here: an unrelated command goes on."""
    if _ENTRY["loaded"]:
        return False
    _ENTRY["loaded"] = True
    for ep in entry_points():
        try:
            ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a third party's module
            dist = getattr(ep, "dist", None)
            who = f"{dist.name} {dist.version}" if dist is not None else "unknown"
            _BROKEN.append(f"entry point {ep.name!r} = {ep.value!r} of distribution {who} "
                           f"raised {type(exc).__name__}: {exc}{_last_frame(exc)}")
    return True


def _last_frame(exc: BaseException) -> str:
    """" (at FILE:LINE)": the last frame of the failing code itself (not the import machinery's
    nor this module's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "importlib" not in f.filename and not f.filename.startswith("<frozen")
              and f.filename != __file__]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def broken() -> list[str]:
    """The installed plugins that could not be imported in this process, each named."""
    return list(_BROKEN)


def broken_note() -> str:
    return "".join(f"; {b}" for b in _BROKEN)


def check_entry_points(file: str = "", key: str = "plugins") -> None:
    """A ScenarioError (exit 2) naming every broken installed plugin (for `hierfl docs` and
    `hierfl plugins`, which list everything)."""
    load_entry_points()
    if _BROKEN:
        raise ScenarioError.one(file, key, "hierfl.plugins", "; ".join(_BROKEN))


def reset_for_tests() -> None:
    """Forget the entry points loaded (a test that installs a distribution on sys.path)."""
    _ENTRY["loaded"] = False
    _BROKEN.clear()
    importlib.invalidate_caches()
    sys.modules.pop("importlib.metadata._cache", None)
