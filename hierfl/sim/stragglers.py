"""Step budgets: the planned local work, cut by stragglers (FedProx's experiment) and by round
deadlines (`deadline_partial`: a client trains only as many steps as it can afford)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import seeding

if TYPE_CHECKING:
    from .engine import Simulation


def straggler_mask(seed: int, t: int, r: int, n_selected: int, fraction: float) -> np.ndarray:
    """Which of the selected clients straggle in round t (same for every algorithm)."""
    mask = np.zeros(n_selected, bool)
    n = int(round(fraction * n_selected))
    if n:
        mask[seeding.rng(seed, "stragglers", t, r).choice(n_selected, n, replace=False)] = True
    return mask


def plan_budgets(sim: "Simulation", t: int, r: int, sel: np.ndarray, planned: np.ndarray,
                 evals_per_step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(budgets, straggler mask) for the selected clients of one aggregation round."""
    sc, local = sim.sc, sim.local
    budgets = planned.copy()
    strag = straggler_mask(sc.seed, t, r, len(sel), sim.stragglers.fraction)
    if strag.any():
        g = seeding.rng(sc.seed, "straggler-work", t, r)
        high_e = (local.epochs or 1) if sim.stragglers.epochs_range == "paper" else \
            max((local.epochs or 1) - 1, 1)
        counts = sim.counts[sel]
        for i in np.flatnonzero(strag):
            if local.epochs is not None:
                e = int(g.integers(1, high_e + 1))
                per_epoch = 1 if local.batch_size == "full" else -(-int(counts[i]) // int(local.batch_size))
                budgets[i] = min(e * per_epoch, planned[i])
            else:
                high = planned[i] if sim.stragglers.epochs_range == "paper" else max(planned[i] - 1, 1)
                budgets[i] = int(g.integers(1, high + 1))
    policy = sc.train.edge_round if sim.algo.hierarchical else sc.train.round
    if policy.policy == "deadline_partial":
        budgets = np.minimum(budgets, affordable_steps(sim, sel, policy.deadline_s or 0.0,
                                                       evals_per_step))
    return budgets, strag


def affordable_steps(sim: "Simulation", sel: np.ndarray, deadline: float,
                     evals_per_step: int) -> np.ndarray:
    """Steps that fit in the deadline after the nominal (uncongested) download and upload times
    of one model-sized message each way over the path the round uses."""
    topo, model = sim.topo, sim.model
    nbytes_down = 4.0 * model.n_params * len(sim.algo.downlink())
    nbytes_up = 4.0 * model.n_params * sim.algo.upload_tensors
    out = np.zeros(len(sel), np.int64)
    b = sim.local.batch_size
    for i, k in enumerate(sel):
        path = topo.path_up(topo.clients[k])
        if sim.algo.hierarchical:
            path = path[:2]                       # the edge round: client <-> its aggregator
        up_hops = list(zip(path[:-1], path[1:]))
        t_comm = sum(topo.link(a, c)[0] + nbytes_up / topo.link(a, c)[1] for a, c in up_hops)
        t_comm += sum(topo.link(c, a)[0] + nbytes_down / topo.link(c, a)[1] for a, c in up_hops)
        rows = int(sim.counts[k]) if b == "full" else min(int(b), int(sim.counts[k]))
        step_s = rows * evals_per_step * 3 * model.fwd_flops / topo.client_flops[k]
        out[i] = max(int(np.floor(max(deadline - t_comm, 0.0) / step_s + 1e-9)), 0)
    return out
