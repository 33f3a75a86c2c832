"""HierFAVG: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import replace

from ..fedavg.algorithm import FedAvg


class HierFAVG(FedAvg):
    name = "hierfavg"
    # a client's local round reads only its start row (no per-client state, no codec of its
    # own): all edges of a tier round may train in one executor call (exec/edges.py)
    batch_edges = True
