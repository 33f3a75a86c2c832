"""A small declarative schema: frozen dataclasses whose type hints and field metadata say what
is allowed. `build` turns a parsed YAML mapping into such a dataclass, collecting every problem
(unknown keys with a "did you mean", wrong types, out-of-range values) instead of stopping at the
first. The same metadata generates docs/scenario.md."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
import types
import typing
from dataclasses import MISSING, field
from typing import Any, Callable, Literal, Union, get_args, get_origin

from .errors import NO_VALUE, Problems

Check = Callable[[Any], "str | None"]


def spec(default: Any = MISSING, doc: str = "", check: Check | None = None,
         default_factory: Any = MISSING) -> Any:
    """A dataclass field with a doc string and an optional value check."""
    meta = {"doc": doc, "check": check}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def seed_range(v: Any) -> str | None:
    """Seeds key every stream by their 32 bits: 2^32 and 0 gave the same run, -1 and 2^64-1
    too (recorded as different seeds, and pooled as independent ones)."""
    return None if 0 <= v < 2 ** 32 else "must be in 0..4294967295 (streams are keyed by 32 bits)"


class FieldError(ValueError):
    """A cross-field check of a dataclass's __post_init__ that is about one key (`build`
    names that key and its value, not the whole mapping)."""

    def __init__(self, key: str, msg: str):
        super().__init__(msg)
        self.key = key


def positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def unit_interval(v: Any) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def below_one(v: Any) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (1 would leave no training rows)"


def at_most(limit: float) -> Check:
    def check(v: Any) -> str | None:
        return None if v <= limit else f"must be <= {limit:g} (resource guard)"
    return check


def each(check: Check) -> Check:
    """Apply `check` to every element of a list value."""
    def check_list(v: Any) -> str | None:
        for i, x in enumerate(v):
            msg = check(x)
            if msg:
                return f"element [{i}] = {x!r}: {msg}"
        return None
    return check_list


def all_of(*checks: Check) -> Check:
    def check(v: Any) -> str | None:
        for c in checks:
            msg = c(v)
            if msg:
                return msg
        return None
    return check


class Raw:
    """Marker type: keep the YAML value as is (validated elsewhere)."""


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is list:
        return f"list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        return "mapping"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    if tp is Raw:
        return "any"
    return getattr(tp, "__name__", str(tp))


_FAIL = object()
_SCIENTIFIC = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")


def _kind_matches(tp: Any, value: Any) -> bool:
    """Whether `value` is of the kind of type `tp` (so that tp's own message explains it)."""
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp) or origin is dict or tp is dict:
        return isinstance(value, dict)
    if origin is list:
        return isinstance(value, list)
    if origin is Literal:
        return isinstance(value, str) and any(isinstance(a, str) for a in get_args(tp))
    if tp in (int, float):
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return False
            return tp is float or bool(_SCIENTIFIC.match(value.strip()))
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp in (str, bool):
        return isinstance(value, tp)
    return False


