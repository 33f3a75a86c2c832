"""Client mobility in simulated time (config/mobility.py): where each client is attached, when
it hands over, and what a handover does to the client's transfers. Torch-free.

- Schedules. markov: client k's holding times are exponential with rate handover_rate_per_s,
  drawn with its next edge from its own stream seeding.rng(seed, "mobility", k) (no other draw
  moves); neighbours ring = previous / next edge in the topology's edge order, all = any other
  edge, graph = another edge under the same parent aggregator (an edge without one never loses
  its clients). trace: the moves of a CSV (topology/moves.py). Rate 0 or no neighbour: no move.
- The link rule. A client's access link is its own, drawn per client by topology/build.py (its
  radio and access network: bandwidth and latency); a handover changes the node at its other
  end, so everything above it: the hops edge -> ... -> cloud of its next upload (flat
  algorithms), and which aggregator trains it (hierarchical ones).
- Membership. A cloud round's tree (who is under which edge, the aggregation weights) is the
  attachment at the round's start; a hierarchical edge round trains the selected clients under
  the edge at that edge round's start.
- Transfers. A client <-> edge transfer that a handover meets (it hands over after the transfer
  starts and before it arrives), or that starts while the client is no longer under that edge:
  `drop` -> lost at the handover (its bytes were sent: counted in the ledger and as wasted; a
  transfer that never started sends nothing), the client's update fails this round; `resume` ->
  delivered (the network forwards it), `handover_s` later per handover it met.
trace.csv: `handover` events (node = the client, peer = "<from>-><to>", value 1)."""
from __future__ import annotations

import heapq

import numpy as np

from .. import seeding
from ..config.errors import ScenarioError
from ..config.work import MAX_TRANSFER_HANDOVERS
from .links import Link


class Mobility:
    """Each client's moves: times (sorted) and the edge id after each move."""

    def __init__(self, spec, seed: int, edges: tuple[str, ...], home: np.ndarray,
                 parent: dict[str, str], moves: dict | None = None):
        self.spec, self.seed, self.edges = spec, seed, edges
        self.home = np.asarray(home, np.int64)
        self.rate = float(spec.handover_rate_per_s) if spec.kind == "markov" else 0.0
        self.near = _neighbours(spec.neighbours, edges, parent)
        self._t: dict[int, list[float]] = {}
        self._e: dict[int, list[int]] = {}
        self._gen: dict[int, np.random.Generator] = {}
        self._fixed = spec.kind == "trace"
        for k, (times, ids) in (moves or {}).items():
            self._t[k], self._e[k] = [float(x) for x in times], [int(x) for x in ids]

    def _moves(self, k: int, until: float) -> tuple[list[float], list[int]]:
        """Client k's moves, drawn at least beyond `until` (markov)."""
        t, e = self._t.setdefault(k, []), self._e.setdefault(k, [])
        if self._fixed or self.rate <= 0:
            return t, e
        g = self._gen.get(k)
        if g is None:
            g = self._gen[k] = seeding.rng(self.seed, "mobility", k)
        while not t or t[-1] <= until:
            at = e[-1] if e else int(self.home[k])
            near = self.near[at]
            if not near:
                t.append(float("inf"))
                e.append(at)
                break
            t.append((t[-1] if t else 0.0) + float(g.exponential(1.0 / self.rate)))
            e.append(near[int(g.integers(len(near)))])
        return t, e

    def edge_id(self, k: int, now: float) -> int:
        """The edge client k is under at `now` (a move at exactly `now` has happened)."""
        t, e = self._moves(k, now)
        i = int(np.searchsorted(t, now, side="right"))
        return e[i - 1] if i else int(self.home[k])

    def edge(self, k: int, now: float) -> str:
        return self.edges[self.edge_id(k, now)]

    def next_move(self, k: int, after: float) -> float | None:
        """The time of client k's first move strictly after `after`, or None."""
        t, _ = self._moves(k, after)
        i = int(np.searchsorted(t, after, side="right"))
        return t[i] if i < len(t) and t[i] != float("inf") else None


def _neighbours(kind: str, edges: tuple[str, ...], parent: dict[str, str]) -> list[list[int]]:
    n = len(edges)
    if kind == "all":
        return [[j for j in range(n) if j != i] for i in range(n)]
    if kind == "graph":
        return [[j for j in range(n) if j != i and parent[edges[j]] == parent[edges[i]]]
                for i in range(n)]
    return [sorted({(i - 1) % n, (i + 1) % n} - {i}) for i in range(n)]      # ring


