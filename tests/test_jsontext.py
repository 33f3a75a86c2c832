"""outputs/jsontext.py writes summary.json's text faster; it must be json.dumps(obj, indent=1,
sort_keys=True) to the byte, whatever the object."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hierfl.outputs.jsontext import LONG, dumps_indent1


def ref(obj):
    return json.dumps(obj, indent=1, sort_keys=True)


def scalar(rng, kind):
    if kind == "float":
        return float(rng.choice([rng.normal() * 10.0 ** rng.integers(-300, 300), -0.0, 0.0,
                                 1e16, 1e-7, 0.1, 123456789.0]))
    if kind == "int":
        return int(rng.integers(-2**62, 2**62)) * int(rng.choice([1, 10**30]))
    if kind == "str":
        return "".join(rng.choice(list('ab ,:"\\\n\té中😀\x00/'), int(rng.integers(0, 8))))
    return [True, False, None, np.float64(1.5), math.nan, math.inf, -math.inf][
        int(rng.integers(0, 7))]


def tree(rng, depth):
    r = rng.random()
    if depth == 0 or r < 0.3:
        kind = str(rng.choice(["float", "int", "str", "other"]))
        n = int(rng.choice([0, 3, LONG, LONG + 1, 300]))
        mixed = rng.random() < 0.2
        return [scalar(rng, str(rng.choice(["float", "int", "str", "other"])) if mixed
                       else kind) for _ in range(n)]
    if r < 0.5:                      # a long list of lists only next to the leaves
        n = int(rng.choice([0, 2, 5] + ([LONG + 1] if depth == 1 else [])))
        return [tree(rng, depth - 1) for _ in range(n)]
    keys = [str(k) for k in rng.choice(["a", "b", "nodes", "Z", "é", "x y", '"q"'],
                                       int(rng.integers(0, 5)), replace=False)]
    d = {k: tree(rng, depth - 1) for k in keys}
    if rng.random() < 0.1:
        d = {**d, **{3: 1}} if not d else {1: d, 2: []}      # keys json turns into strings
    return d


@pytest.mark.parametrize("seed", range(40))
def test_same_text_as_json_dumps(seed):
    rng = np.random.default_rng(seed)
    obj = {"topology": {"nodes": tree(rng, 3)}, "data": tree(rng, 3), "x": scalar(rng, "float")}
    assert dumps_indent1(obj) == ref(obj)


def test_long_columns_of_each_kind():
    rng = np.random.default_rng(0)
    floats = (rng.normal(size=2000) * 10.0 ** rng.integers(-300, 300, 2000)).tolist()
    cols = {"f": floats, "i": rng.integers(-10**9, 10**9, 2000).tolist(),
            "s": [f"client{i}" for i in range(2000)], "b": [True] * 100,
            "nan": floats[:100] + [math.nan], "inf": [math.inf] + floats[:100],
            "np": [np.float64(v) for v in floats[:100]], "none": [None] * 100,
            "rows": [[1, 2, 3]] * 100, "mixed": [1, 1.0] * 50, "empty": [], "e": {}}
    obj = {"topology": {"nodes": cols, "clients": cols["s"]}}
    assert dumps_indent1(obj) == ref(obj)
    assert dumps_indent1(cols["f"]) == ref(cols["f"])
