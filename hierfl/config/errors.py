"""Errors raised for bad input. Each names the file, the line where known, the key path, the bad
value and what is allowed: `file:line: key = value: message`."""
from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass

_SHOW = reprlib.Repr()
_SHOW.maxlevel = 3
_SHOW.maxstring = 60
_SHOW.maxother = 60
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = _SHOW.maxset = 6
_SHOW.maxlong = 40


def show(value: object) -> str:
    """A short repr of a value from a user's file: bounded in depth, length and time
    (shared sub-structures from YAML aliases are never expanded in full)."""
    try:
        shown = _SHOW.repr(value)
    except Exception:  # noqa: BLE001 - a repr must never hide the real problem
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= 80 else shown[:77] + "..."


class _NoValue:
    """The value of a problem about a key that has none (missing, given twice, bad syntax)."""

    def __repr__(self) -> str:
        return "(no value)"

    def __reduce__(self) -> str:
        return "NO_VALUE"           # unpickled as this module's one instance


NO_VALUE = _NoValue()


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file."""

    file: str
    key: str
    value: object
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        if self.value is NO_VALUE or (not self.key and self.value is None):
            return f"{where}{self.key + ': ' if self.key else ''}{self.message}"
        key = self.key or "<top level>"
        return f"{where}{key} = {show(self.value)}: {self.message}"


class ScenarioError(Exception):
    """One or more problems with a scenario or topology; the CLI prints them and exits 2."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        # args are the problems: `type(exc)(*exc.args)` (simpy re-raising a process's failure,
        # sim/tasks.drain) makes the same error, not one problem per character of its text
        super().__init__(self.problems)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    def __reduce__(self):
        """Pickled as its problems (a sweep point's error comes back from a worker process)."""
        return type(self), (self.problems,)

    @classmethod
    def one(cls, file: str, key: str, value: object, message: str,
            line: int | None = None) -> "ScenarioError":
        return cls([Problem(file, key, value, message, line)])


_PART = re.compile(r"\.[^.\[]*$|\[[^\]]*\]$")


def parent_keys(key: str):
    """`a.b[2].c`, then `a.b[2]`, `a.b`, `a`: the key and its ancestors, nearest first."""
    while key:
        yield key
        cut = _PART.search(key)
        key = key[:cut.start()] if cut else ""


def line_of(lines: dict[str, int] | None, key: str) -> int | None:
    """The line of `key` in a file's key-path -> line map, or of its nearest ancestor."""
    if not lines:
        return None
    for k in parent_keys(key):
        if k in lines:
            return lines[k]
    return None


class Problems:
    """Collects problems so that every error of a file is reported at once.

    `lines` (key path -> line, from `yamldoc.read_doc`) lets each problem name its line."""

    def __init__(self, file: str, lines: dict[str, int] | None = None):
        self.file = file
        self.lines = lines
        self.items: list[Problem] = []

    def add(self, key: str, value: object, message: str, line: int | None = None) -> None:
        if line is None:
            line = line_of(self.lines, key)
        sig = (key, show(value), message, line)        # (the line it prints)
        seen = {(i.key, show(i.value), i.message, i.line) for i in self.items} \
            if len(self.items) < 200 else set()
        if sig not in seen:             # (a check run per algorithm entry says it once)
            self.items.append(Problem(self.file, key, value, message, line))

    def raise_if_any(self) -> None:
        if self.items:
            raise ScenarioError(self.items)