class MobileRounds:
    """The engine's side of mobility (a mixin of sim.engine.Simulation)."""

    mobility: Mobility | None

    def attached(self, k: int) -> str:
        """The edge client k is under now."""
        mob = self.mobility
        return self.topo.parent[self.topo.clients[k]] if mob is None else \
            mob.edge(k, self.env.now)

    def _moved(self) -> None:
        """At a cloud round's start: the tree and the clients under each node, as attached now."""
        topo, under = self.topo, {}
        par = self._parent = dict(topo.parent)
        for k, name in enumerate(topo.clients):
            node = par[name] = self.attached(k)
            while node != "cloud":
                under.setdefault(node, []).append(k)
                node = par[node]
        self.under = {n: np.array(under.get(n, []), np.int64) for n in topo.leaves_under()}

    def members(self, node: str, ids: np.ndarray) -> list[str]:
        """The clients among `ids` under bottom-tier `node` now (by client id)."""
        return [self.topo.clients[k] for k in sorted(int(k) for k in ids)
                if self.attached(k) == node]

    def _mover(self, start: float):
        """Writes each handover to the trace at its time (the attachments are queried)."""
        mob, heap = self.mobility, []
        for k in range(self.topo.n_clients):
            h = mob.next_move(k, start)
            if h is not None:
                heap.append((h, k))
        heapq.heapify(heap)
        while heap:
            h, k = heapq.heappop(heap)
            yield self._at(h)
            before = mob.edge_id(k, np.nextafter(h, -np.inf))
            self.trace.add(h, self.topo.clients[k], "handover",
                           f"{mob.edges[before]}->{mob.edge(k, h)}", 1)
            nxt = mob.next_move(k, h)
            if nxt is not None:
                heapq.heappush(heap, (nxt, k))

    def _client_link(self, src: str, dst: str, k: int) -> Link:
        """Client k's own link to or from an edge (its drawn attributes, whichever edge)."""
        name = self.topo.clients[k]
        home, up = self.topo.parent[name], src == name
        link = self.links.get((src, dst))
        if link is None and (dst if up else src) != home:
            lat, bw = self.topo.link(name, home) if up else self.topo.link(home, name)
            link = self.links[src, dst] = self.links.link_cls(
                self.env, src, dst, lat, bw, self.topo.level_of(name), "up" if up else "down",
                self.trace, self.ledger, self.failures)
        return link if link is not None else self.links[src, dst]

    def _stalled(self, k: int, t0: float, met: int) -> ScenarioError:
        """A resumed transfer that meets handovers faster than it can finish (the loader
        refuses markov's rate x handover_s >= 1; a moves file may still be that dense)."""
        spec, sc, entry = self.mobility.spec, self.sc, self.entry
        if getattr(entry, "mobility", None) is not None:
            file, key = sc.file, f"algorithms[{sc.algorithms.index(entry)}].mobility"
        elif sc.topology_file == sc.file:
            file, key = sc.file, "topology.mobility"
        else:
            file, key = sc.topology_file, "mobility"
        what = f"{spec.kind} moves" if spec.kind == "trace" else \
            f"handover_rate_per_s {spec.handover_rate_per_s:g}"
        return ScenarioError.one(file, f"{key}.handover_s", spec.handover_s,
                                 f"{self.entry.label}: client {self.topo.clients[k]}'s transfer "
                                 f"started at {t0:.6g} s met more than {met - 1} handovers "
                                 f"(work guard): with {what} each handover_s delay meets the "
                                 "next handover before the transfer can finish; lower "
                                 "handover_s or the handover rate (or on_handover: drop)")

    def hop(self, src: str, dst: str, nbytes: float, k: int):
        """Generator: a transfer between client k and an edge; the arrival time or None."""
        mob = self.mobility
        if mob is None:
            return (yield from self.send(src, dst, nbytes))
        edge = dst if src == self.topo.clients[k] else src
        env, t0 = self.env, self.env.now
        drop = mob.spec.on_handover == "drop"
        away = mob.edge(k, t0) != edge
        if away and drop:                 # no longer under that edge: nothing is sent
            self.trace.add(t0, dst, "lost", src, 0)
            return None
        link = self._client_link(src, dst, k)
        start, rest = yield from link._transmit(nbytes)
        delay = rest + link.latency
        h = mob.next_move(k, t0)
        if h is not None and h < env.now + delay:
            if drop:
                yield env.timeout(max(h - env.now, 0.0))
                self.trace.add(env.now, dst, "lost", src, nbytes)
                self.ledger.wasted += nbytes
                return None
            end, met = env.now + delay, 0
            while h is not None and h < end:
                end += mob.spec.handover_s
                delay += mob.spec.handover_s
                h = mob.next_move(k, h)
                met += 1
                if met > MAX_TRANSFER_HANDOVERS:
                    raise self._stalled(k, t0, met)
        yield env.timeout(delay)
        if self.failures.lost(src, dst, start, env.now):
            self.trace.add(env.now, dst, "lost", src, nbytes)
            self.ledger.wasted += nbytes
            return None
        self.trace.add(env.now, dst, "recv", src, nbytes)
        return env.now
