"""The closed-form timing of the most common flat round on arrays (issue 19): the cloud above
aggregators whose active children are all clients, nobody dropped, every link idle when its
transfer is asked for (a round that starts quiescent leaves each client's own links idle).

The times are computed column by column with the operations of closed_form._Round.hop, in the
same order (numpy's float64 elementwise arithmetic gives the same doubles), and only the
relays' FIFO recursion on each aggregator's uplink runs per client. The events are then
ordered by time. That is the event loop's order wherever no two events of different
processings share a time, plus the broadcast's ties, whose order is fixed by the spawns:
the cloud's sends in child order, and at an aggregator's arrival its recv then its
children's downloads in child order (aggregators arriving together in child order). Any other
tie, a busy link or another shape returns None and the round is ordered by
closed_form._Round's keys instead. tests/test_closed_arrays.py checks both give the same."""
from __future__ import annotations

from operator import attrgetter, itemgetter

import numpy as np

_LINK = attrgetter("busy_until", "bandwidth", "latency")


def two_tier(sim, chosen, work, down: float) -> tuple | None:
    """The round's (end, arrived clients, events, sends) on arrays (closed_form.RoundTiming's
    fields), or None where closed_form.flat_round must order it with keys."""
    if work.drop.any():
        return None
    now, links, index, parent = sim.env.now, sim.links, sim.index, sim.topo.parent
    aggs = chosen.active("cloud")
    names, ks, of = [], [], []                 # clients in broadcast order, their aggregator
    for j, a in enumerate(aggs):
        kids = chosen.active(a)
        if a in index or parent.get(a) != "cloud" or not kids:
            return None
        for kid in kids:
            k = index.get(kid)
            if k is None:
                return None
            names.append(kid)
            ks.append(k)
        of += [j] * len(kids)
    pos = {k: i for i, k in enumerate(chosen.ids.tolist())}
    rows = np.array([pos[k] for k in ks], dtype=np.int64)
    of = np.array(of, dtype=np.int64)
    agg_of = [aggs[j] for j in of.tolist()]
    top = [links["cloud", a] for a in aggs]
    dls = [links[a, n] for a, n in zip(agg_of, names)]
    uls = [links[n, a] for a, n in zip(agg_of, names)]
    tb, dl, ul = (np.array(list(map(_LINK, ls)), dtype=np.float64).reshape(-1, 3)
                  for ls in (top, dls, uls))
    up = work.up_bytes[rows]
    # _Round.hop of an idle link: tx = bytes / bandwidth, arrival = now + (tx + latency)
    tx_top = down / tb[:, 1]
    te = now + (tx_top + tb[:, 2])                 # the aggregators' arrivals
    t_send = te[of]
    tx_dl = down / dl[:, 1]
    got = t_send + (tx_dl + dl[:, 2])
    done = got + work.ctime[rows].astype(np.float64)
    tx_ul = up / ul[:, 1]
    arrive = done + (tx_ul + ul[:, 2])
    if (tb[:, 0] > now).any() or (dl[:, 0] > t_send).any() or (ul[:, 0] > done).any():
        return None
    s, r, queued, rlinks, busy = _relays(links, aggs, of, arrive, up)
    steps = [work.recs[i].steps for i in rows.tolist()]
    ev = _ordered(now, aggs, top, of, te, (got, done, arrive, s, r), queued,
                  (agg_of, names, dls, uls, rlinks), down, up.tolist(), steps)
    if ev is None:
        return None
    for ls, b in ((top, now + tx_top), (dls, t_send + tx_dl), (uls, done + tx_ul)):
        for link, v in zip(ls, b.tolist()):
            link.busy_until = v
    for link, v in busy.items():
        link.busy_until = v
    arr = np.argsort(r, kind="stable")             # no ties (_ordered refused them)
    recs = work.recs
    for i, rt, dn in zip(rows[arr].tolist(), r[arr].tolist(), done[arr].tolist()):
        recs[i].upload_s = rt - dn                 # as _client: arrival - compute end
    return float(r[arr[-1]]), np.array(ks, dtype=np.int64)[arr].tolist(), *ev


