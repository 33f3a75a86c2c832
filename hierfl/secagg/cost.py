"""What one run of secure aggregation costs in bytes, messages and round trips between n
clients and the server that sums their inputs (an edge or the cloud), with dropouts.
Torch-free; docs/secure-aggregation.md explains the protocol.

The phases (Bonawitz et al. 2017, honest-but-curious: no signatures, no ConsistencyCheck):

0. AdvertiseKeys: each client sends its two public keys (c_u, s_u); the server sends each
   client the list of the keys it needs (everybody's, or its neighbours').
1. ShareKeys: each client Shamir-shares its mask seed b_u and its secret key s_u^SK and sends
   each peer, through the server, one ciphertext with that peer's two shares.
2. MaskedInputCollection: each surviving client sends its masked input (the round's upload,
   as field elements).
4. Unmasking: the server tells each survivor who survived; the survivor returns, for each
   client whose shares it holds, a share of b_v (v survived: removes v's self mask) or of
   s_v^SK (v dropped: rebuilds v's pairwise masks).

Dropouts: the `dropped` clients complete phases 0 and 1 and drop before sending their masked
input (the case that makes the server rebuild pairwise masks); survivors answer phase 4. A
client that drops before phase 0 is simply not among the n. Message sizes are payload only,
as the ledger counts every message (sim/messages.py: no transport headers); a client index is
as wide as the ledger's sparse index. Server computation (PRG expansion, reconstruction) is out
of scope: only bytes and round trips are charged."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection

from ..sim.messages import DENSE, SPARSE
from .spec import SecAggSpec

INDEX = SPARSE - DENSE      # bytes of a client index (the ledger's sparse index: 4)
RANGE = DENSE               # the agreed clip range, one float32 each way (spec.range null)


@dataclass(frozen=True)
class Phase:
    """One phase: bytes a surviving client sends and receives, the server's totals over
    every client, messages (one per client -> server or server -> client transmission) and
    sequential client <-> server round trips."""

    client_sent: int = 0
    client_received: int = 0
    server_sent: int = 0
    server_received: int = 0
    messages: int = 0
    round_trips: int = 0


@dataclass(frozen=True)
class SecAggCost:
    """One protocol run. n clients start, `dropped` of them before phase 2, s = n - dropped
    survive; k peers per client, t shares rebuild a secret. With K key_bytes, S share_bytes,
    A ae_bytes, I = 4 (an index), r = 4 if spec.range is null else 0, m = n (secagg) or k
    (secagg_plus) entries in a client's key list, h = n (secagg) or k holders of each
    client's shares, E = 2 I + 2 S + A one ciphertext (u || v || two shares + AE overhead),
    M = ceil(p bits / 8) the masked input:

    - advertise: client sends 2K + r, receives m (I + 2K) + r; server receives n (2K + r),
      sends n (m (I + 2K) + r); 2n messages; 1 round trip.
    - share: client sends k E, receives k E; server receives and sends n k E; 2n messages;
      1 round trip.
    - masked: client sends M; server receives s M; s messages; 0 round trips (one-way: the
      round's own upload, now M bytes instead of 4 p).
    - unmask (only if recovered): client receives ceil(m / 8) (a bitmap of the survivors over
      its key list), sends h S (one share per client whose shares it holds: n - s of s_v^SK and
      s of b_v for secagg, its k neighbours' for secagg_plus); server sends s ceil(m / 8),
      receives s h S; 2s messages; 1 round trip.

    A dropped client sends and receives what a survivor does in advertise and share only."""

    n: int
    dropped: int
    peers: int
    needed: int
    recovered: bool
    masked_bytes: int
    advertise: Phase
    share: Phase
    masked: Phase
    unmask: Phase

    @property
    def phases(self) -> tuple[Phase, ...]:
        return self.advertise, self.share, self.masked, self.unmask

    def _sum(self, name: str) -> int:
        return sum(getattr(ph, name) for ph in self.phases)

    @property
    def client_sent(self) -> int:
        return self._sum("client_sent")

    @property
    def client_received(self) -> int:
        return self._sum("client_received")

    @property
    def server_sent(self) -> int:
        return self._sum("server_sent")

    @property
    def server_received(self) -> int:
        return self._sum("server_received")

    @property
    def messages(self) -> int:
        return self._sum("messages")

    @property
    def round_trips(self) -> int:
        return self._sum("round_trips")

    @property
    def dropped_sent(self) -> int:
        """Bytes a dropped client sent (phases 0 and 1)."""
        return self.advertise.client_sent + self.share.client_sent

    @property
    def dropped_received(self) -> int:
        return self.advertise.client_received + self.share.client_received


def harary(n: int, k: int) -> list[set[int]]:
    """Each client's neighbours on the Harary graph H(k, n): clients 0..n-1 on a ring, each
    joined to the k/2 nearest on either side (k even); k >= n - 1: the complete graph. The
    server's random labelling of clients on the ring is the caller's (pass positions)."""
    if k >= n - 1:
        return [set(range(n)) - {u} for u in range(n)]
    return [{(u + d) % n for d in range(-(k // 2), k // 2 + 1) if d} for u in range(n)]


def recovers(spec: SecAggSpec, n: int, lost: Collection[int]) -> bool:
    """Can the server unmask the survivors' sum when the clients at positions `lost` dropped?
    Each survivor's b_u needs t of its holders to survive; each dropped client with a
    surviving neighbour needs t surviving holders of its s^SK (its pairwise masks are in
    the sum). secagg: that is s >= t. No survivor: nothing to recover (False)."""
    lost = set(lost)
    if any(not 0 <= u < n for u in lost):
        raise ValueError(f"positions {sorted(lost)} must be in 0..{n - 1}")
    if len(lost) >= n:
        return False
    t = spec.needed(n)
    if spec.protocol == "secagg":
        return n - len(lost) >= t
    graph = harary(n, spec.peers(n))
    for u in range(n):
        alive = len(graph[u] - lost)
        if (u not in lost or alive) and alive < t:
            return False
    return True


def round_cost(spec: SecAggSpec, n: int, dropped: int | Collection[int], p: int) -> SecAggCost:
    """The cost of one run among n clients, `dropped` of them (a count, or their positions on
    secagg_plus's graph) dropping before phase 2, for a masked input of p entries. secagg:
    recovered iff n - dropped >= t. secagg_plus: with positions, `recovers`; with a count,
    recovered only if certain wherever the dropped sit (dropped <= k - t: no holder set
    loses more than that); pass positions for the exact answer. The server aborts before
    phase 4 when it cannot recover (it knows the graph and who dropped), so unmask is then
    all zeros."""
    d = dropped if isinstance(dropped, int) else len(set(dropped))
    if not 0 <= d <= n or n < 1 or p < 0:
        raise ValueError(f"need 0 <= dropped ({d}) <= n ({n}), n >= 1 and p >= 0")
    s, k, t = n - d, spec.peers(n), spec.needed(n)
    if not isinstance(dropped, int) or spec.protocol == "secagg":
        ok = recovers(spec, n, range(d) if isinstance(dropped, int) else dropped)
    else:
        ok = s > 0 and d <= k - t
    m, h = (n, n) if spec.protocol == "secagg" else (k, k)
    r = RANGE if spec.range is None else 0
    big_k, e = spec.key_bytes, 2 * INDEX + 2 * spec.share_bytes + spec.ae_bytes
    listed = m * (INDEX + 2 * big_k) + r
    size = math.ceil(p * spec.bits / 8)
    bitmap = math.ceil(m / 8)
    up, held = 2 * big_k + r, h * spec.share_bytes
    return SecAggCost(
        n=n, dropped=d, peers=k, needed=t, recovered=ok, masked_bytes=size,
        advertise=Phase(client_sent=up, client_received=listed, server_sent=n * listed,
                        server_received=n * up, messages=2 * n, round_trips=1),
        share=Phase(client_sent=k * e, client_received=k * e, server_sent=n * k * e,
                    server_received=n * k * e, messages=2 * n, round_trips=1),
        masked=Phase(client_sent=size, server_received=s * size, messages=s),
        unmask=Phase(client_sent=held, client_received=bitmap, server_sent=s * bitmap,
                     server_received=s * held, messages=2 * s, round_trips=1)
        if ok else Phase())
