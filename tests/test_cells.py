"""outputs/cells.py reads a CSV's columns with numpy; every file must give the cells csv.reader
gives (the fast path and its fall-back), and the readers built on it (read_clients,
read_class_totals) the values of a plain row-by-row reading."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from hierfl.outputs.cells import read_columns
from hierfl.outputs.classes import NUMERIC, class_label, read_class_totals
from hierfl.outputs.metrics import read_clients


def reference(path, names, whole=()):
    """What csv.reader gives: the cells of the named columns, "" for a short row's missing
    cells, rows without a cell of a `whole` column left out."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    head = rows[0] if rows else []
    idx = {k: head.index(k) for k in names if k in head}
    need = max((head.index(k) for k in whole if k in head), default=-1) + 1
    body = [r for r in rows[1:] if len(r) >= need]
    return head, {k: [r[i] if i < len(r) else "" for r in body] for k, i in idx.items()}


def write(path, text: bytes):
    path.write_bytes(text)
    return str(path)


CASES = {
    "lf": b"a,b,c\n1,2.5,x\n3,,y\n",
    "crlf": b"a,b,c\r\n1,2.5,x\r\n3,,\r\n",
    "quoted": b'a,b,c\r\n1,"2,5",x\r\n3,4,"y ""z"""\r\n',
    "blank line": b"a,b,c\n1,2,3\n\n4,5,6\n",
    "short row": b"a,b,c\n1,2\n4,5,6\n",
    "long row": b"a,b,c\n1,2,3,4\n4,5,6\n",
    "no final newline": b"a,b,c\n1,2,3\n4,5,6",
    "mixed line ends": b"a,b,c\r\n1,2,3\n4,5,6\r\n",
    "lone cr": b"a,b,c\n1,2\r,3\n",
    "header only": b"a,b,c\n",
    "empty": b"",
    "utf-8": "a,b,c\n1,téléphone,ç\n2,手机,\n".encode(),
    "empty cells": b"a,b,c\n,,\n,,\n",
    "one column": b"b\n1\n\n2\n",
    "wide cell": b"a,b,c\n1," + b"9" * 300 + b",x\n2,3,y\n",
    "repeated name": b"a,b,b\n1,2,3\n",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_read_columns_gives_what_csv_reader_gives(tmp_path, case):
    p = write(tmp_path / "f.csv", CASES[case])
    for names, whole in ((("a", "b", "c", "zz"), ()), (("c", "a"), ("c",)), (("b",), ("b",))):
        head, got = read_columns(p, names, whole)
        want_head, want = reference(p, names, whole)
        assert head == want_head
        assert list(got) == list(want)
        for k in want:
            assert [c.decode() for c in got[k].tolist()] == want[k], (case, k)


def test_fast_path_is_taken_for_hierfl_files(tmp_path, monkeypatch):
    """The files hierfl writes (no quotes, "\\r\\n" or "\\n" line ends) never reach csv.reader."""
    import hierfl.outputs.cells as cells

    def no(*a, **k):
        raise AssertionError("csv.reader path")
    monkeypatch.setattr(cells, "_read_slow", no)
    for text in (CASES["lf"], CASES["crlf"], CASES["utf-8"], CASES["empty cells"]):
        p = write(tmp_path / "f.csv", text)
        assert read_columns(p, ["a", "b", "c"])[1]["a"].size == text.count(b"\n") - 1


def rows_clients(rng, n):
    dev = rng.choice(["", "phone", "laptop", "(default)", "tablet, big"], n)
    link = rng.choice(["", "lte", "wifi"], n)
    head = ["round", "client", "steps", "compute_s", "upload_s", "up_bytes", "dropped",
            "energy_j", "device_class", "link_class", "gamma"]
    rows = []
    for i in range(n):
        rows.append([i // 7, int(rng.integers(0, 40)), int(rng.integers(0, 10)),
                     repr(float(rng.exponential())), "" if i % 5 == 0 else repr(-rng.random()),
                     "nan" if i % 11 == 0 else "48.0", "inf" if i % 13 == 0 else i % 2,
                     repr(float(rng.normal() * 1e-300)), dev[i], link[i],
                     "" if i % 3 else "x1"])
    return head, rows


def plain_totals(paths):
    """read_class_totals as a row-by-row loop (the rule of its docstring)."""
    out = {}
    for p in paths:
        with open(p, newline="") as fh:
            r = csv.reader(fh)
            head = next(r)
            di, li = head.index("device_class"), head.index("link_class")
            for row in r:
                t = out.setdefault(class_label(row[di], row[li]),
                                   {"rounds": 0, "clients": set(), "sums": {}, "counts": {}})
                t["rounds"] += 1
                for k in NUMERIC:
                    try:
                        v = float(row[head.index(k)])
                    except ValueError:
                        continue
                    if k == "client":
                        t["clients"].add(int(v))
                    elif math.isfinite(v):
                        t["sums"][k] = t["sums"].get(k, 0.0) + v
                        t["counts"][k] = t["counts"].get(k, 0) + 1
    return out


@pytest.mark.parametrize("lineterminator", ["\r\n", "\n"])
def test_class_totals_and_clients_equal_a_row_by_row_reading(tmp_path, lineterminator):
    rng = np.random.default_rng(3)
    paths = []
    for s in range(2):              # two seeds of an algorithm, pooled in file order
        head, rows = rows_clients(rng, 500)
        (tmp_path / str(s)).mkdir()
        p = tmp_path / str(s) / "clients.csv"
        with open(p, "w", newline="") as fh:
            w = csv.writer(fh, lineterminator=lineterminator)
            w.writerow(head)
            w.writerows(rows)
        paths.append(str(p))
    got = read_class_totals([str(tmp_path / "0"), str(tmp_path / "1")])
    want = plain_totals(paths)
    assert list(got) == list(want)          # classes in order of first appearance
    assert "(default) / lte" in got         # "" and "(default)" are one class
    for label, t in got.items():
        w = want[label]
        assert t.rounds == w["rounds"] and t.clients == w["clients"]
        for k in NUMERIC[1:]:
            assert t.counts[k] == w["counts"].get(k, 0)
            assert t.sums[k] == w["sums"].get(k, 0.0)       # the same additions, same order
    cl = read_clients(str(tmp_path / "0"))
    with open(paths[0], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert np.array_equal(cl["gamma"], np.full(500, math.nan), equal_nan=True)   # "x1": nan
    assert np.array_equal(cl["compute_s"], [float(r["compute_s"]) for r in rows])
    assert np.array_equal(cl["dropped"], [float(r["dropped"]) for r in rows])


def dict_reader_round(path, round_):
    """read_round's rule through csv.DictReader, row by row."""
    out, inside = [], False
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            ev = (float(row["time_s"]), row["node"], row["kind"], row["peer"] or "",
                  float(row["value"] or 0))
            inside = inside or ev[2] == "round_start" and int(ev[4]) == round_
            if inside:
                out.append(ev)
                if ev[2] == "round_end" and int(ev[4]) == round_:
                    break
    return out


def test_read_round_reads_as_dict_reader(tmp_path):
    from hierfl.outputs.trace import read_round
    text = ("time_s,node,kind,peer,value\r\n0,cloud,round_start,,1\r\n0.5,edge0,send,c1,48\r\n"
            "\r\n0.7,c1,recv,edge0\r\n0.9,cloud,round_end,,1\r\n1.0,cloud,round_start,,2\r\n"
            "1.2,c1,compute_start,,\r\n1.5,cloud,round_end,,2\r\n")
    p = write(tmp_path / "trace.csv", text.encode())
    for r in (1, 2, 3):
        assert read_round(p, r) == dict_reader_round(p, r)
    assert [e[2] for e in read_round(p, 1)] == ["round_start", "send", "recv", "round_end"]
    dup = write(tmp_path / "dup.csv", b"time_s,node,kind,peer,value,node\n0,a,round_start,,1,b\n")
    assert read_round(dup, 1) == dict_reader_round(dup, 1) == [(0.0, "b", "round_start", "", 1.0)]
    bad = write(tmp_path / "bad.csv", b"time_s,node,kind,value\n0,a,round_start,1\n")
    with pytest.raises(KeyError):
        dict_reader_round(bad, 1)
    with pytest.raises(KeyError):
        read_round(bad, 1)


def test_client_numbers_beyond_int64_are_kept_apart(tmp_path):
    """A client cell past int64's range (1e20, 2e20) is the integer it reads as, as when rows
    were added one by one (a cast to int64 made them one wrong number)."""
    text = "client,steps,device_class,link_class\n"
    ids = ["1e20", "2e20", "-3e19", "5", "9.3e18", "-9.3e18", "9223372036854775807", "1.5"]
    p = write(tmp_path / "clients.csv", (text + "".join(f"{c},1,phone,lte\n" for c in ids)
                                         ).encode())
    got = read_class_totals([str(tmp_path)])["phone / lte"]
    assert got.clients == plain_totals([p])["phone / lte"]["clients"]
    assert len(got.clients) == len(ids)


def test_a_long_cell_does_not_multiply_the_memory_of_its_column(tmp_path):
    """One 250-byte cell makes the column 250 bytes wide; gathering it must not take an 8-byte
    position per byte of every row at once (20,000 rows: 40 MB) on top of the 5 MB result."""
    import tracemalloc

    rows = "".join(f"{i},phone\n" for i in range(20_000))
    p = write(tmp_path / "clients.csv", ("client,device_class\n" + rows + "1," + "x" * 250 +
                                         "\n").encode())
    tracemalloc.start()
    try:
        head, cols = read_columns(p, ["device_class"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cols["device_class"].dtype == np.dtype("S250") and len(cols["device_class"]) == 20_001
    assert cols["device_class"][-1] == b"x" * 250 and cols["device_class"][0] == b"phone"
    assert peak < 16e6, peak


def test_a_cell_that_is_not_utf8_is_an_error_as_with_csv_reader(tmp_path):
    """The old row-by-row reading failed on a byte that is not UTF-8 (the report says it cannot
    read the run's files); the numpy path must not read it as a replacement character."""
    (tmp_path / "a").mkdir()
    write(tmp_path / "a" / "clients.csv",
          b"client,steps,device_class,link_class\r\n1,2,ph\xe9,lte\r\n2,3,,\r\n")
    with pytest.raises(UnicodeDecodeError):
        read_class_totals([str(tmp_path / "a")])
    write(tmp_path / "a" / "clients.csv", b"client,steps\r\n1,\xe9\r\n")
    with pytest.raises(UnicodeDecodeError):
        read_clients(str(tmp_path / "a"))


def test_integer_columns_read_digit_by_digit_as_numpy_parses_them():
    """`floats` reads a column of plain decimal integers digit by digit; every column gives
    the floats of the general parse (numpy's, then float() cell by cell), with "" as nan."""
    from hierfl.outputs.metrics import _integers, floats

    def general(cells):
        out = []
        for c in cells.tolist():
            try:
                out.append(float(c.decode()) if c else math.nan)   # float() reads "\u0663" too
            except ValueError:
                out.append(math.nan)
        return np.array(out, float)

    rng = np.random.default_rng(5)
    plain = [str(v).encode() for v in rng.integers(0, 10**6, 200).tolist()]
    columns = {
        "plain": plain, "zeros": [b"0", b"007", b"10", b"000000"],
        "long": [b"9" * 18, b"123456789012345678", b"1"],
        "past int64 digits": [b"9" * 19, b"1"],
        "empty cell": plain[:5] + [b""], "all empty": [b"", b""],
        "signs": [b"-1", b"+2", b"3"], "floats": [b"1.5", b"2", b"1e3"],
        "words": [b"nan", b"inf", b"12"], "spaces": [b" 1", b"2 "],
        "non-ascii digits": ["\u0663".encode(), b"1"],
    }
    for name, cells in columns.items():
        a = np.array(cells, dtype=f"S{max(1, max(map(len, cells)))}")
        assert np.array_equal(floats(a), general(a), equal_nan=True), name
    assert _integers(np.array(plain)) is not None                 # the digit path was taken
    assert _integers(np.array([b"1.5", b"2"])) is None
    inner_nul = np.array([b"12", b"34"]).view(np.uint8).copy()
    inner_nul[0] = 0                                               # "\x002": not an integer
    assert _integers(inner_nul.view("S2")) is None