def _relays(links, aggs: list, of: np.ndarray, arrive: np.ndarray, up: np.ndarray):
    """Each aggregator's uplink serving its clients' uploads in order of arrival (_Round.hop
    per client, FIFO; a tie is refused by _ordered): per client, the relay's send time, its
    arrival at the cloud, whether it queued, the link; the links' final busy times (set by
    the caller)."""
    n = len(arrive)
    s, r, queued, rlinks = [0.0] * n, [0.0] * n, [False] * n, [None] * n
    busy_of: dict = {}
    j_now, link = -1, None
    order = np.lexsort((arrive, of)).tolist()
    ofs, arr, ups = of.tolist(), arrive.tolist(), up.tolist()
    busy = bw = lat = 0.0
    for i in order:
        if ofs[i] != j_now:
            if link is not None:
                busy_of[link] = busy
            j_now = ofs[i]
            link = links[aggs[j_now], "cloud"]
            busy, bw, lat = link.busy_until, link.bandwidth, link.latency
        now, nb = arr[i], ups[i]
        start = now if busy <= now else busy
        tx = nb / bw
        busy = start + tx
        if start > now:
            now = now + (start - now)
            queued[i] = True
        s[i], r[i], rlinks[i] = now, now + (tx + lat), link
    if link is not None:
        busy_of[link] = busy
    return np.array(s), np.array(r), np.array(queued), rlinks, busy_of


def _ordered(now, aggs, top, of, te, times, queued, objs, down, up, steps):
    """The round's trace events and sends in the event loop's order, or None where two
    events of different processings share a time (their order needs closed_form's keys).

    Events are listed in blocks whose order breaks the ties that are allowed, then sorted
    stably by time: the cloud's sends (child order); per aggregator in child order its recv
    and its children's downloads (aggregators arriving together: in child order, as their
    spawns are keyed); then per client processing its events in trace order (class: each
    processing its own)."""
    got, done, arrive, s, r = times
    agg_of, names, dls, uls, rlinks = objs
    na, n = len(aggs), len(names)
    counts = np.bincount(of, minlength=na)
    ci = np.arange(n)
    own = 2 + 3 * ci                   # per client: download arrival (+0), compute end (+1),
    #                                    relay arrival (+2); a queued relay send, the cloud's recv
    t = np.concatenate((np.full(na, now), np.repeat(te, counts + 1), got, got, done, done,
                        arrive, s, r))
    cls = np.concatenate((np.zeros(na, np.int64), np.ones(n + na, np.int64), own, own,
                          own + 1, own + 1, own + 2,
                          np.where(queued, 2 + 3 * n + ci, own + 2), 2 + 4 * n + ci))
    bcast_node, bcast_kind, bcast_peer, bcast_link = [], [], [], []
    lo = 0
    for j, a in enumerate(aggs):            # an aggregator's recv, then its downloads
        hi = lo + int(counts[j])
        bcast_node += [a] + [a] * (hi - lo)
        bcast_kind += ["recv"] + ["send"] * (hi - lo)
        bcast_peer += ["cloud"] + names[lo:hi]
        bcast_link += [None] + dls[lo:hi]
        lo = hi
    cl, nothing = ["cloud"] * n, [None] * n
    node = ["cloud"] * na + bcast_node + names * 4 + agg_of * 2 + cl
    kind = (["send"] * na + bcast_kind + ["recv"] * n + ["compute_start"] * n +
            ["compute_end"] * n + ["send"] * n + ["recv"] * n + ["send"] * n + ["recv"] * n)
    peer = list(aggs) + bcast_peer + agg_of + [""] * (2 * n) + agg_of + names + cl + agg_of
    value = [down] * (2 * na + 2 * n) + steps * 2 + up * 4
    link = top + bcast_link + nothing * 3 + uls + nothing + rlinks + nothing
    order = np.argsort(t, kind="stable")
    ts, cs = t[order], cls[order]
    if ((ts[1:] == ts[:-1]) & (cs[1:] != cs[:-1])).any():
        return None
    pick = itemgetter(*order.tolist())
    events = list(zip(ts.tolist(), pick(node), pick(kind), pick(peer), pick(value)))
    sent = [i for i in order.tolist() if link[i] is not None]
    return events, [(link[i], value[i]) for i in sent]
