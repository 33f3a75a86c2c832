"""HierFAVG (Liu et al., ICC 2020, arXiv 1905.06641).

Each edge: kappa1 local SGD iterations on its clients (train.local.steps), then an n-weighted edge
average; after kappa2 edge rounds (`edge_rounds`) the cloud averages the edge models weighted by
their clients' sample totals. With kappa2 = 1 it is FedAvg (same parameters).
Messages: w cloud->edge, w_edge edge->client each edge round, w_k client->edge each edge round,
w_edge edge->cloud once per cloud round."""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import Capabilities, StateSize, TierRounds, declare_algorithm


@declare_algorithm("hierfavg", code=f"{__name__}.algorithm:HierFAVG",
                   summary="HierFAVG (Liu et al., ICC 2020)",
                   caps=Capabilities(hierarchical=True, drops_stragglers=True, asynchronous=True,
                                     async_edges=True, local_train=True, robust=True),
                   state=StateSize(fixed=1))
@dataclass(frozen=True)
class HierFAVGParams(TierRounds):
    """edge_rounds is kappa2; tier_rounds generalises it to deeper trees."""
