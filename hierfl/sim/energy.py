"""A client's energy in an aggregation round (joules), from the seconds the engine knows and the
powers drawn with the topology (topology/power.py). Torch-free; docs/energy.md states the rule:

    energy_j = compute_s * power_w + tx_s * tx_w + download_s * rx_w + idle_s * idle_w

- download_s: the model's bytes / the downlink bandwidth of the client's own link (the radio
  receiving; the latency is propagation, not radio time). Every client of the round is charged
  it, also one whose download a failure lost.
- compute_s: clients.csv's compute seconds, charged in full to every participant: a straggler,
  a dropped client (it still computes) and a failed one (a crash mid-training is charged its
  whole planned compute: an upper bound).
- tx_s: the upload's bytes / the uplink bandwidth of the client's own link, for a client that
  sends (not a dropped straggler or silent trainee, nor a client failed by the round's close);
  relay hops above the client's aggregator cost the client nothing.
- idle_s: the rest of the aggregation round, from its aggregator opening it to its close, less
  the three above (never below 0): the device is awake and waiting for the round to end.

Each client's link to its parent is its own (no other transfer shares it), so the radio
seconds are exactly bytes / bandwidth."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..topology.graph import Topology
from .work import ClientRecord


@dataclass(frozen=True)
class ClientPowers:
    """Per client id: its powers (W) and its own link's bandwidths (B/s), as lists of floats
    (indexed once per client-round: a list is faster than an array there)."""

    power_w: list[float]
    idle_w: list[float]
    tx_w: list[float]
    rx_w: list[float]
    up_Bps: list[float]
    down_Bps: list[float]

    @classmethod
    def of(cls, topo: Topology) -> "ClientPowers":
        """Read once from the topology's graph (cached on it)."""
        cached = topo.__dict__.get("_client_powers")
        tree = getattr(topo, "tree", None)
        if cached is None and tree is not None and "_graph" not in topo.__dict__:
            rows = topo.client_rows               # a built spec: its arrays, no graph
            pw = tree.power if tree.power is not None else np.zeros((len(rows), 4))
            cached = cls(*(pw[:, j].tolist() for j in range(4)), tree.bw_up[rows].tolist(),
                         tree.bw_down[rows].tolist())
            object.__setattr__(topo, "_client_powers", cached)
        if cached is None:
            g = topo.graph
            nodes = [g.nodes[c] for c in topo.clients]
            ups = [g.edges[c, topo.parent[c]] for c in topo.clients]
            downs = [g.edges[topo.parent[c], c] for c in topo.clients]

            def col(rows: list[dict], key: str) -> list[float]:
                return [float(r.get(key, 0.0)) for r in rows]
            cached = cls(col(nodes, "power_w"), col(nodes, "idle_w"), col(ups, "tx_w"),
                         col(ups, "rx_w"), col(ups, "bandwidth_Bps"), col(downs, "bandwidth_Bps"))
            object.__setattr__(topo, "_client_powers", cached)
        return cached


def settle(recs: list[ClientRecord], drop: np.ndarray, up_bytes: np.ndarray, down_bytes: float,
           opened: float, closed: float, topo: Topology, secagg=None) -> None:
    """At an aggregation round's close (opened at `opened`), write each record's radio and
    idle seconds and its energy. `secagg` (Work.secagg): each client's secure-aggregation
    round trips are radio seconds too (sending its keys and shares, receiving the server's)."""
    pw = ClientPowers.of(topo)
    span, down = float(closed - opened), float(down_bytes)
    for i, (rec, dropped, up) in enumerate(zip(recs, drop.tolist(), up_bytes.tolist())):
        k = rec.client                              # the rule of the docstring, per client
        got = down
        if secagg is not None and not dropped:
            trips = (*secagg.before[i], *(() if rec.failed else secagg.after[i]))
            up += sum(t[0] for t in trips)
            got += sum(t[1] for t in trips)
        tx = up / pw.up_Bps[k] if not (dropped or rec.failed) else 0.0
        _charge(rec, pw, span, got / pw.down_Bps[k], tx)


def unsend(rec: ClientRecord, topo: Topology) -> None:
    """A record settled as sending whose failure came after its aggregator closed (its
    download or upload lost later, before its row is written): settled again as failed, with
    no radio seconds sending (the same numbers as settling it failed at once)."""
    if rec.tx_s:
        _charge(rec, ClientPowers.of(topo), rec.span_s, rec.download_s, 0.0)


def _charge(rec: ClientRecord, pw: ClientPowers, span: float, dl: float, tx: float) -> None:
    """The record's radio and idle seconds and joules, in a round of `span` seconds."""
    k, comp = rec.client, rec.compute_s
    rec.download_s, rec.tx_s, rec.span_s = dl, tx, span
    rec.idle_s = idle = max(span - dl - comp - tx, 0.0)
    rec.energy_j = comp * pw.power_w[k] + tx * pw.tx_w[k] + dl * pw.rx_w[k] + idle * pw.idle_w[k]
