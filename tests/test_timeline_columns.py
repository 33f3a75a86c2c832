"""The timeline's columnar reading and building (issue 19: a W9 round holds ~10^5 events) give
what the event-by-event walk gives: the same events as read_round, and the same bars, in the same
order, as a queue per link walked through the events, on traces with every odd case a file can
hold (a recv before its send, a link and size reused while one is in flight, lost transfers,
a computation started twice or ended without a start, NaN sizes, handovers, in-flight ends)."""
from __future__ import annotations

import math
import random
from collections import deque

import numpy as np
import pytest

import hierfl.outputs.trace as trace_mod
from hierfl.outputs.trace import RoundColumns, read_round, read_round_columns
from hierfl.report import timeline


def walked(events):
    """The rule of report/timeline.py's docstring, one event at a time: (bars in order,
    in-flight count, marks, handovers, clients before the leaves are added)."""
    pending, bars, open_compute, marks, moves = {}, [], {}, [], []
    clients = {e[1] for e in events if e[2] in ("compute_start", "compute_end")}
    for time, node, kind, peer, value in events:
        if kind == "send":
            pending.setdefault((node, peer, value), deque()).append(time)
        elif kind in ("recv", "lost"):
            q = pending.get((peer, node, value))
            if q:
                start = q.popleft()
                bars += [(node, "download", start, time, peer), (peer, "upload", start, time, node)]
        elif kind == "compute_start":
            open_compute[node] = time
        elif kind == "compute_end" and node in open_compute:
            bars.append((node, "compute", open_compute.pop(node), time, ""))
        elif kind == "aggregate":
            marks.append((time, node))
        elif kind == "handover":
            moves.append((time, node, peer))
            clients.add(node)
    end = max(e[0] for e in events)
    flying = 0
    for (src, dst, _), starts in pending.items():
        for s in starts:
            flying += 1
            bars += [(dst, "download", s, end, src), (src, "upload", s, end, dst)]
    bars += [(n, "compute", s, end, "") for n, s in open_compute.items()]
    return bars, flying, marks, moves, clients


NODES = ["cloud", "e0", "e1", "c0", "c1", "c2", "c10"]
KINDS = ["send", "recv", "lost", "compute_start", "compute_end", "aggregate", "handover",
         "round_start", "offline"]


def random_round(rng: random.Random) -> list:
    ev, t = [(0.0, "cloud", "round_start", "", 1.0)], 0.0
    for _ in range(rng.randint(0, 60)):
        t += rng.choice([0.0, 0.5, 1.0])
        size = rng.choice([0.0, -0.0, 48.0, 48.0, 2.5, "nan"])     # a new NaN each time, as
        ev.append((t, rng.choice(NODES), rng.choice(KINDS), rng.choice(["", *NODES]),
                   float(size)))                                # read from a file: none equal
    return ev


def same_bars(got, want) -> bool:
    """Equal, with NaN equal to NaN (a NaN-sized transfer is drawn as any other)."""
    return len(got) == len(want) and all(
        a[:2] == b[:2] and a[4] == b[4] and
        all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a[2:4], b[2:4]))
        for a, b in zip(got, want))


def test_columnar_bars_are_the_event_walks():
    rng = random.Random(7)
    for _ in range(2000):
        ev = random_round(rng)
        tl = timeline.build(ev, 1)
        bars, flying, marks, moves, clients = walked(ev)
        assert same_bars([tuple(b) for b in tl.bars], bars), ev
        assert (tl.in_flight, tl.marks, tl.handovers) == (flying, marks, moves)
        assert clients <= tl.clients and set(tl.nodes) >= clients
        assert tl.count == len(bars)


def test_a_link_reused_while_a_transfer_is_in_flight_pairs_in_order():
    """A recv with nothing waiting takes nothing; later recvs take the waiting sends in order;
    the sends no recv took are drawn to the round's end, link by link."""
    ev = [(0.0, "cloud", "round_start", "", 1), (0.5, "e0", "recv", "cloud", 8),   # no send yet
          (1.0, "cloud", "send", "e0", 8), (1.5, "cloud", "send", "e0", 8),
          (2.0, "cloud", "send", "e1", 8), (2.5, "e0", "recv", "cloud", 8),
          (3.0, "e0", "recv", "cloud", 8), (3.5, "e0", "recv", "cloud", 8),       # none left
          (4.0, "cloud", "send", "e0", 8), (5.0, "cloud", "round_end", "", 1)]
    tl = timeline.build(ev, 1)
    down = [(b.node, b.start, b.end) for b in tl.bars if b.kind == "download"]
    # in flight: by link in order of its first send (cloud->e0 before cloud->e1)
    assert down == [("e0", 1.0, 2.5), ("e0", 1.5, 3.0), ("e0", 4.0, 5.0), ("e1", 2.0, 5.0)]
    assert tl.in_flight == 2


