"""summary.json's long lists of names kept in summary_columns.npz (issue 19: a 10^6-client report
parsed seven columns of 10^6 strings): read back they are json's strings, in json's order;
strings numpy could not give back stay in the JSON; an npz of numbers only (runs before) and
the report's uses of the columns (roles, classes, the tree's bottom groups) give what the JSON's
lists give."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from hierfl.outputs import summary_columns
from hierfl.outputs.jsontext import dumps_indent1
from hierfl.report.plots.system import _by_class, _in_order
from hierfl.report.plots.system_scale import bottom_groups


def written(tmp_path, doc, longest=5):
    """(summary.json's text, the npz's path) for `doc` (lists above jsontext.LONG = 64 items
    are the ones spanned)."""
    spans = []
    text = dumps_indent1(doc, spans, longest) + "\n"
    (tmp_path / "summary.json").write_text(text)
    return text, summary_columns.write(str(tmp_path), text, spans)


def plain(x):
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x.tolist() if isinstance(x, np.ndarray) else x


def read(tmp_path):
    return summary_columns.read(str(tmp_path), str(tmp_path / "summary.json"))


@pytest.mark.parametrize("names", [
    [f"client{k}" for k in range(70)],                     # all distinct, ASCII
    ["edge", "edge", "client", "", "client", "edge"] * 12,     # few, an empty one
    ["phone", "téléphone", "手机", "phone", "\"q\"", "a\\b", "tab\tx"] * 10,   # escapes
    [""] * 70,                                             # one, empty
])
def test_names_come_back_as_json_reads_them(tmp_path, names):
    doc = {"scenario": {"tags": list(names)},                 # not a per-node part: JSON
           "topology": {"nodes": {"name": names, "flops": [1.5] * len(names)},
                        "clients": list(reversed(names))}}
    text, path = written(tmp_path, doc)
    assert path is not None
    got = read(tmp_path)
    col = got["topology"]["nodes"]["name"]
    assert isinstance(col, np.ndarray) and col.dtype.kind == "U"
    assert isinstance(got["scenario"]["tags"], list)
    assert json.dumps(plain(got)) == json.dumps(json.loads(text))    # values, types, order
    with np.load(path) as z:
        tables = [z[k] for k in z.files if k.startswith("t") and not k.endswith("c")]
    assert len(tables) == 2 and all(len(t) == len(dict.fromkeys(names)) for t in tables)


def test_strings_numpy_would_cut_stay_in_the_json(tmp_path):
    """numpy's strings drop trailing NULs: a column holding a NUL is not coded."""
    names = ["a", "b\x00", "c", "d", "e", "f"] * 12
    doc = {"topology": {"nodes": {"name": names, "role": ["x"] * len(names)}}}
    text, _ = written(tmp_path, doc)
    got = read(tmp_path)
    assert got["topology"]["nodes"]["name"] == names                 # the JSON's list
    assert isinstance(got["topology"]["nodes"]["role"], np.ndarray)


def test_an_npz_of_numbers_only_reads_as_before(tmp_path):
    """A folder written before names were coded: its npz has no "texts"; the names are the
    JSON's lists and the numbers arrays."""
    doc = {"topology": {"nodes": {"name": [f"n{k}" for k in range(70)],
                                  "flops": [float(k) for k in range(70)]}}}
    text, path = written(tmp_path, doc)
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        arrays = {k: z[k] for k in z.files if not k.startswith("t")}
    del meta["texts"]
    np.savez(path, **{**arrays, "meta": np.array(json.dumps(meta))})
    got = read(tmp_path)
    assert isinstance(got["topology"]["nodes"]["name"], list)
    assert isinstance(got["topology"]["nodes"]["flops"], np.ndarray)
    assert json.dumps(plain(got)) == json.dumps(json.loads(text))


def test_classes_as_arrays_give_the_lists_histogram_sets():
    rng = np.random.default_rng(3)
    values = rng.random(500)
    colours = ["r", "g", "b"]
    for k in (1, 2, 5, 40):                       # 40: more than `_in_order`'s passes
        classes = [f"c{j}" if j else "" for j in rng.integers(0, k, 500).tolist()]
        want = _by_class(values, classes, colours, "clients")
        got = _by_class(values, np.array(classes), colours, "clients")
        assert [(lab, c) for _, lab, c in got] == [(lab, c) for _, lab, c in want]
        assert all(np.array_equal(a, b) for (a, _, _), (b, _, _) in zip(got, want))
        assert _in_order(np.array(classes), few=3) == list(dict.fromkeys(classes))
    assert len(_by_class(values, np.array([""] * 500), colours, "clients")) == 1
    assert len(_by_class(values, np.array(["a"] * 499), colours, "clients")) == 1


