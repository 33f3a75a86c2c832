"""The engine's links and trace file (issue 19): links made together for a bottom aggregator's
clients are the links made one at a time, and an existing link (its queue) is kept; the trace
file written with C-level maps is csv.writer's text, however names, times and values mix."""
from __future__ import annotations

import csv
import io
import math
from types import SimpleNamespace

import pytest
import simpy

from hierfl.sim.links import Ledger, Link, Links
from hierfl.sim.trace import Trace
from hierfl.topology.graph import build_topology
from test_scale import MIXED, _spec


def _links(topo, mobility=None) -> Links:
    sim = SimpleNamespace(env=simpy.Environment(), topo=topo, trace=Trace(),
                          ledger=Ledger.for_levels(topo.levels), failures=None,
                          mobility=mobility)
    return Links(sim, Link)


def _fields(link: Link) -> tuple:
    return (link.src, link.dst, link.latency, link.bandwidth, link.tier, link.direction)


def test_links_of_moving_clients_are_made_as_asked_for(tmp_path):
    """Where clients move, a client's parent in the tree is not its edge: nothing is made
    together (the links come one at a time, from the edge the client is at)."""
    sc = _spec(tmp_path, MIXED)
    topo = build_topology(sc.topology, sc.seed, sc.topology_file)
    links = _links(topo, mobility=object())
    edge = topo.edges[0]
    links.of_clients(edge, [k for k, c in enumerate(topo.clients) if topo.parent[c] == edge])
    assert len(links) == 0


def test_links_made_together_are_those_made_one_at_a_time(tmp_path):
    sc = _spec(tmp_path, MIXED)           # drawn latencies / bandwidths, up != down for some
    topo = build_topology(sc.topology, sc.seed, sc.topology_file)
    one, together = _links(topo), _links(topo)
    kept = together[topo.clients[3], topo.parent[topo.clients[3]]]    # made before, busy
    kept.busy_until = 7.5
    for edge in topo.edges:
        ids = [k for k, c in enumerate(topo.clients) if topo.parent[c] == edge]
        together.of_clients(edge, ids)
        together.of_clients(edge, ids)        # again: nothing new is made
        for k in ids:
            c = topo.clients[k]
            for key in ((edge, c), (c, edge)):
                assert _fields(together[key]) == _fields(one[key]), key
                lat, bw = topo.link(*key)
                assert (one[key].latency, one[key].bandwidth) == (lat, bw)
                assert one[key].tier == topo.level_of(c)
    assert len(together) == len(one) == 2 * topo.n_clients
    assert together[topo.clients[3], topo.parent[topo.clients[3]]] is kept
    assert kept.busy_until == 7.5
    up = topo.parent[topo.edges[0]]
    assert _fields(one[topo.edges[0], up])[4:] == (topo.level_of(topo.edges[0]), "up")
    with pytest.raises(KeyError):
        one[topo.clients[0], "cloud"]             # no such link


def test_links_of_a_round_made_together_under_each_clients_parent(tmp_path):
    """A round's selection across aggregators (node None: each client's own parent), in
    no tree order, some asked twice: the links made one at a time, an existing one kept."""
    sc = _spec(tmp_path, MIXED)
    topo = build_topology(sc.topology, sc.seed, sc.topology_file)
    one, together = _links(topo), _links(topo)
    ids = list(range(topo.n_clients))[::-3] + [1, 1]
    c5 = topo.clients[5]
    kept = together[topo.parent[c5], c5]
    kept.busy_until = 2.5
    together.of_clients(None, ids)
    assert len(together) == 2 * len(set(ids) | {5}) - 1 + (5 in ids)
    for k in set(ids):
        c = topo.clients[k]
        for key in ((topo.parent[c], c), (c, topo.parent[c])):
            assert _fields(together[key]) == _fields(one[key]), key
    assert together[topo.parent[c5], c5] is kept and kept.busy_until == 2.5


def _csv_text(events) -> str:
    want = io.StringIO()
    w = csv.writer(want)
    for t, n, k, p, v in events:
        w.writerow((repr(float(t)), n, k, p, str(int(v)) if float(v).is_integer() else repr(v)))
    return want.getvalue()


@pytest.mark.parametrize("keep", [True, False])
def test_trace_file_mixes_names_times_and_values_as_csv_writer_does(keep):
    """Plain names first, a name that needs quotes in a later flush, a name that is no str,
    -0.0 after 0.0, 1 and 1.0 and nan values, a time shared by events apart."""
    flushes = [[(0.0, "cloud", "round_start", "", 1), (-0.0, "cloud", "send", "e0", 1.0),
                (0.1, "e0", "recv", "cloud", 48.0), (0.30000000000000004, "c1", "send", "e0", 2.5)],
               [(0.1, "edge,0", "send", 'c"1', 48), (1e-7, 7, "recv", "e0", math.nan),
                (1e16, "c1", "compute_end", "", 3), (0.30000000000000004, "c1", "x", "", 1e20)],
               []]
    trace, got = Trace(keep=keep), io.StringIO()
    for events in flushes:
        for e in events:
            trace.record(e) if e[1] == "c1" else trace.add(*e)
        trace.flush_to(got)
    assert got.getvalue() == _csv_text([e for f in flushes for e in f])
    assert trace.count == 8 and len(trace.events) == (8 if keep else 0)
    trace.count = 20                      # a resumed run's count goes on from the checkpoint's
    trace.add(2.0, "c1", "recv", "e0", 1)
    assert trace.count == 21
