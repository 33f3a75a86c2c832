"""HierFAVG (Liu et al., ICC 2020, arXiv 1905.06641).

Each edge: kappa1 local SGD iterations on its clients (train.local.steps), then an n-weighted edge
average; after kappa2 edge rounds (`edge_rounds`) the cloud averages the edge models weighted by
their clients' sample totals. With kappa2 = 1 it is FedAvg (same parameters).
Messages: w cloud->edge, w_edge edge->client each edge round, w_k client->edge each edge round,
w_edge edge->cloud once per cloud round."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config.fields import positive, spec
from .fedavg import FedAvg


@dataclass(frozen=True)
class HierFAVGParams:
    edge_rounds: int = spec(1, "kappa2: edge aggregations per cloud round", check=positive)
    tier_rounds: list[int] | None = spec(
        None, "deeper trees: rounds per aggregator tier, from the top (overrides edge_rounds)")

    def __post_init__(self) -> None:
        if self.tier_rounds is not None and any(r < 1 for r in self.tier_rounds):
            raise ValueError("tier_rounds must be >= 1")


class HierFAVG(FedAvg):
    name = "hierfavg"
    Params = HierFAVGParams
    caps = replace(FedAvg.caps, hierarchical=True, linear_aggregate=False)
