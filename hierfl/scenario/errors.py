"""Errors raised for bad input. Each names the file, the key path and the bad value."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file."""

    file: str
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        shown = repr(self.value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        where = f"{self.file}: " if self.file else ""
        key = self.key or "<top level>"
        return f"{where}{key} = {shown}: {self.message}"


class ScenarioError(Exception):
    """One or more problems with a scenario or topology; the CLI prints them and exits 2."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def one(cls, file: str, key: str, value: object, message: str) -> "ScenarioError":
        return cls([Problem(file, key, value, message)])


class Problems:
    """Collects problems so that every error of a file is reported at once."""

    def __init__(self, file: str):
        self.file = file
        self.items: list[Problem] = []

    def add(self, key: str, value: object, message: str) -> None:
        self.items.append(Problem(self.file, key, value, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise ScenarioError(self.items)