def _convert_union(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    options = get_args(tp)
    if value is None and type(None) in options:
        return None
    # try each option silently, most specific first
    for opt in options:
        if opt is type(None):
            continue
        trial = Problems(problems.file)
        out = convert(opt, value, key, trial)
        if out is not _FAIL and not trial.items:
            return out
    # report against the option of the value's kind (its messages are the precise ones: a
    # non-finite number, a misspelt choice, a bad list element), else generically
    others = [o for o in options if o is not type(None)]
    for opt in others:
        if _kind_matches(opt, value):
            trial = Problems(problems.file)
            convert(opt, value, key, trial)
            plain = len(others) == 1 or dataclasses.is_dataclass(opt)
            for it in trial.items:
                problems.add(it.key, it.value, it.message if plain else
                             f"{it.message} (allowed: {_type_name(tp)})")
            return _FAIL
    problems.add(key, value, f"expected {_type_name(tp)}")
    return _FAIL


def _convert_literal(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    allowed = get_args(tp)
    if value in allowed and type(value) in {type(a) for a in allowed}:
        return value
    hint = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value, [str(a) for a in allowed], n=1)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
    problems.add(key, value, f"expected one of {', '.join(repr(a) for a in allowed)}{hint}")
    return _FAIL


def _convert_dict(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    args = get_args(tp)
    inner = args[1] if len(args) == 2 else Raw
    if not isinstance(value, dict):
        problems.add(key, value, "expected a mapping")
        return _FAIL
    outd = {k: convert(inner, v, f"{key}.{k}", problems) for k, v in value.items()}
    return _FAIL if any(o is _FAIL for o in outd.values()) else outd


def _convert_list(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    (inner,) = get_args(tp)
    if not isinstance(value, list):
        problems.add(key, value, "expected a list" if inner is Raw
                     else f"expected a list of {_type_name(inner)}")
        return _FAIL
    out = [convert(inner, v, f"{key}[{i}]", problems) for i, v in enumerate(value)]
    return _FAIL if any(o is _FAIL for o in out) else out


def _convert_dataclass(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    if not isinstance(value, dict):
        problems.add(key, value, "expected a mapping")
        return _FAIL
    return build(tp, value, problems, key)


def _convert_bool(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    if isinstance(value, bool):
        return value
    problems.add(key, value, "expected true or false")
    return _FAIL


def _convert_int(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
        value = float(value)  # YAML 1.1 reads "1e6" (no dot) as a string
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(key, value, "expected an integer")
        return _FAIL
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            problems.add(key, value, "expected an integer")
            return _FAIL
        value = int(value)
    return value


def _convert_float(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    if isinstance(value, str):
        try:  # YAML 1.1 reads "1e9" (no dot) as a string
            value = float(value)
        except ValueError:
            problems.add(key, value, "expected a number")
            return _FAIL
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(key, value, "expected a number")
        return _FAIL
    value = float(value)
    if not math.isfinite(value):
        problems.add(key, value, "expected a finite number")
        return _FAIL
    return value


def _convert_str(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    if isinstance(value, str):
        return value
    problems.add(key, value, "expected a string")
    return _FAIL


_SCALARS: dict[Any, Callable[[Any, Any, str, Problems], Any]] = {
    bool: _convert_bool, int: _convert_int, float: _convert_float, str: _convert_str}


def convert(tp: Any, value: Any, key: str, problems: Problems) -> Any:
    """Convert `value` to type `tp`; on failure record a problem and return _FAIL."""
    origin = get_origin(tp)
    if tp is Raw or tp is Any:
        return value
    if origin in (Union, types.UnionType):
        return _convert_union(tp, value, key, problems)
    if origin is Literal:
        return _convert_literal(tp, value, key, problems)
    if origin is dict or tp is dict:
        return _convert_dict(tp, value, key, problems)
    if origin is list:
        return _convert_list(tp, value, key, problems)
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, key, problems)
    scalar = _SCALARS.get(tp) if isinstance(tp, type) else None
    if scalar is not None:
        return scalar(tp, value, key, problems)
    raise TypeError(f"schema type {tp!r} is not supported")


def build(cls: type, raw: dict, problems: Problems, prefix: str = "") -> Any:
    """Build dataclass `cls` from mapping `raw`; problems are collected, not raised."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    ok = True
    extra = getattr(cls, "EXTRA_KEYS", None)    # a dict field that collects unknown keys
    extras: dict[str, Any] = {}
    for key, value in raw.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields and extra is not None:
            extras[str(key)] = value
            continue
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            allowed = ", ".join(sorted(fields)) or "none (this takes no keys)"
            problems.add(path, value, f"unknown key{hint}; allowed: {allowed}")
            ok = False
            continue
        f = fields[key]
        out = convert(hints[key], value, path, problems)
        if out is _FAIL:
            ok = False
            continue
        check = f.metadata.get("check")
        if check is not None and out is not None:
            msg = check(out)
            if msg:
                problems.add(path, value, msg)
                ok = False
                continue
        kwargs[key] = out
    for name, f in fields.items():
        if name not in kwargs and f.default is MISSING and f.default_factory is MISSING:
            if name not in raw:
                path = f"{prefix}.{name}" if prefix else name
                problems.add(path, NO_VALUE, "required key is missing")
            ok = False
    if not ok:
        return _FAIL
    if extras:
        kwargs[extra] = {**kwargs.get(extra, {}), **extras}
    try:
        obj = cls(**kwargs)
    except (ValueError, TypeError) as exc:  # cross-field checks in __post_init__
        key = getattr(exc, "key", None)     # a FieldError names the key it is about
        if key is not None:
            problems.add(f"{prefix}.{key}" if prefix else key, raw.get(key, kwargs.get(key)),
                         str(exc))
        else:
            problems.add(prefix, raw, str(exc))
        return _FAIL
    return obj


def is_fail(obj: Any) -> bool:
    return obj is _FAIL


def keyword_options(fn: Callable[..., Any], skip: int = 0) -> list[str] | None:
    """The keyword arguments `fn` accepts after its first `skip` parameters (the options a
    registered plugin factory or loader takes from a scenario); None when it takes **kwargs."""
    params = list(inspect.signature(fn).parameters.values())[skip:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def compact(d: dict) -> str:
    """A mapping as one line, "k=v, k={k=v}" (the report's facts, validate's codecs)."""
    parts = []
    for k, v in d.items():
        if isinstance(v, dict):
            v = "{" + compact(v) + "}"
        parts.append(f"{k}={v}")
    return ", ".join(parts)
