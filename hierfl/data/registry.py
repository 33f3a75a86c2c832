"""Data sets registered from outside the package: `data: {name: blobs, spread: 2.0}` calls the
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
sets."""
from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from ..config.errors import ScenarioError
from ..config.fields import keyword_options
from ..config.schema import BUILTIN_DATA, DataSpec
from .federated import FederatedData, offsets_of

MAX_CLASSES = 10_000
Loader = Callable[..., Any]
PATH_KEYS = ("path", "root")            # options resolved relative to the scenario file


class ClientArrays(NamedTuple):
    """One client's rows: training inputs and targets, test inputs and targets."""

    x_train: Any
    y_train: Any
    x_test: Any
    y_test: Any


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    loader: Loader
    task: str               # "classification" or "regression"
    classes: int | None     # declared number of classes (None: largest label + 1)

    def options(self) -> list[str] | None:
        """The keyword options the loader takes after (n_clients, seed); None: any."""
        return keyword_options(self.loader, skip=2)


DATASETS: dict[str, DatasetEntry] = {}


def register_dataset(name: str, task: str = "classification", classes: int | None = None
                     ) -> Callable[[Loader], Loader]:
    """Register `loader(n_clients, seed, **options) -> [ClientArrays, ...]` as
    `data: {name: <name>, <options>}` (see this module's docstring for the contract)."""
    if not isinstance(name, str) or not name:
        raise ValueError("register_dataset needs a name")
    if name in BUILTIN_DATA:
        raise ValueError(f"{name!r} is a built-in data set; choose another name")
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be classification or regression, not {task!r}")
    if classes is not None and not 0 < int(classes) <= MAX_CLASSES:
        raise ValueError(f"classes must be in 1..{MAX_CLASSES}")

    def deco(loader: Loader) -> Loader:
        if len(inspect.signature(loader).parameters) < 2:
            raise TypeError(f"data set {name!r}: the loader takes (n_clients, seed, **options)")
        DATASETS[name] = DatasetEntry(name, loader, task, classes)
        return loader
    return deco


def known_names() -> list[str]:
    return [*BUILTIN_DATA, *sorted(DATASETS)]


def name_problem(name: str) -> str | None:
    """Why `data.name` is not a data set (with a "did you mean"), or None."""
    if name in BUILTIN_DATA or name in DATASETS:
        return None
    close = difflib.get_close_matches(name, known_names(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"unknown data set{hint}; known: {', '.join(known_names())} (more with "
            f"hierfl.register_dataset)")


def option_problems(spec: DataSpec) -> list[tuple[str, str]]:
    """(key, message) for every option of a registered data set its loader does not take, and
    for options given to a built-in set."""
    entry = DATASETS.get(spec.name)
    if entry is None:
        return [("options", f"{spec.name} is a built-in data set: options: are for data sets "
                 "registered with hierfl.register_dataset")] if spec.options else []
    allowed = entry.options()
    if allowed is None:
        return []
    out = []
    for key in sorted(set(spec.options) - set(allowed)):
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        takes = ", ".join(sorted({*allowed, "name"}))
        out.append((key, f"unknown key for data set {spec.name!r}{hint}; allowed: {takes}"))
    return out


# ------------------------------------------------------------------------------- loading
def load_registered(spec: DataSpec, n_clients: int, seed: int, file: str) -> FederatedData:
    """Call the registered loader of `spec.name` and check and convert what it returns."""
    entry = DATASETS[spec.name]

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


def _labels(clients: _Arrays, entry: DatasetEntry, bad: Callable[[str], ScenarioError]) -> int:
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


def _convert(clients: _Arrays, entry: DatasetEntry,
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
