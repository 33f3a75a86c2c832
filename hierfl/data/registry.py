"""Data sets by scenario name, each declared once next to its code (hierfl/registry.py).

A built-in data set is declared in its own torch-free module of `hierfl/data` (the registry
imports every module of the package; a module that declares nothing, a helper such as
files.py or idx.py, is no data set): its spec, a frozen dataclass holding only the keys the
set reads (each with `spec(default, doc, check=...)`; the shared `partition:` and
`test_fraction:` by inheriting `Partitioned` and `HeldOut` of hierfl/config/schema.py), carries

    @declare_dataset("digits", code=f"{__name__}:load_digits",
                     facts=DatasetFacts(check=digits_problems, shape=...))
    @dataclass(frozen=True)
    class DigitsSpec(HeldOut, Partitioned): ...

`code` is the loader, `load(sc, n_clients) -> FederatedData` (sc.data: an instance of the
spec), imported when the data are first loaded; the facts say what `hierfl validate` and
`hierfl data fetch` need to know without loading anything. `Scenario.data` is the named set's
spec, built from `data:` by `check.build_data` (a key the set does not read is an error naming
the key and the set).

Data sets registered from outside the package: `data: {name: blobs, spread: 2.0}` calls the
loader registered as "blobs" with the client count, the scenario seed and the mapping's other
keys as keyword arguments, and turns what it returns into `FederatedData`.

    @hierfl.register_dataset("blobs")
    def blobs(n_clients: int, seed: int, spread: float = 1.0) -> list[hierfl.ClientArrays]:
        ...     # one ClientArrays(x_train, y_train, x_test, y_test) per client, in client order

The contract, checked when the data are loaded (`hierfl validate` loads them); a breach is a
ScenarioError naming `data.name`, the data set and what is wrong:
- one entry per client, each a `ClientArrays` or a 4-tuple of array-likes;
- x arrays of shape (rows, *input_shape), the same row shape for every client and the test
  rows; float rows become float32, uint8 rows stay bytes (pixels, scaled x / 255 per batch),
  other integer rows are int64 indices (text for a model that embeds them);
- every client has at least one training row, a test part may be empty;
- classification (the default): y holds integer labels in 0..classes-1 (`classes=` given at
  registration, else the largest label + 1); regression (`task="regression"`): float targets of
  shape (rows,) or (rows, outputs);
- no nan or inf.
`path:` and `root:` options are made absolute (relative to the scenario), as for the built-in
sets. A name is taken once: registering another loader under a taken name (a built-in's too)
is a ValueError naming the one that has it."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, NamedTuple

import numpy as np

from ..config.errors import ScenarioError
from ..config.fields import Raw, keyword_options, spec
from ..config.schema import DataSpec
from ..registry import Declaration, Registry
from .federated import FederatedData, offsets_of

if TYPE_CHECKING:
    from ..config.schema import Scenario

MAX_CLASSES = 10_000
Loader = Callable[..., Any]
PATH_KEYS = ("path", "root")            # options resolved relative to the scenario file
Found = list[tuple[str, object, str]]   # (key, value, message) of a scenario's problems


class ClientArrays(NamedTuple):
    """One client's rows: training inputs and targets, test inputs and targets."""

    x_train: Any
    y_train: Any
    x_test: Any
    y_test: Any


class Shape(NamedTuple):
    """A set's size before it is loaded, for the resource estimate: expected training rows
    per client, features, classes, and the most rows one client may hold."""

    rows: float
    dim: int
    classes: int
    max_rows: float


