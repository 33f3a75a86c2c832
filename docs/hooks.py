"""MkDocs hook (mkdocs.yml `hooks:`): the nav's Algorithms section lists every page of
docs/algorithms/, titled by its first heading, so a new algorithm's page needs no nav line."""
from __future__ import annotations

import os
from typing import Any


def _title(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        first = fh.readline().lstrip("#").strip()
    return first.split(" — ")[0].strip() or os.path.splitext(os.path.basename(path))[0]


def _algorithm_pages(docs_dir: str) -> list[Any]:
    folder = os.path.join(docs_dir, "algorithms")
    pages = sorted(f for f in os.listdir(folder) if f.endswith(".md") and f != "index.md")
    return ["algorithms/index.md"] + [
        {_title(os.path.join(folder, f)): f"algorithms/{f}"} for f in pages]


def _fill(nav: list[Any], docs_dir: str) -> None:
    for item in nav:
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "Algorithms" and isinstance(value, list):
                    item[key] = _algorithm_pages(docs_dir)
                elif isinstance(value, list):
                    _fill(value, docs_dir)


def on_config(config: Any) -> Any:
    _fill(config["nav"], config["docs_dir"])
    return config
