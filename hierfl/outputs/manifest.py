"""OUT/run.json, the run manifest: which scenario a folder's results belong to (a hash of the
resolved scenario and its topology), its algorithm labels in scenario order, the versions that
made it, when it started and ended, and whether it finished. Written atomically when a run
starts and rewritten when it ends.

A report reads only the labels listed here, in this order (so a stale folder of another run is
never shown and colours never drift); `hierfl run` refuses an output folder that holds another
scenario's results (`check_out`) unless told to clear it (`clear_out`)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time
from importlib.metadata import version
from typing import Any

from ..config.errors import NO_VALUE, ScenarioError
from .files import atomic_text, same_file
from .summary import SCENARIO_COPY, SUMMARY, TOPOLOGY_COPY, scenario_dict
from .summary_columns import NAME as SUMMARY_COLUMNS

MANIFEST = "run.json"
# files a run or its report writes at the top of OUT (cleared by --force, with the algorithms'
# folders); anything else in OUT is left alone
RUN_FILES = (MANIFEST, SUMMARY, SUMMARY_COLUMNS, SCENARIO_COPY, TOPOLOGY_COPY, "report.md",
             "report.html", "table.csv", "metrics_all.csv")
FIGURE_EXT = (".png", ".svg")


# keys that place or run a scenario without changing any number of it (threads, checkpoints,
# report options...): a run may be repeated or resumed with them changed
NEUTRAL = {"file", "topology_file", "output", "report", "train.executor.threads",
           "train.executor.address", "train.executor.clients_per_task",
           "train.checkpoint_every", "train.timing", "train.max_state_gb"}


def without(d: dict, keys: set[str], prefix: str = "") -> dict:
    """`d` without the dotted `keys` (nested mappings included)."""
    return {k: without(v, keys, f"{prefix}{k}.") if isinstance(v, dict) else v
            for k, v in d.items() if f"{prefix}{k}" not in keys}


def scenario_hash(sc: Any) -> str:
    """sha256 of the resolved scenario (topology included) as canonical JSON, without the
    NEUTRAL keys (where the scenario file lies, where its outputs go, threads, ...)."""
    d = without(scenario_dict(sc), NEUTRAL)
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("hierfl", "torch", "numpy", "simpy", "networkx"):
        try:
            out[name] = version(name)
        except Exception:  # noqa: BLE001 - not installed as a distribution: say so
            out[name] = "unknown"
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_manifest(out: str) -> dict | None:
    """OUT/run.json, or None when absent. A damaged one (not JSON, not an object, not UTF-8) is
    a ScenarioError naming it, with the line and column where JSON parsing stopped: a report
    would otherwise show the folder's results unchecked, a resume rewrite it unseen."""
    p = os.path.join(out, MANIFEST)
    if not os.path.exists(p):
        return None
    try:
        with open(p, encoding="utf-8") as fh:
            m = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ScenarioError.one(p, "", NO_VALUE, f"not valid JSON at line {exc.lineno} column "
                                f"{exc.colno}: {exc.msg} (a damaged {MANIFEST}: restore it, or "
                                "start the run again in a new folder)", exc.lineno) from None
    except (OSError, ValueError) as exc:
        raise ScenarioError.one(p, "", NO_VALUE, f"unreadable ({exc}): a damaged "
                                f"{MANIFEST}") from None
    if not isinstance(m, dict):
        raise ScenarioError.one(p, "", NO_VALUE, f"a {MANIFEST} holds a JSON object, not "
                                f"{type(m).__name__} (damaged?)", 1)
    return m


def manifest_labels(out: str) -> list[str] | None:
    """The algorithm labels of OUT's manifest, in scenario order (None: no manifest)."""
    m = read_manifest(out)
    labels = (m or {}).get("labels")
    if not isinstance(labels, list):
        return None
    return [str(x) for x in labels]


def start_manifest(sc: Any, out: str | None = None) -> dict:
    """Write OUT/run.json as the run starts (finished: false). A resumed run of the same
    scenario keeps the first start time."""
    out = out or sc.output
    old = read_manifest(out) or {}
    h = scenario_hash(sc)
    m = {"scenario": getattr(sc, "name", ""), "scenario_hash": h,
         "labels": [e.label for e in sc.algorithms], "seed": getattr(sc, "seed", None),
         "versions": _versions(),
         "started": old.get("started") if old.get("scenario_hash") == h and old.get("started")
         else _now(), "ended": None, "finished": False}
    atomic_text(os.path.join(out, MANIFEST), json.dumps(m, indent=1) + "\n")
    return m


def end_manifest(out: str, finished: bool) -> None:
    """Rewrite OUT/run.json when the run ends (finished, or paused)."""
    m = read_manifest(out)
    if m is None:
        return
    m["ended"], m["finished"] = _now(), bool(finished)
    atomic_text(os.path.join(out, MANIFEST), json.dumps(m, indent=1) + "\n")


def _result_folders(out: str) -> list[str]:
    if not os.path.isdir(out):
        return []
    return sorted(n for n in os.listdir(out)
                  if os.path.isfile(os.path.join(out, n, "metrics.csv")))


def conflict(out: str, h: str) -> str | None:
    """Why OUT may not receive a run of the scenario with hash `h` (None: it may): it holds
    results of another scenario, or results without a manifest."""
    try:
        m = read_manifest(out)
    except ScenarioError as exc:        # --force may clear it
        return f"its {MANIFEST} is damaged ({exc.problems[0].message})"
    found = _result_folders(out)
    if m is None:
        if not found:
            return None
        return (f"holds results ({', '.join(found[:5])}{' ...' if len(found) > 5 else ''}) "
                f"but no {MANIFEST}: they cannot be told apart from this run's")
    if m.get("scenario_hash") == h:
        return None
    return (f"holds the results of scenario {m.get('scenario')!r} (hash "
            f"{str(m.get('scenario_hash'))[:12]}), not of this one (hash {h[:12]})")


def clear_out(out: str, keep: tuple = ()) -> list[str]:
    """Remove OUT's run outputs (the files of RUN_FILES, figures, algorithm folders with a
    metrics.csv); anything else is kept, and so are the files `keep` names (the scenario and
    topology files of the run about to start: OUT/scenario.yaml run into OUT). Returns what
    was removed."""
    gone = []
    if not os.path.isdir(out):
        return gone
    kept = [k for k in keep if k and os.path.isfile(k)]
    for n in sorted(os.listdir(out)):
        p = os.path.join(out, n)
        if any(same_file(p, k) for k in kept):     # (a dangling link: not kept)
            continue
        if os.path.isfile(p) and (n in RUN_FILES or n.endswith(FIGURE_EXT)):
            os.unlink(p)
            gone.append(n)
        elif os.path.isdir(p) and os.path.isfile(os.path.join(p, "metrics.csv")):
            shutil.rmtree(p)
            gone.append(n + "/")
    return gone