def write_trace(path, rows, crlf=True):
    end = "\r\n" if crlf else "\n"
    path.write_text("time_s,node,kind,peer,value" + end + end.join(rows) + end)
    return str(path)


def test_columns_read_the_events_read_round_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_mod, "CHUNK", 3)           # rounds across chunk boundaries
    rows = []
    for r in range(1, 5):
        rows += [f"{r}.0,cloud,round_start,,{r}", f"{r}.1,cloud,send,e0,48", "",
                 f'{r}.2,"e,0",recv,cloud,48', f"{r}.3,c1,compute_start", f"{r}.4,c1,,,",
                 f"{r}.5,cloud,round_end,,{r}"]
    p = write_trace(tmp_path / "trace.csv", rows)
    for r in range(0, 6):
        assert read_round_columns(p, r).events() == read_round(p, r), r
    # a bad time after the round's end is never read; one before it is read_round's error
    bad_after = write_trace(tmp_path / "after.csv", rows[:7] + ["x,cloud,send,e0,1"])
    assert read_round_columns(bad_after, 1).events() == read_round(bad_after, 1)
    bad_before = write_trace(tmp_path / "before.csv", ["x,cloud,send,e0,1"] + rows)
    with pytest.raises(ValueError) as want:
        read_round(bad_before, 1)
    with pytest.raises(ValueError) as got:
        read_round_columns(bad_before, 1)
    assert str(got.value) == str(want.value)
    nan_start = write_trace(tmp_path / "nan.csv", ["0,cloud,round_start,,nan"] + rows)
    with pytest.raises(ValueError, match="NaN"):
        read_round_columns(nan_start, 1)
    missing = tmp_path / "missing.csv"
    missing.write_text("time_s,node,kind,value\n0,a,round_start,1\n")
    with pytest.raises(KeyError):
        read_round_columns(str(missing), 1)


def test_load_draws_from_the_columns_what_the_walk_draws(tmp_path):
    rng = random.Random(3)
    ev = random_round(rng) + random_round(rng)[1:] + [(99.0, "cloud", "round_end", "", 1)]
    ev = [e for e in ev if not (isinstance(e[4], float) and math.isnan(e[4]))]
    p = write_trace(tmp_path / "trace.csv", [",".join(map(str, e)) for e in ev], crlf=False)
    cols = read_round_columns(p, 1)
    assert cols.events() == read_round(p, 1)
    tl = timeline.load(str(tmp_path), 1)
    assert [tuple(b) for b in tl.bars] == walked(read_round(p, 1))[0]
    assert RoundColumns.of(read_round(p, 1)).events() == read_round(p, 1)
    assert isinstance(cols.time, np.ndarray) and cols.time.dtype == np.float64


def test_rows_after_the_round_that_do_not_parse_are_never_an_error(tmp_path):
    """A field past csv's limit, an unclosed quote or bytes that are not UTF-8 after the
    round's end: read_round never reads them, and neither do the columns (a chunk that does
    not parse is read again row by row); read to the end of the file, both raise the same."""
    import csv
    head = ["time_s,node,kind,peer,value", "0,cloud,round_start,,1", "1,cloud,round_end,,1"]
    tails = {"long field": "3," + "x" * 200_000 + ",send,e0,5",
             "open quote": '3,"unterminated,send,e0,5'}
    for name, tail in tails.items():
        p = tmp_path / f"{name}.csv"
        p.write_text("\n".join(head + [tail]) + "\n")
        assert read_round_columns(str(p), 1).events() == read_round(str(p), 1), name
    long = str(tmp_path / "long field.csv")
    for read in (read_round, read_round_columns):       # round 2: read to the end
        with pytest.raises(csv.Error, match="field limit"):
            read(long, 2)
    p = tmp_path / "latin.csv"
    p.write_bytes("\n".join(head).encode() + b"\n" + b"2,cloud,send,e0,5\n" * 900 +
                  b"3,\xff\xfe,send,e0,5\n")
    assert read_round_columns(str(p), 1).events() == read_round(str(p), 1)