@dataclass(frozen=True)
class Remote:
    """One file to download: its name, official MD5, the base URLs that serve it, and the
    archive members to take out of it (none: the file is used as it is)."""

    name: str
    md5: str
    mirrors: tuple[str, ...]
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetFacts:
    """What `hierfl validate` and `hierfl data fetch` know of a data set without loading it."""

    labelled: bool = True           # its targets are class labels (the linear model is refused)
    files: str | None = None        # the key naming its files ("root": a folder, "path"),
    #                                 made absolute (relative to the scenario) when read
    one_file: bool = False          # that key names one file (npz's), not a folder
    more_files: tuple[str, ...] = ()    # other keys naming files or folders (image_folder's
    #                                 test:), made absolute likewise
    check: Callable[[Any, str, "int | None"], Found] | None = None
    #                                 (spec, scenario folder, clients or None) -> problems of
    #                                 its files and keys that show without loading the data
    shape: Callable[[Any, int], Shape] | None = None    # (spec, clients) -> its size
    layout: Callable[[Any, int, int], FederatedData] | None = None
    #                                 (spec, clients, seed) -> counts and shapes without values
    #                                 (validate of a generated set draws no row)
    fetch: "tuple[Remote, ...] | str | None" = None
    #                                 `hierfl data fetch NAME`: its files, or how to make them
    task: str = "classification"    # a registered (plugin) set: its task and declared classes
    classes: int | None = None


@dataclass(frozen=True)
class OptionsSpec(DataSpec):
    """The spec of a set registered with hierfl.register_dataset: every key but name is an
    option of its loader."""

    EXTRA_KEYS: ClassVar[str] = "options"      # unknown keys are collected here (fields.build)

    options: dict[str, Raw] = spec(default_factory=dict, doc="a registered (plugin) data set: "
                                   "its loader's own options, given here or as keys of data: "
                                   "(every key but name goes to the loader)")


class DatasetRegistry(Registry):
    def spec(self, name: str) -> type:
        """The spec dataclass of `name` (KeyError when unknown), importing no loader."""
        return self.declaration(name).params       # type: ignore[return-value]

    def facts(self, name: str) -> DatasetFacts:
        return self.declaration(name).facts

    def reads(self, name: str) -> tuple[str, ...] | None:
        """The keys of data: that set `name` reads besides name (None: a registered set's
        loader takes its own, or an unknown name)."""
        decl = self.declared(name)
        if decl is None or issubclass(decl.params, OptionsSpec):
            return None
        return tuple(f.name for f in dataclasses.fields(decl.params)
                     if f.init and f.name != "name")

    def builtin_names(self) -> list[str]:
        return [n for n in self if self.is_builtin(n)]


DATASETS = DatasetRegistry("data set", __package__, scan="modules")


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def declare_dataset(name: str, *, code: str, facts: DatasetFacts = DatasetFacts(),
                    summary: str = "") -> Callable[[type], type]:
    """Declare data set `name` on its spec dataclass (a subclass of DataSpec holding only the
    keys it reads), without importing its loader: `code` is "module:function", the loader
    `load(sc, n_clients) -> FederatedData`."""
    def deco(cls: type) -> type:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)
                and issubclass(cls, DataSpec)):
            raise TypeError(f"data set {name!r}: its spec must be a frozen dataclass extending "
                            "hierfl.config.schema.DataSpec")
        doc = summary or _first_paragraph(cls.__doc__ or "")
        DATASETS.declare(Declaration("data set", name, code, cls, facts, doc, cls.__module__))
        return cls
    return deco


def register_dataset(name: str, task: str = "classification", classes: int | None = None
                     ) -> Callable[[Loader], Loader]:
    """Register `loader(n_clients, seed, **options) -> [ClientArrays, ...]` as
    `data: {name: <name>, <options>}` (see this module's docstring for the contract)."""
    if not isinstance(name, str) or not name:
        raise ValueError("register_dataset needs a name")
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be classification or regression, not {task!r}")
    if classes is not None and not 0 < int(classes) <= MAX_CLASSES:
        raise ValueError(f"classes must be in 1..{MAX_CLASSES}")

    def deco(loader: Loader) -> Loader:
        if len(inspect.signature(loader).parameters) < 2:
            raise TypeError(f"data set {name!r}: the loader takes (n_clients, seed, **options)")
        DATASETS.declare(Declaration(
            "data set", name, params=OptionsSpec, obj=loader, origin=_module_of(loader),
            facts=DatasetFacts(labelled=False, task=task, classes=classes),
            summary=_first_paragraph(loader.__doc__ or "")))
        return loader
    return deco


def _module_of(obj: Any) -> str:
    return str(getattr(obj, "__module__", "") or "")


def is_registered(spec: DataSpec) -> bool:
    """A set registered with register_dataset (its loader takes options, not a spec)."""
    return isinstance(spec, OptionsSpec)


