"""The timeline of one cloud round, from OUT/<label>/trace.csv: per node, when it receives
(download), computes and sends (upload); the rest of the round it is idle.

The trace has (time_s, node, kind, peer, value) rows. A transfer is a `send` at the source (peer =
destination, value = bytes) followed by a `recv` at the destination (peer = source, same bytes);
a recv (or a `lost`: the transfer ends there) is paired with the earliest unpaired send of the
same link and size. Clients are the nodes that compute (or leaves two hops or more below the
cloud); the cloud is the node that starts rounds; aggregators are the rest, ordered by hops from
the cloud. A `handover` (mobility) is kept as (time, client, "from->to").

Bars are kept as columns (a W9 round makes ~10^5 of them); `Timeline.bars` lists them as Bar
tuples, in the order a walk through the events makes them: each transfer (download, then
upload) and computation when it ends, then the transfers still on the wire (by link, in send
order), then the computations still running."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from typing import NamedTuple

import numpy as np

from ..outputs import Event, RoundColumns, read_round_columns

KINDS = ("download", "compute", "upload")         # a bar's kind: its index here
_CODE = {"send": 0, "recv": 1, "lost": 1, "compute_start": 2, "compute_end": 3,
         "aggregate": 4, "handover": 5, "round_start": 6}
_OTHER = 7


class Bar(NamedTuple):
    node: str
    kind: str          # "download" | "compute" | "upload"
    start: float
    end: float
    peer: str = ""


@dataclass
class Timeline:
    round: int
    start: float
    end: float
    names: list                 # the nodes' names, by code
    node: np.ndarray            # per bar: its node's code, kind (index in KINDS), start, end,
    kind: np.ndarray            # peer's code ("" where none)
    begin: np.ndarray
    finish: np.ndarray
    peer: np.ndarray
    nodes: list[str]            # rows, top to bottom: cloud, aggregators by depth, clients
    clients: set[str]
    marks: list[tuple[float, str]]   # (time, node) of aggregations
    in_flight: int = 0          # sends with no recv before the round ended
    handovers: list[tuple[float, str, str]] = field(default_factory=list)  # (time, client,
    #                                                  "from->to"): mobility (sim/mobility.py)

    @property
    def count(self) -> int:
        return len(self.node)

    @cached_property
    def bars(self) -> list[Bar]:
        names = self.names
        return list(map(Bar, map(names.__getitem__, self.node.tolist()),
                        map(KINDS.__getitem__, self.kind.tolist()), self.begin.tolist(),
                        self.finish.tolist(), map(names.__getitem__, self.peer.tolist())))


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


class _Naturals(dict):
    """name -> _natural(name), each worked out once (a name is sorted in several lists)."""

    def __missing__(self, name: str) -> tuple[str, int]:
        key = self[name] = _natural(name)
        return key


def build(events: list[Event], round_: int) -> Timeline:
    """Bars of one round's events (see the module docstring for the pairing rule)."""
    return build_columns(RoundColumns.of(events), round_)


def _empty(round_: int) -> Timeline:
    z, i = np.zeros(0), np.zeros(0, np.int64)
    return Timeline(round_, 0.0, 0.0, [], i, i, z, z, i, [], set(), [])


