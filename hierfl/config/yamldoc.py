"""The one YAML reader: safe parsing with bounds, and the line of every key.

Hostile input is bounded: files are read with a SafeLoader (no Python objects), at most
MAX_BYTES long, MAX_DEPTH levels deep, with at most MAX_ALIASES aliases and MAX_NODES values
once aliases are expanded (no "billion laughs"); recursive aliases are rejected."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple

import yaml

from .errors import NO_VALUE, Problem, Problems, ScenarioError, line_of
from .limits import MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_NODES
from .paths import not_a_file


# ============================================================================ safe YAML
class _Loader(yaml.SafeLoader):
    """safe_load with caps on aliases, nesting depth and the number of values."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases (*name)", event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        if self._nodes > MAX_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_NODES} values", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Bomb(Exception):
    def __init__(self, message: str, node: yaml.Node):
        super().__init__(message)
        self.node = node


def _expanded_size(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """Values in the document once aliases are expanded (raises _Bomb past MAX_NODES or on a
    recursive alias). Depth is bounded by MAX_DEPTH, so recursion is safe."""
    k = id(node)
    if k in memo:
        return memo[k]
    if k in active:
        raise _Bomb("a recursive alias (an anchor used inside itself)", node)
    if isinstance(node, yaml.ScalarNode):
        return 1
    active.add(k)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo, active)
            if total > MAX_NODES:
                break
    else:
        for key, value in node.value:
            total += _expanded_size(key, memo, active) + _expanded_size(value, memo, active)
            if total > MAX_NODES:
                break
    active.discard(k)
    if total > MAX_NODES:
        raise _Bomb(f"aliases expand to more than {MAX_NODES} values (an alias bomb?)", node)
    memo[k] = total
    return total


def _key_lines(node: yaml.Node) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """(key path -> 1-based line, duplicates as (path, line, first line)). Each node is visited
    once: the values under an alias are located at their anchor."""
    lines: dict[str, int] = {}
    dups: list[tuple[str, int, int]] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(node, "")]
    while stack:
        n, path = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.SequenceNode):
            for i, child in enumerate(n.value):
                p = f"{path}[{i}]"
                lines.setdefault(p, child.start_mark.line + 1)
                stack.append((child, p))
        elif isinstance(n, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in n.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                p = f"{path}.{key.value}" if path else str(key.value)
                line = key.start_mark.line + 1
                if key.value in first:
                    dups.append((p, line, first[key.value]))
                first.setdefault(key.value, line)
                lines.setdefault(p, line)
                stack.append((value, p))
    return lines, dups


class Doc(NamedTuple):
    data: Any
    lines: dict[str, int]                       # key path -> line
    duplicates: list[tuple[str, int, int]]      # (key path, line, line of the first one)


def check_file(path: str, what: str) -> None:
    kind = not_a_file(path)
    if kind:
        raise ScenarioError.one(path, "", path, f"{what} is {kind}, not a regular file")
    try:
        exists = os.path.exists(path)
    except (ValueError, OSError):
        exists = False
    if not exists:
        raise ScenarioError.one(path, "", path, f"{what} not found")
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "", path, f"{what} is not a regular file")


def read_doc(path: str, what: str = "file") -> Doc:
    """Parse a YAML file safely, with the line of every key; every failure is a ScenarioError
    naming the file."""
    check_file(path, what)
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise ScenarioError.one(path, "", size, f"{what} larger than {MAX_BYTES} bytes")
        with open(path, "rb") as fh:
            text = fh.read(MAX_BYTES + 1).decode("utf-8")
    except OSError as exc:
        raise ScenarioError.one(path, "", path, f"cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError.one(path, "", path, f"{what} is not UTF-8 text") from None
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return Doc(None, {}, [])
        _expanded_size(node, {}, set())
        lines, dups = _key_lines(node)
        data = loader.construct_document(node)
    except _Bomb as exc:
        raise ScenarioError.one(path, "", None, f"invalid YAML: {exc}",
                                exc.node.start_mark.line + 1) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        msg = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
        line = mark.line + 1 if mark is not None else None
        col = f" (column {mark.column + 1})" if mark is not None else ""
        raise ScenarioError.one(path, "", None, f"invalid YAML: {msg}{col}", line) from None
    except RecursionError:
        raise ScenarioError.one(path, "", None, "YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    return Doc(data, lines, dups)


def add_duplicates(problems: Problems, doc: Doc) -> None:
    """A problem for every key the document gives twice (YAML keeps the last one silently)."""
    for key, line, first in doc.duplicates:
        problems.add(key, NO_VALUE, f"key given twice (first on line {first}); say it once", line)


def read_yaml(path: str, what: str = "file") -> Any:
    """Parse a YAML file safely (see read_doc); the data only."""
    return read_doc(path, what).data


def locate(problems: list[Problem]) -> list[Problem]:
    """Fill in the line of problems raised after loading (data, model, graph building) by
    re-reading their file's key lines. Never raises."""
    cache: dict[str, dict[str, int]] = {}
    out = []
    for p in problems:
        if p.line is None and p.file and p.key and p.file.endswith((".yaml", ".yml")):
            if p.file not in cache:
                try:
                    cache[p.file] = read_doc(p.file).lines
                except Exception:  # noqa: BLE001 - best effort, the problem is reported anyway
                    cache[p.file] = {}
            found = line_of(cache[p.file], p.key)
            if found is not None:
                p = dataclasses.replace(p, line=found)
        out.append(p)
    return out
