"""HierFAVG (Liu et al., ICC 2020, arXiv 1905.06641).

Each edge: kappa1 local SGD iterations on its clients (train.local.steps), then an n-weighted edge
average; after kappa2 edge rounds (`edge_rounds`) the cloud averages the edge models weighted by
their clients' sample totals. With kappa2 = 1 it is FedAvg (same parameters).
Messages: w cloud->edge, w_edge edge->client each edge round, w_k client->edge each edge round,
w_edge edge->cloud once per cloud round."""
from __future__ import annotations

from dataclasses import replace

from .fedavg import FedAvg
from .params import HierFAVGParams


class HierFAVG(FedAvg):
    name = "hierfavg"
    Params = HierFAVGParams
    caps = replace(FedAvg.caps, hierarchical=True, linear_aggregate=False, async_edges=True)
    # a client's local round reads only its start row (no per-client state, no codec of its
    # own): all edges of a tier round may train in one executor call (exec/edges.py)
    batch_edges = True
