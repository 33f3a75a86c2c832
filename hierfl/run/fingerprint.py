"""What determines a run's numbers, as plain data: the resolved scenario and topology, the seed,
the rounds, the drawn system and data, the versions of hierfl, torch and numpy, and the digest
of each plugin file. A checkpoint and OUT/fingerprint.json record it; `--resume` refuses to
continue a run whose fingerprint differs, naming what changed (`train.local.lr 0.05 -> 0.5`,
`seed 3 -> 99`, `plugins.my_fl.py 3f2a... -> 9c1b...`)."""
from __future__ import annotations

import hashlib
import json
import os
from importlib.metadata import version
from typing import Any

import numpy as np
import torch

from ..config.errors import ScenarioError
from ..outputs import atomic_text
from ..outputs.manifest import NEUTRAL, without
from ..outputs.summary import scenario_dict, topology_dict
from ..plugins import bundle
from ..scenario.checks import moves_path
from ..topology.traces import digest

FINGERPRINT = "fingerprint.json"
# keys that place or time a run without changing a number of it; data and graph paths are left
# out too, their contents are in the system digests. The name is the fingerprint's own part
# ("name"), not the scenario's: a fingerprint written before it was recorded still resumes.
IGNORED = NEUTRAL | {"name", "data.path", "data.root", "topology.graph"}


def _version() -> str:
    try:
        return version("hierfl")
    except Exception:        # not installed (a checkout on PYTHONPATH)
        return "unknown"


def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))  # the bytes, no copy
    return h.hexdigest()[:32]


def run_fingerprint(sc: Any, world: Any = None) -> dict:
    """The fingerprint of a scenario as resolved (CLI overrides applied); with its `world`,
    also digests of the drawn topology, the data and the initial model."""
    fp: dict[str, Any] = {"scenario": json.loads(json.dumps(without(scenario_dict(sc), IGNORED))),
                          "versions": {"hierfl": _version(), "torch": torch.__version__,
                                       "numpy": np.__version__},
                          "name": getattr(sc, "name", "")}    # OUT's results are this name's
    if bundle():                # plugin code moves numbers as hierfl's own does: its digest
        fp["plugins"] = {}
        for path, source in bundle():
            key = os.path.basename(path)
            fp["plugins"][path if key in fp["plugins"] else key] = \
                hashlib.sha256(source.encode()).hexdigest()[:32]
    if world is not None:
        topo = json.dumps(topology_dict(world.topo), sort_keys=True).encode()
        fp["system"] = {"topology": hashlib.sha256(topo).hexdigest()[:32],
                        "data": _digest(world.data.counts, world.data.x, world.data.y,
                                        world.data.x_test, world.data.y_test),
                        "model": _digest(world.w0)}
        if getattr(world, "availability_file", None):
            fp["system"]["availability_trace"] = digest(world.availability_file)
        for entry in getattr(sc, "algorithms", ()):
            path = moves_path(sc, entry)
            if path is not None and os.path.isfile(path):
                fp["system"][f"moves_trace.{entry.label}"] = digest(path)
    return fp


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves by dotted key (`algorithms[0].params.mu`); a list's length is a leaf too."""
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    if isinstance(d, list) and (not d or isinstance(d[0], (dict, list))):
        out[f"{prefix}len"] = len(d)
        for i, v in enumerate(d):
            out.update(_flat(v, f"{prefix[:-1]}[{i}]."))
        return out
    return {prefix[:-1]: d}


def _show(v: Any) -> str:
    return "(none)" if v is None else json.dumps(v) if not isinstance(v, str) else v


def differences(old: dict, new: dict) -> list[str]:
    """'key old -> new' for every leaf that differs, in the scenario's own key names (the
    `scenario.` prefix dropped); parts one side lacks (no world given) are not compared."""
    a, b = _flat(old), _flat(new)
    parts = {k.split(".")[0] for k in a} & {k.split(".")[0] for k in b}
    out = []
    for k in sorted(set(a) | set(b), key=lambda k: (not k.startswith("scenario."), k)):
        if k.split(".")[0] in parts and a.get(k) != b.get(k):
            name = k[len("scenario."):] if k.startswith("scenario.") else k
            out.append(f"{name} {_show(a.get(k))} -> {_show(b.get(k))}")
    return out


def refuse(sc: Any, where: str, changed: list[str]) -> ScenarioError:
    rounds = [c for c in changed if c.startswith("train.rounds ")]
    why = ("--resume continues the run it finds, with the settings it was started with; "
           f"changed since {where}: " + "; ".join(changed))
    if rounds:
        why += (". A run is not extended or shortened on resume (the last round is evaluated "
                "and measured, so round N of an N-round run differs from round N of a longer "
                "one): start the longer run in a new --out")
    else:
        why += ". Undo the change, or start a new run in another --out"
    return ScenarioError.one(sc.file, "--resume", sc.output, why)


def read_fingerprint(out: str) -> dict | None:
    path = os.path.join(out, FINGERPRINT)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def check_resume(sc: Any, fp: dict) -> None:
    """Raise a ScenarioError if OUT holds a run whose fingerprint differs from `fp`."""
    old = read_fingerprint(sc.output)
    if old is not None:
        changed = differences(old, fp)
        if changed:
            raise refuse(sc, os.path.join(sc.output, FINGERPRINT), changed)


def write_fingerprint(out: str, fp: dict) -> None:
    atomic_text(os.path.join(out, FINGERPRINT), json.dumps(fp, indent=1, sort_keys=True) + "\n")
