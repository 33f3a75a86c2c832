"""Property-based fuzzing of the loaders: whatever document `hierfl validate` is given, it either
accepts it (exit 0, a summary on stdout) or exits 2 with at least one `key = value: message`
line on stderr -- never another exception, never a hang (each example runs under a timer).

Two generators: arbitrary YAML documents (nested mappings / lists / scalars, with scenario key
names mixed in so that the schema is reached), and mutations of a small valid scenario (keys
dropped, values replaced by values of another type or size, unknown keys added). Deterministic
(derandomize=True), about 100 examples in all."""
from __future__ import annotations

import contextlib
import copy
import io
import os
import signal
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hierfl.cli import main

TIMEOUT_S = 10

BASE = {
    "name": "fuzz",
    "seed": 3,
    "topology": {"edges": {"count": 2},
                 "clients": {"count": 4, "compute_flops": 1.0e9,
                             "link": {"latency_s": 0.01, "bandwidth_Bps": 1.0e6}}},
    "data": {"name": "synthetic", "dim": 5, "classes": 3,
             "samples": {"dist": "constant", "value": 20}},
    "model": {"name": "logreg"},
    "train": {"rounds": 2, "clients_per_round": 2,
              "local": {"steps": 2, "batch_size": 4, "lr": 0.1}},
    "algorithms": [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}],
}

BASE2 = {
    "name": "fuzz2",
    "topology": {"tiers": [{"count": 1, "name": "region"},
                           {"count": 2, "name": "edge", "assignment": [[0, 1]]}],
                 "clients": {"count": 6, "assignment": [[0, 2, 4], [1, 3, 5]],
                             "compute_flops": {"dist": "uniform", "low": 1.0e8, "high": 1.0e9}}},
    "data": {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 0.5}},
    "model": {"name": "mlp", "hidden": [8]},
    "train": {"rounds": 1, "clients_per_round": "all",
              "local": {"epochs": 1, "batch_size": "full"},
              "round": {"policy": "deadline_drop", "deadline_s": 5.0}},
    "algorithms": [{"name": "fedprox", "mu": 0.1}, {"name": "scaffold", "label": "sc"}],
    "stragglers": {"fraction": 0.5},
}

KEYS = ["name", "seed", "topology", "data", "model", "train", "algorithms", "clients", "count",
        "edges", "tiers", "dim", "lr", "steps", "local", "hidden", "dist", "value", "label",
        "fedavg", "hierfavg", "mu", "path", "output", "assignment", "x", "<<", "partition",
        "kind", "round", "policy", "graph", "mix", "failures", "outages", "profiles", "devices",
        "links", "fraction", "device", "link", "node", "start_s", "end_s", "availability",
        "stragglers", "samples", "max_samples", "batch_size", "epochs", "executor", "k"]

scalars = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([-1, 0, 1, 2, 3, 7, 10**12, 2**63, -10**9]),
    st.sampled_from([0.0, -0.5, 0.1, 1e300, float("nan"), float("inf"), -float("inf")]),
    st.sampled_from(["", "fedavg", "hierfavg", "synthetic", "digits", "npz", "logreg", "mlp",
                     "all", "full", "../../etc", "1e12", "x" * 300, "nan", "\u00e9\u2603",
                     "uniform", "lognormal", "random", "round_robin"]),
)


def _doc(leaves: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
        max_leaves=25)


documents = _doc(scalars)


def _paths(obj, prefix=()):
    """Every key path of a nested dict/list document."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


ALL_PATHS = _paths(BASE)


@st.composite
def mutants(draw):
    doc = copy.deepcopy(draw(st.sampled_from([BASE, BASE2])))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(["drop", "replace", "replace", "unknown", "insert",
                                   "deepen"]))
        last = path[-1]
        if op == "drop":
            del parent[last]
        elif op == "replace":
            parent[last] = draw(st.one_of(scalars, _doc(scalars)))
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS)) + "_"] = draw(scalars)
        elif op == "insert" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = draw(st.one_of(scalars, _doc(scalars)))
        elif op == "deepen":
            parent[last] = [parent[last]] if draw(st.booleans()) else {"value": parent[last]}
    return doc


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def validate_text(text: str) -> tuple[int, str, str]:
    """Run `hierfl validate` in-process on a scenario file holding `text`."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        out, err = io.StringIO(), io.StringIO()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["validate", path])
        except _Timeout:
            pytest.fail(f"validate took more than {TIMEOUT_S} s on:\n{text[:2000]}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def check(text: str) -> None:
    try:
        rc, out, err = validate_text(text)
    except Exception as exc:  # noqa: BLE001 - the property under test
        pytest.fail(f"validate raised {type(exc).__name__}: {exc}\non:\n{text[:2000]}")
    assert rc in (0, 2), (rc, text)
    if rc == 0:
        assert "is valid" in out, (out, text)
    else:
        all_lines = err.splitlines()    # (a numpy warning may come first)
        starts = [i for i, ln in enumerate(all_lines) if ln.startswith("error: ")]
        assert len(starts) == 1, (err, text)
        lines = [ln for ln in all_lines[starts[0] + 1:] if ln.startswith("  ")]
        assert lines, (err, text)
        assert all(": " in ln for ln in lines), (err, text)


def _dump(doc) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


FUZZ = settings(max_examples=50, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("base", [BASE, BASE2])
def test_base_scenarios_are_valid(base):
    rc, out, err = validate_text(_dump(base))
    assert rc == 0, err


@FUZZ
@given(documents)
def test_arbitrary_documents(doc):
    check(_dump(doc))


@settings(FUZZ, max_examples=55)
@given(mutants())
def test_mutated_scenarios(doc):
    check(_dump(doc))


@settings(FUZZ, max_examples=15)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    text = data.decode("utf-8", errors="replace")
    check(text)