def data_spec(name: str, **keys: Any) -> DataSpec:
    """The spec of data set `name` with `keys` (its defaults for the others), as `data:
    {name: <name>, <keys>}` gives it (unchecked: for code and tests, not for user input)."""
    return DATASETS.spec(name)(name=name, **keys)


def known_names() -> list[str]:
    return list(DATASETS)


def name_problem(name: str) -> str | None:
    """Why `data.name` is not a data set (with a "did you mean"), or None."""
    if name in DATASETS:
        return None
    return f"{DATASETS.unknown(name)} (more with hierfl.register_dataset)"


def option_problems(spec: DataSpec) -> list[tuple[str, str]]:
    """(key, message) for every option of a registered data set its loader does not take."""
    if not isinstance(spec, OptionsSpec):
        return []
    allowed = keyword_options(DATASETS[spec.name], skip=2)
    if allowed is None:
        return []
    out = []
    for key in sorted(set(spec.options) - set(allowed)):
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        takes = ", ".join(sorted({*allowed, "name"}))
        out.append((key, f"unknown key for data set {spec.name!r}{hint}; allowed: {takes}"))
    return out


def load(sc: "Scenario", n_clients: int) -> FederatedData:
    """The data of scenario `sc` from its set's loader (a built-in's or a plugin's)."""
    if isinstance(sc.data, OptionsSpec):
        return load_registered(sc.data, n_clients, sc.seed, sc.file)
    return DATASETS[sc.data.name](sc, n_clients)


# ------------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class _Entry:
    loader: Loader
    task: str               # "classification" or "regression"
    classes: int | None     # declared number of classes (None: largest label + 1)


def load_registered(spec: OptionsSpec, n_clients: int, seed: int, file: str) -> FederatedData:
    """Call the registered loader of `spec.name` and check and convert what it returns."""
    facts = DATASETS.facts(spec.name)
    entry = _Entry(DATASETS[spec.name], facts.task, facts.classes)

    def bad(msg: str) -> ScenarioError:
        return ScenarioError.one(file, "data.name", spec.name, f"data set {spec.name!r} "
                                 f"({_where(entry.loader)}): {msg}")
    try:
        parts = entry.loader(n_clients, seed, **spec.options)
    except ScenarioError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code: any error becomes a clear message
        raise bad(f"the loader raised {type(exc).__name__}: {exc}{_line(exc, entry.loader)}"
                  ) from None
    return _convert(_clients(parts, n_clients, bad), entry, bad)


def _where(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)


def _line(exc: BaseException, fn: Callable) -> str:
    import traceback

    code = getattr(fn, "__code__", None)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if code is not None and f.filename == code.co_filename]
    return f" (line {frames[-1].lineno})" if frames else ""


_Arrays = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _clients(parts: Any, n_clients: int, bad: Callable[[str], ScenarioError]) -> _Arrays:
    """The loader's result as four arrays per client (shapes of x and y matched)."""
    if isinstance(parts, (str, bytes, dict)) or not hasattr(parts, "__len__"):
        raise bad(f"the loader must return a list of ClientArrays, one per client, not "
                  f"{type(parts).__name__}")
    if len(parts) != n_clients:
        raise bad(f"the loader returned {len(parts)} clients, the topology has {n_clients}")
    out = []
    for k, part in enumerate(parts):
        if not isinstance(part, (tuple, list)) or len(part) != 4:
            raise bad(f"client {k}: expected ClientArrays(x_train, y_train, x_test, y_test), "
                      f"got {type(part).__name__}")
        try:
            arrays = [np.asarray(a) for a in part]
        except (ValueError, TypeError) as exc:
            raise bad(f"client {k}: not arrays ({exc})") from None
        for (xn, yn), (x, y) in zip((("x_train", "y_train"), ("x_test", "y_test")),
                                    (arrays[:2], arrays[2:])):
            if x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
                raise bad(f"client {k}: {xn} ({x.dtype}) and {yn} ({y.dtype}) must be numeric")
            if y.ndim < 1 or x.ndim < 1 or len(x) != len(y):
                raise bad(f"client {k}: {xn} {x.shape} and {yn} {y.shape} do not match: one "
                          f"row of {xn} per entry of {yn}")
        if len(arrays[0]) < 1:
            raise bad(f"client {k}: x_train has no rows (every client needs one)")
        out.append(tuple(arrays))
    return out  # type: ignore[return-value]