def test_bottom_groups_of_arrays_are_those_of_lists():
    rng = np.random.default_rng(5)
    aggs = ["r0", "r1"] + [f"e{k}" for k in range(6)]
    par = {"r0": "cloud", "r1": "cloud", **{f"e{k}": f"r{k % 2}" for k in range(6)}}
    nodes = {"name": aggs + [f"client{k}" for k in range(50)],
             "parent": [par[a] for a in aggs] + [f"e{k}" for k in rng.integers(0, 6, 50)],
             "role": ["edge"] * len(aggs) + ["client"] * 50,
             "depth": [1, 1] + [2] * 6 + [3] * 50,
             "flops": rng.lognormal(20, 1, len(aggs) + 50).tolist()}
    want = bottom_groups(nodes)
    got = bottom_groups({k: np.array(v) for k, v in nodes.items()})
    assert got[:4] == want[:4]
    assert all(type(a) is str for a in got[0] + got[3] + list(got[1].values()))
    np.testing.assert_array_equal(got[4], want[4])
    np.testing.assert_allclose(got[5], want[5], rtol=1e-12)


def test_a_string_column_is_stored_by_its_own_table_and_codes(tmp_path):
    """A `StringColumn` (the topology's roles, parents, edges) is stored as its table and
    codes, unused entries and all, in the smallest type; read back it is the list."""
    from hierfl.string_column import StringColumn
    table = ["cloud", "edge", "client", "künstlich"]
    codes = np.random.default_rng(7).integers(1, 4, 90)
    role = StringColumn([table[c] for c in codes], table, codes)
    names = StringColumn([f"n{k}" for k in range(90)])                 # its own table
    text, path = written(tmp_path, {"topology": {"nodes": {"role": role, "name": names}}})
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        stored = {tuple(t[0]): i for i, t in enumerate(meta["texts"])}
        i, j = stored[("topology", "nodes", "role")], stored[("topology", "nodes", "name")]
        assert z[f"t{i}"].tolist() == table and z[f"t{i}c"].dtype == np.uint8
        assert f"t{j}c" not in z.files and z[f"t{j}"].dtype.kind == "S"
    got = read(tmp_path)
    assert got["topology"]["nodes"]["role"].tolist() == list(role)
    assert json.dumps(plain(got)) == json.dumps(json.loads(text))


def test_a_very_long_name_keeps_its_column_in_the_json(tmp_path):
    """A table is as wide as its longest string in every row: one 20,000-character name among
    70 would make it 20x the list's text, so the column stays in the JSON (a reader's review:
    10^4 clients and such a name made a 421 MB npz and a MemoryError under a memory limit)."""
    from hierfl.string_column import StringColumn
    names = StringColumn([f"client{k}" for k in range(70)] + ["x" * 20_000])
    roles = StringColumn(["client"] * 71, ["client"], np.zeros(71, np.uint8))
    text, path = written(tmp_path, {"topology": {"nodes": {"name": names, "role": roles}}})
    got = read(tmp_path)
    assert isinstance(got["topology"]["nodes"]["name"], list)
    assert isinstance(got["topology"]["nodes"]["role"], np.ndarray)
    assert path is not None and os.path.getsize(path) < 20_000


@pytest.mark.parametrize("damage", ["negative", "past the end", "2-D table", "numbers",
                                    "signed codes"])
def test_string_arrays_not_as_written_are_not_trusted(tmp_path, damage):
    """An npz whose string table or codes are not what `write` writes is ignored: the JSON
    is read whole (summary.json's SHA-256 does not cover the npz)."""
    from hierfl.outputs import read_summary
    doc = {"topology": {"nodes": {"role": ["edge", "client"] * 40}}}
    text, path = written(tmp_path, doc)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    table, codes = arrays["t0"], arrays["t0c"]
    if damage == "negative":
        arrays["t0c"] = codes.astype(np.int64) - 2
    elif damage == "past the end":
        arrays["t0c"] = codes + 2
    elif damage == "2-D table":
        arrays["t0"] = np.stack([table, table])
    elif damage == "numbers":
        arrays["t0"] = np.arange(len(table))
    else:
        arrays["t0c"] = codes.astype(np.int8)
    np.savez(path, **arrays)
    assert read(tmp_path) is None
    assert read_summary(str(tmp_path)) == json.loads(text)
