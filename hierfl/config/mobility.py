"""Client mobility: clients move between bottom-tier aggregators (edges) over simulated time.

`topology.mobility` (next to `availability`), or an algorithm entry's own `mobility:`:
- markov: each client stays under an edge for an exponential holding time of rate
  `handover_rate_per_s`, then moves to a neighbour drawn uniformly (`neighbours`: ring = the
  previous or next edge in the topology's edge order; all = any other edge; graph = an edge with
  the same parent aggregator).
- trace: a CSV of `time_s,client,node` lines (node = a bottom-tier aggregator's name): at
  time_s the client moves under node (topology/moves.py reads and checks it).
`on_handover`: what happens to a client <-> edge transfer in flight at a handover (drop: lost and
counted as wasted; resume: it continues, `handover_s` later). sim/mobility.py plays it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .fields import non_negative, spec

MOBILITY_KINDS = ("none", "markov", "trace")


@dataclass(frozen=True)
class MobilitySpec:
    kind: Literal["none", "markov", "trace"] = spec("none", "client mobility model")
    handover_rate_per_s: float = spec(0.0, "markov: handovers per second per client "
                                      "(exponential holding times)", check=non_negative)
    neighbours: Literal["ring", "all", "graph"] = spec(
        "ring", "markov: where a client moves: ring (previous / next edge in the topology's "
        "order), all (any other edge), graph (an edge under the same parent)")
    path: str | None = spec(None, "trace: CSV of time_s,client,node moves, relative to the "
                            "file that holds it")
    on_handover: Literal["drop", "resume"] = spec(
        "drop", "a client <-> edge transfer in flight at a handover: drop (lost, counted as "
        "wasted; the client's update fails) or resume (delivered handover_s later)")
    handover_s: float = spec(0.0, "resume: seconds a transfer is interrupted per handover",
                             check=non_negative)

    def __post_init__(self) -> None:
        given = [k for k, d in (("handover_rate_per_s", 0.0), ("neighbours", "ring"),
                                ("path", None)) if getattr(self, k) != d]
        own = {"none": (), "markov": ("handover_rate_per_s", "neighbours"), "trace": ("path",)}
        extra = [k for k in given if k not in own[self.kind]]
        if extra:
            raise ValueError(f"{', '.join(extra)} does not apply to kind {self.kind!r}"
                             + (f" (it takes {', '.join(own[self.kind])})" if own[self.kind]
                                else ""))
        if self.handover_s and self.on_handover != "resume":
            raise ValueError("handover_s applies to on_handover: resume (a dropped transfer is "
                             "lost at the handover)")
        if self.kind == "trace" and not self.path:
            raise ValueError("kind trace needs path: (a CSV of time_s,client,node)")
        why = self.stall()
        if why:
            raise ValueError(why)

    def stall(self) -> str | None:
        """Why a resumed transfer would never finish (markov, resume), or None. Each handover
        a transfer meets delays it handover_s, during which it meets rate x handover_s more on
        average: the delays add up to a finite time (transfer / (1 - rate handover_s) on
        average) only where rate x handover_s < 1, i.e. the expected time between handovers
        (1 / rate) exceeds handover_s."""
        rate, h = float(self.handover_rate_per_s), float(self.handover_s)
        if self.kind != "markov" or self.on_handover != "resume" or rate * h < 1.0:
            return None
        return (f"handover_rate_per_s x handover_s = {rate:g} x {h:g} = {rate * h:g} >= 1: "
                f"the expected time between handovers (1 / {rate:g} = {1 / rate:.3g} s) is not "
                f"longer than the handover_s ({h:g} s) each one adds to a transfer in flight, so "
                "a resumed transfer meets new handovers faster than it can finish and never "
                "arrives; make handover_rate_per_s x handover_s < 1 (or on_handover: drop)")

    def stretch(self) -> float:
        """How much longer resumed transfers take on average (1 / (1 - rate x handover_s))."""
        if self.kind != "markov" or self.on_handover != "resume":
            return 1.0
        return 1.0 / max(1.0 - float(self.handover_rate_per_s) * float(self.handover_s), 1e-12)

    @property
    def active(self) -> bool:
        return self.kind != "none"


def mobility_problem(spec: MobilitySpec | None, n_clients: int, sim_s: float,
                     limit: float) -> str | None:
    """Why Markov mobility would draw too many handovers over the run (work guard), or None."""
    if spec is None or spec.kind != "markov":
        return None
    sim_s *= spec.stretch()         # resumed transfers wait handover_s per handover they meet
    events = n_clients * float(spec.handover_rate_per_s) * sim_s
    if events <= limit:
        return None
    return (f"{n_clients} clients x {spec.handover_rate_per_s:g} handovers/s x about "
            f"{sim_s:.3g} simulated s = {events:.3g} handovers, more than {limit:g} (work "
            "guard, handover_s delays counted): use a lower rate")