def _row_shape(clients: _Arrays, bad: Callable[[str], ScenarioError]) -> tuple[int, ...]:
    shape = tuple(clients[0][0].shape[1:])
    if not shape or 0 in shape:
        raise bad(f"client 0: x_train {clients[0][0].shape} needs shape (rows, features...)")
    for k, (x, _, xt, _) in enumerate(clients):
        for xn, a in (("x_train", x), ("x_test", xt)):
            if tuple(a.shape[1:]) != shape and not (len(a) == 0 and xn == "x_test"):
                raise bad(f"client {k}: {xn} rows have shape {tuple(a.shape[1:])}, client 0's "
                          f"x_train {shape}")
    return shape


def _x_dtype(clients: _Arrays, bad: Callable[[str], ScenarioError]) -> np.dtype:
    kinds = {a.dtype.kind if a.dtype != np.uint8 else "u8"
             for c in clients for a in (c[0], c[2]) if len(a)}
    if len(kinds) > 1:
        raise bad(f"clients' x arrays mix dtypes ({', '.join(sorted(kinds))}): give every "
                  "client the same kind (float features, uint8 pixels or integer indices)")
    kind = kinds.pop()
    return np.dtype(np.uint8 if kind == "u8" else np.float32 if kind == "f" else np.int64)


def _labels(clients: _Arrays, entry: _Entry, bad: Callable[[str], ScenarioError]) -> int:
    """Checks the targets; the number of classes (0: regression)."""
    if entry.task == "regression":
        shapes = {tuple(c[i].shape[1:]) for c in clients for i in (1, 3) if len(c[i])}
        if len(shapes) > 1:
            raise bad(f"clients have different target shapes {sorted(shapes)}")
        return 0
    top, limit = 0, entry.classes or MAX_CLASSES
    for k, c in enumerate(clients):
        for yn, y in (("y_train", c[1]), ("y_test", c[3])):
            if y.ndim != 1 or (len(y) and y.dtype.kind not in "biu"):
                raise bad(f"client {k}: {yn} ({y.dtype}, shape {y.shape}) must be 1-D integer "
                          "labels")
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= limit):
                raise bad(f"client {k}: {yn} labels must be in 0..{limit - 1} "
                          f"(found {int(y.min())}..{int(y.max())})")
            top = max(top, int(y.max()) + 1 if len(y) else 0)
    return entry.classes or top


def _convert(clients: _Arrays, entry: _Entry,
             bad: Callable[[str], ScenarioError]) -> FederatedData:
    shape = _row_shape(clients, bad)
    dtype = _x_dtype(clients, bad)
    n_classes = _labels(clients, entry, bad)
    dim = int(np.prod(shape))
    for k, c in enumerate(clients):
        if any(a.dtype.kind == "f" and not np.all(np.isfinite(a)) for a in c):
            raise bad(f"client {k}: holds non-finite values (nan or inf)")
    ydt = np.int64 if n_classes else np.float32
    yshape = tuple(clients[0][1].shape[1:])

    def stack(i: int, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xs = [c[i].astype(dtype, copy=False).reshape(len(c[i]), dim) for c in clients]
        ys = [c[j].astype(ydt, copy=False).reshape(len(c[j]), *yshape) for c in clients]
        x = np.concatenate(xs) if xs else np.zeros((0, dim), dtype)
        return np.ascontiguousarray(x), np.ascontiguousarray(np.concatenate(ys)), \
            offsets_of(xs)
    x, y, off = stack(0, 1)
    xt, yt, toff = stack(2, 3)
    vocab = int(max(int(x.max()), int(xt.max()) if len(xt) else 0) + 1) \
        if dtype == np.int64 else 0
    if vocab and (int(x.min()) < 0 or (len(xt) and int(xt.min()) < 0)):
        raise bad("integer rows are indices for an embedding and must be >= 0")
    return FederatedData(x, y, off, xt, yt, toff, n_classes, shape, vocab)