def _pairs(send_key: np.ndarray, send_at: np.ndarray, recv_key: np.ndarray,
           recv_at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FIFO pairing per key, as a queue per key walked in file order: a recv takes the earliest
    waiting send of its key, or nothing when none waits. Keys are 0..K-1 in order of their
    first send (-1: a recv whose key was never sent); `*_at` are file positions, ascending.
    Returns (the positions of the recvs that took a send, the send each took, the sends left
    waiting: by key, then in file order). On a key's walk (+1 a send, -1 a recv) the queue
    holds the walk less its lowest point so far (or 0), and a recv finds it empty exactly
    where it would go below that."""
    ok = recv_key >= 0
    key = np.r_[send_key, recv_key[ok]]
    at = np.r_[send_at, recv_at[ok]]
    step = np.r_[np.ones(len(send_key), np.int64), np.full(int(ok.sum()), -1, np.int64)]
    order = np.lexsort((at, key))
    key, at, step = key[order], at[order], step[order]
    n = len(key)
    idx = np.arange(n)
    first = np.r_[True, key[1:] != key[:-1]] if n else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, idx, 0))     # each one's key's first entry
    walk = np.cumsum(step)
    walk = walk - (walk - step)[start]                       # each key's walk from 0
    big = 2 * n + 2                                          # later keys far below earlier
    low = np.minimum.accumulate(walk - key * big) + key * big   # each key's own lowest so far
    queue = walk - np.minimum(low, 0)
    before = np.r_[0, queue[:-1]]
    before[first] = 0
    sends = step > 0
    taken = ~sends & (before > 0)
    sends_before = np.cumsum(sends) - sends
    taken_before = np.cumsum(taken) - taken
    nth = (sends_before[start] + taken_before - taken_before[start])[taken]
    send_sorted = at[sends]                                  # by key, then file order
    waiting = np.ones(len(send_sorted), bool)
    waiting[nth] = False
    got = at[taken]
    took = send_sorted[nth]
    by_file = np.argsort(got, kind="stable")
    return got[by_file], took[by_file], send_sorted[waiting]


def _keys(s_src: np.ndarray, s_dst: np.ndarray, s_bytes: np.ndarray, r_src: np.ndarray,
          r_dst: np.ndarray, r_bytes: np.ndarray, names: int
          ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Each send's key id (0, 1, ... in order of first send), each recv's (-1: no send of its
    key), and the (source, destination) codes of the keys in id order. Keys are equal as
    (str, str, float) tuples are: -0.0 is 0.0, and a NaN equals nothing (each NaN send is a
    key of its own)."""
    s_nan, r_nan = np.isnan(s_bytes), np.isnan(r_bytes)
    size = np.unique(np.r_[s_bytes[~s_nan], r_bytes[~r_nan]])   # -0.0 and 0.0: one value
    s_size = np.where(s_nan, len(size) + np.arange(len(s_bytes)),
                      np.searchsorted(size, np.where(s_nan, 0.0, s_bytes)))
    r_size = np.searchsorted(size, np.where(r_nan, 0.0, r_bytes))
    _, link = np.unique(np.r_[s_src * names + s_dst, r_src * names + r_dst],
                        return_inverse=True)                   # (source, destination) ids
    link = link.ravel()
    width = len(size) + len(s_bytes) + 1
    s_comb = link[:len(s_src)] * width + s_size
    r_comb = link[len(s_src):] * width + r_size
    distinct, first, s_inv = np.unique(s_comb, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # ids by first send
    at = np.minimum(np.searchsorted(distinct, r_comb), max(len(distinct) - 1, 0))
    hit = (distinct[at] == r_comb) & ~r_nan if len(distinct) else np.zeros(len(r_comb), bool)
    r_key = np.where(hit, rank[at] if len(distinct) else 0, -1)
    order = np.sort(first)
    return rank[s_inv.ravel()], r_key, list(zip(s_src[order].tolist(), s_dst[order].tolist()))


def build_columns(ev: RoundColumns, round_: int) -> Timeline:
    """Bars of one round's events, as columns (the module docstring: pairing and order)."""
    n = len(ev.time)
    if n == 0:
        return _empty(round_)
    node, kind, peer = ev.node, ev.kind, ev.peer
    times = ev.time.tolist()
    code = np.fromiter(map(_CODE.get, kind, repeat(_OTHER)), np.int64, n)
    where = {c: np.flatnonzero(code == c) for c in range(_OTHER)}
    starts = where[6].tolist()
    t0 = min(times[i] for i in starts) if starts else times[0]
    t1 = max(times)
    root = node[starts[0]] if starts else "cloud"
    names = list(dict.fromkeys([*node, *peer, ""]))
    index = {name: i for i, name in enumerate(names)}
    nc = np.fromiter(map(index.__getitem__, node), np.int64, n)
    pc = np.fromiter(map(index.__getitem__, peer), np.int64, n)
    # transfers: a send's key is (source, destination, bytes), a recv's (peer, node, bytes)
    s_at, r_at = where[0], where[1]
    s_key, r_key, links = _keys(nc[s_at], pc[s_at], ev.value[s_at], pc[r_at], nc[r_at],
                                ev.value[r_at], len(names))
    got, took, waiting = _pairs(s_key, s_at, r_key, r_at)
    adjacency: dict[str, set[str]] = {}
    for a, b in links:
        adjacency.setdefault(names[a], set()).add(names[b])
        adjacency.setdefault(names[b], set()).add(names[a])
    # computations: a walk over their events (a node's start waits for its end)
    comp = np.sort(np.r_[where[2], where[3]])
    c_node = nc[comp].tolist()
    clients = {names[c] for c in set(c_node)}
    open_compute: dict[int, float] = {}          # node code -> start
    done: list[tuple[int, int, float, float]] = []
    for i, starts_, c, time in zip(comp.tolist(), (code[comp] == 2).tolist(), c_node,
                                   ev.time[comp].tolist()):
        if starts_:
            open_compute[c] = time
        elif c in open_compute:
            done.append((i, c, open_compute.pop(c), time))
    # the bars: transfers (download, upload) and computations in the order they ended, ...
    c_at = np.array([d[0] for d in done], np.int64)
    c_node = np.array([d[1] for d in done], np.int64)
    at = np.r_[2 * got, 2 * got + 1, 2 * c_at]
    b_node = np.r_[nc[got], pc[got], c_node]
    b_peer = np.r_[pc[got], nc[got], np.full(len(done), index[""], np.int64)]
    b_kind = np.r_[np.zeros(len(got), np.int64), np.full(len(got), 2), np.ones(len(done),
                                                                             np.int64)]
    b_start = np.r_[ev.time[took], ev.time[took], [d[2] for d in done]]
    b_end = np.r_[ev.time[got], ev.time[got], [d[3] for d in done]]
    order = np.argsort(at, kind="stable")
    # ... then transfers still on the wire (drawn to the end), computations still running
    w, k = len(waiting), len(open_compute)
    tail_node = np.c_[pc[waiting], nc[waiting]].ravel()
    tail_peer = np.c_[nc[waiting], pc[waiting]].ravel()
    tail_start = np.repeat(ev.time[waiting], 2)
    tail_kind = np.tile(np.array([0, 2], np.int64), w)
    run_node = np.array(list(open_compute), np.int64)
    timeline = Timeline(
        round_, t0, t1, names,
        np.r_[b_node[order], tail_node, run_node],
        np.r_[b_kind[order], tail_kind, np.ones(k, np.int64)],
        np.r_[b_start[order], tail_start, list(open_compute.values())].astype(np.float64),
        np.r_[b_end[order], np.full(2 * w + k, t1)].astype(np.float64),
        np.r_[b_peer[order], tail_peer, np.full(k, index[""], np.int64)],
        [], clients, list(zip([times[i] for i in where[4].tolist()],
                              [node[i] for i in where[4].tolist()])), w,
        [(times[i], node[i], peer[i]) for i in where[5].tolist()])
    timeline.clients |= {node[i] for i in where[5].tolist()}
    timeline.nodes = _rows_in_order(timeline, root, adjacency)
    return timeline


def _rows_in_order(tl: Timeline, root: str, adjacency: dict[str, set[str]]) -> list[str]:
    """Rows: root, aggregators by hops from the root, then clients grouped under their parent;
    a client is a node that computes, or a leaf two or more hops below the root (tl.clients
    gets those)."""
    natural = _Naturals().__getitem__
    depth = {root: 0}
    frontier = [root]
    while frontier:
        nxt = []
        for n in frontier:
            for m in sorted(adjacency.get(n, ()), key=natural):
                if m not in depth:
                    depth[m] = depth[n] + 1
                    nxt.append(m)
        frontier = nxt
    clients = tl.clients
    clients |= {n for n, d in depth.items() if d >= 2 and len(adjacency.get(n, ())) == 1}
    aggs = sorted((n for n in depth if n != root and n not in clients),
                  key=lambda n: (depth[n], natural(n)))
    order = {a: i for i, a in enumerate(aggs)}
    parent_of = {c: min((p for p in adjacency.get(c, ()) if p in order),
                        key=lambda p: (-depth[p], natural(p)), default="") for c in clients}
    cl = sorted(clients, key=lambda c: (order.get(parent_of[c], -1), natural(c)))
    return [root, *aggs, *cl]


def load(folder: str, round_: int) -> Timeline | None:
    p = os.path.join(folder, "trace.csv")
    if not os.path.isfile(p):
        return None
    ev = read_round_columns(p, round_)
    return build_columns(ev, round_) if len(ev.time) else None


ARRAYS = ("node", "kind", "begin", "finish", "peer")


def load_fields(folder: str, round_: int) -> dict:
    """`load` as a dict of numpy arrays and JSON values (what a child reading it ahead sends
    back; `from_fields` makes the Timeline again); {} for None."""
    tl = load(folder, round_)
    if tl is None:
        return {}
    return {"round": tl.round, "start": tl.start, "end": tl.end, "names": tl.names,
            **{k: getattr(tl, k) for k in ARRAYS}, "nodes": tl.nodes,
            "clients": list(tl.clients), "marks": tl.marks, "in_flight": tl.in_flight,
            "handovers": tl.handovers}


def from_fields(d: dict) -> Timeline | None:
    if not d:
        return None
    return Timeline(d["round"], d["start"], d["end"], d["names"], *(d[k] for k in ARRAYS),
                    d["nodes"], set(d["clients"]), [tuple(m) for m in d["marks"]],
                    d["in_flight"], [tuple(h) for h in d["handovers"]])


def busy_fraction(tl: Timeline, node: str, kind: str) -> float:
    """Share of the round during which `node` does `kind` (overlapping bars merged)."""
    span = tl.end - tl.start
    if span <= 0:
        return 0.0
    iv = sorted((b.start, b.end) for b in tl.bars if b.node == node and b.kind == kind)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total / span
