"""What the engine knows of a round's learning: records, the outcome of one executor call
without its tensors, and the round runner it calls (implemented in exec/round.py).

The engine moves messages and decides times; everything with tensors stays behind the
`RoundRunner` interface: the engine passes opaque handles (a model, an aggregator's state, an
upload) from one call to the next and never looks inside them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(slots=True)
class ClientRecord:
    """Per client per aggregation round (clients.csv)."""

    round: int
    edge_round: int
    client: int
    steps: int
    budget: int
    compute_s: float
    upload_s: float
    dropped: bool
    straggler: bool
    gamma: float
    failed: bool = False
    up_bytes: float = float("nan")   # the encoded size of this client's upload
    encoding: str = "dense"          # the encoding it used (sim/messages: dense|sparse|bitmap)
    download_s: float = 0.0          # energy (sim/energy.py): radio seconds receiving,
    tx_s: float = 0.0                # sending on its own link,
    idle_s: float = 0.0              # waiting inside the round,
    energy_j: float = 0.0            # and the joules they cost
    staleness: float = float("nan")  # asynchronous rounds: server versions since its download
    cluster: int = -1                # the cluster it chose (IFCA); -1: none (an empty cell)
    compress: str = "none"           # its compression kind (algorithms' compress.up)
    edge: str = ""                   # mobility: the edge it uploaded to (empty: its own edge)
    attacker: int = -1               # attack: 1 for a Byzantine client, 0 not; -1: no attack
    span_s: float = 0.0              # energy: its aggregation round's length (not written)


@dataclass
class RoundInfo:
    round: int
    selected: int = 0
    reported: int = 0
    failed: int = 0
    clients: list[ClientRecord] = field(default_factory=list)
    last: bool = False          # the run ends after this round (train.duration_s): evaluate it
    recorded: bool = False      # written out: records that come later go to the next round's
    late: list[ClientRecord] = field(default_factory=list)   # earlier rounds' edge rounds that
    #                 closed in this one: written with its clients.csv rows and energy only


@dataclass
class Work:
    """One executor call's outcome, as the timing side needs it."""

    sel: np.ndarray
    uploads: Any              # opaque: the clients' uploads, one row each (for the runner)
    ctime: np.ndarray         # compute seconds per client
    up_bytes: np.ndarray      # upload bytes per client
    recs: list[ClientRecord]
    drop: np.ndarray          # computes, uploads nothing (dropped straggler or silent trainee)
    r: int = 0                # the aggregation round (edge round) of the call
    finite: np.ndarray | None = None    # rows whose uploads are all finite (the runner's check)
    crash_at: np.ndarray | None = None  # per client, the fraction of its compute after which
    #                                     it crashes (nan: it does not; None: no crashes)
    secagg: Any = None        # secure aggregation (secagg/): `before` and `after`, the
    #                           (client -> server, server -> client) bytes of each protocol
    #                           round trip before the masked upload and after it (unmasking)


@dataclass(frozen=True)
class Chosen:
    """A round's selected clients and the subtree they span (aggregator -> active children)."""

    ids: np.ndarray
    kids: dict[str, list[str]]

    def active(self, node: str) -> list[str]:
        """Children of `node` with a selected client at or below them."""
        return self.kids.get(node, [])


class RoundRunner(Protocol):
    """The learning side of a round, as the engine calls it (exec/round.py). Models, aggregator
    states and uploads are opaque handles; sizes are bytes, times seconds."""

    counts: np.ndarray                 # samples per client
    nonfinite: dict[int, list[int]]    # round -> clients whose upload was not finite

    @property
    def hierarchical(self) -> bool: ...
    @property
    def linear_aggregate(self) -> bool: ...

    def exhausted(self) -> bool: ...     # privacy.target_epsilon: the run ends after this round
    def selected_from(self, n: int) -> None: ...   # the clients a round's selection drew from

    def trainees(self, picked: np.ndarray) -> np.ndarray: ...
    def round_selection(self, t: int, sel: np.ndarray) -> None: ...
    def dropped_before(self, t: int, r: int, sel: np.ndarray) -> np.ndarray | None: ...
    def reporting(self, t: int, kids: list[str]) -> list[str]: ...
    def global_model(self) -> Any: ...
    def down_bytes(self) -> float: ...
    def train(self, t: int, r: int, sel: np.ndarray, start: Any,
              silent: np.ndarray | None = None, sizes: list[int] | None = None,
              doomed: np.ndarray | None = None) -> Work: ...
    def aggregate(self, t: int, arrived: np.ndarray, work: Work,
                  rows: list[int] | None) -> None: ...
    def partial(self, clients: list[int], rows: list[int], work: Work) -> tuple[Any, float]: ...
    def partial_bytes(self, work: Work) -> float: ...     # a partial's size, before making one
    def aggregate_partials(self, t: int, partials: list[Any]) -> None: ...
    def edge_start(self, model: Any) -> Any: ...
    def edge_model(self, state: Any) -> tuple[Any, float]: ...
    def edge_close(self, t: int, state: Any, work: Work, arrived: np.ndarray,
                   rows: list[int]) -> Any: ...
    def tier_close(self, t: int, state: Any, arrived: list[str], uploads: dict[str, Any],
                   weights: list[float], start: Any) -> Any: ...
    def edge_upload(self, state: Any) -> tuple[Any, float]: ...
    def cloud_close(self, t: int, arrived: list[str], uploads: dict[str, Any],
                    weights: list[float]) -> None: ...
    def async_update(self, work: Work | None, msg: Any = None, weight: float = 0.0) -> Any: ...
    def async_mix(self, update: Any, alpha: float) -> None: ...
    def async_buffer(self, buffer: list[tuple[Any, Any, float]], server_lr: float) -> None: ...
