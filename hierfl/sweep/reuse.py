"""One run per distinct scenario an algorithm sees: a grid key that only some algorithms read
(HierFAVG's edge_rounds, one entry's mu) would otherwise rerun every other algorithm, with the
same numbers, at every value.

What an algorithm entry reads, `algorithm_keys`: the point's resolved scenario (scenario_dict,
topology, data, model, train, stragglers, monitor, seed, plugins) without the number-neutral
keys of the run manifest (outputs.manifest.NEUTRAL: output, report, threads, ...), without
every *other* algorithm entry, with this entry in full (name, label, params, local,
edge_rounds, tier_rounds, stragglers override), and without the train keys this kind of
algorithm never reads: the edge-tier round policy (`train.edge_round`) for a flat algorithm,
`train.edge_preaggregate` for one that is not a linear aggregator. Two points whose key for an
entry is equal run that entry identically (the same seed streams, minibatches, simulated
system), so the entry runs once, at the first such point in grid order (its *owner*), and the
other points get a copy of the owner's OUT/<label>/ folder (metrics, clients, trace, final
parameters: the same bytes a rerun writes). Each point still has its own summary.json,
run.json and report, for its own full scenario."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from typing import Any

from ..algorithms.registry import get
from ..outputs.manifest import NEUTRAL, without
from ..outputs.summary import scenario_dict

FLAT_UNREAD = {"train.edge_round"}              # the edge tier's round policy
NONLINEAR_UNREAD = {"train.edge_preaggregate"}  # only linear aggregators pre-aggregate


def entry_key(sc: Any, i: int) -> str:
    """sha256 of what algorithm entry i of scenario `sc` reads (see the module docstring)."""
    entry = sc.algorithms[i]
    cls = get(entry.name)
    drop = set(NEUTRAL)
    if not getattr(cls, "hierarchical", True):
        drop |= FLAT_UNREAD
    if not getattr(cls, "linear_aggregate", True):
        drop |= NONLINEAR_UNREAD
    d = without(scenario_dict(sc), drop)
    d["algorithms"] = [dataclasses.asdict(entry)]
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def algorithm_keys(sc: Any) -> tuple[tuple[str, str], ...]:
    """(label, key) of every algorithm entry of a scenario, in scenario order."""
    return tuple((e.label, entry_key(sc, i)) for i, e in enumerate(sc.algorithms))


def owners(points: Any) -> dict[str, dict[str, str]]:
    """Per point name: {label: owner point name} for the entries it borrows (the first point in
    grid order with the same key runs it). Points without keys borrow nothing."""
    first: dict[tuple[str, str], str] = {}
    out: dict[str, dict[str, str]] = {}
    for pt in points:
        borrowed = {}
        for label, key in pt.algo_keys:
            owner = first.setdefault((label, key), pt.name)
            if owner != pt.name:
                borrowed[label] = owner
        out[pt.name] = borrowed
    return out


def zip_tree(folder: str) -> bytes:
    """A folder as a zip (relative names, sorted, fixed timestamps)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                z.write(full, os.path.relpath(full, folder))
    return buf.getvalue()


def unzip_tree(blob: bytes, folder: str) -> None:
    """Extract a zip made by zip_tree into `folder` (no member may leave it)."""
    root = os.path.normpath(folder)
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        for member in z.namelist():
            dest = os.path.normpath(os.path.join(root, member))
            if not dest.startswith(root + os.sep):
                raise ValueError(f"unsafe path in a point archive: {member}")
        z.extractall(root)


def filler(src: str | bytes) -> Callable[[str], None]:
    """What puts a borrowed algorithm's folder in place (run_scenario's `borrowed`): a copy of
    the owner's OUT/<label>/ (`src` its path), or a zip of it (zip_tree) unpacked."""
    def fill(folder: str) -> None:
        if isinstance(src, str):
            shutil.copytree(src, folder, dirs_exist_ok=True)
        else:
            os.makedirs(folder, exist_ok=True)
            unzip_tree(src, folder)
    return fill
