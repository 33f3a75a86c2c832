"""Step budgets: the planned local work, cut by stragglers (FedProx's experiment) and by round
deadlines (`deadline_partial`: a client trains only as many steps as it can afford)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import seeding
from ..config.asynchrony import ASYNC_POLICIES
from ..config.schema import LocalSpec, RoundSpec, StragglerSpec
from ..topology.graph import Topology


def straggler_mask(seed: int, t: int, r: int, n_selected: int, fraction: float) -> np.ndarray:
    """Which of the selected clients straggle in round t (same for every algorithm)."""
    mask = np.zeros(n_selected, bool)
    n = int(round(fraction * n_selected))
    if n:
        mask[seeding.rng(seed, "stragglers", t, r).choice(n_selected, n, replace=False)] = True
    return mask


@dataclass(frozen=True)
class Budgets:
    """What step budgets depend on: the schedule, the straggler setting, the round policy of the
    tier whose clients train, the system and the size of the model and its messages."""

    seed: int
    local: LocalSpec
    stragglers: StragglerSpec
    policy: RoundSpec             # the round policy of the tier the clients report to
    counts: np.ndarray            # samples per client
    topo: Topology
    n_params: int
    fwd_flops: float
    up_tensors: int               # model-sized tensors per client upload
    hierarchical: bool            # the client's round is with its aggregator, not the cloud

    def plan(self, t: int, r: int, sel: np.ndarray, planned: np.ndarray,
             evals_per_step: int = 1, down_tensors: Callable[[], int] = lambda: 1,
             full_start: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(budgets, straggler mask) for the selected clients of one aggregation round;
        `down_tensors()`: model-sized tensors in the broadcast (asked only under a deadline);
        `full_start`: full-data gradient evaluations charged before the first step."""
        budgets, strag = self.straggle(t, r, sel, planned)
        return self.cap(sel, budgets, evals_per_step, down_tensors, full_start), strag

    def straggle(self, t: int, r: int, sel: np.ndarray,
                 planned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(budgets, straggler mask) before any deadline: the stragglers of round (t, r) among
        `sel`, in its order, and the steps each of them does."""
        local, stragglers = self.local, self.stragglers
        budgets = planned.copy()
        key: tuple = (t, r)
        if stragglers.fraction and len(sel) == 1 and self.policy.policy in ASYNC_POLICIES:
            # one client's asynchronous job: a Bernoulli(fraction) draw; under asynchronous
            # edges (t, r) is the cloud round and the edge's job count, alike on every edge:
            # the client's id keys it too (every edge's r-th job straggled together)
            if self.hierarchical:
                key = (t, r, int(sel[0]))
            strag = np.array([seeding.rng(self.seed, "stragglers", *key).random()
                              < stragglers.fraction])
        else:
            strag = straggler_mask(self.seed, t, r, len(sel), stragglers.fraction)
        if strag.any():
            g = seeding.rng(self.seed, "straggler-work", *key)
            high_e = (local.epochs or 1) if stragglers.epochs_range == "paper" else \
                max((local.epochs or 1) - 1, 1)
            counts = self.counts[sel]
            for i in np.flatnonzero(strag):
                if local.epochs is not None:
                    e = int(g.integers(1, high_e + 1))
                    per_epoch = 1 if local.batch_size == "full" else \
                        -(-int(counts[i]) // int(local.batch_size))
                    budgets[i] = min(e * per_epoch, planned[i])
                else:
                    high = planned[i] if stragglers.epochs_range == "paper" else \
                        max(planned[i] - 1, 1)
                    budgets[i] = int(g.integers(1, high + 1))
        return budgets, strag

    def cap(self, sel: np.ndarray, budgets: np.ndarray, evals_per_step: int,
            down_tensors: Callable[[], int], full_start: float = 0.0) -> np.ndarray:
        """`budgets` cut to the steps each client can afford under `deadline_partial`."""
        if self.policy.policy != "deadline_partial":
            return budgets
        return np.minimum(budgets, self.affordable(sel, self.policy.deadline_s or 0.0,
                                                   evals_per_step, down_tensors(), full_start))

    def affordable(self, sel: np.ndarray, deadline: float, evals_per_step: int,
                   down_tensors: int, full_start: float = 0.0) -> np.ndarray:
        """Steps that fit in the deadline after the nominal (uncongested) download and upload
        times of one model-sized message each way over the path the round uses, with every
        full-data gradient the steps are charged with (exec/round.py's compute seconds):
        `full_start` before the first step (a gamma target's reference, a program's
        `prepare`) and, under a gamma target, one check every `check_every` steps before the
        last. A step is charged as a full minibatch (a short last batch costs less)."""
        topo = self.topo
        nbytes_down = 4.0 * self.n_params * down_tensors
        nbytes_up = 4.0 * self.n_params * self.up_tensors
        out = np.zeros(len(sel), np.int64)
        b = self.local.batch_size
        check = self.local.check_every if self.local.gamma is not None else 0
        for i, k in enumerate(sel):
            path = topo.path_up(topo.clients[k])
            if self.hierarchical:
                path = path[:2]                       # the edge round: client <-> its aggregator
            up_hops = list(zip(path[:-1], path[1:]))
            t_comm = sum(topo.link(a, c)[0] + nbytes_up / topo.link(a, c)[1] for a, c in up_hops)
            t_comm += sum(topo.link(c, a)[0] + nbytes_down / topo.link(c, a)[1]
                          for a, c in up_hops)
            rows = int(self.counts[k]) if b == "full" else min(int(b), int(self.counts[k]))
            step_s = rows * evals_per_step * 3 * self.fwd_flops / topo.client_flops[k]
            full_s = int(self.counts[k]) * 3 * self.fwd_flops / topo.client_flops[k]
            left = deadline - t_comm - (full_start * full_s if full_start else 0.0)
            out[i] = _steps_within(max(left, 0.0), step_s, full_s, check)
        return out


def _steps_within(left: float, step_s: float, full_s: float, check: int) -> int:
    """The most steps b whose seconds, b step_s plus a full gradient (full_s) after every
    `check` steps before the last (check 0: none), fit in `left`."""
    b = int(np.floor(left / step_s + 1e-9))
    if not check or b <= check:
        return b
    b = int(np.floor(left / (step_s + full_s / check) + 1e-9))    # at most the answer
    while (b + 1) * step_s + (b // check) * full_s <= left + 1e-9 * step_s:
        b += 1
    return b


class RoundPools:
    """A hierarchical round's stragglers, drawn over all the clients the cloud round selected
    (as a flat round's over its selection) and handed to each aggregator's call for its own
    clients. Drawn per call, every aggregator's clients of round (t, r) would take the same
    stream: the same positions straggling under every edge of one size, and other stragglers
    than a flat algorithm's over the same selection."""

    KEEP = 8             # rounds whose selections are kept (an edge may run late; one later
    #                      than that draws over its own clients, as before the pools)

    def __init__(self, budgets: Budgets, planned_of: Callable[[int, int, np.ndarray], np.ndarray]):
        self.budgets, self.planned_of = budgets, planned_of
        self.pools: dict[int, np.ndarray] = {}
        self.drawn: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def enter(self, t: int, sel: np.ndarray) -> None:
        """Round t selected `sel` (only kept where stragglers are drawn in rounds)."""
        b = self.budgets
        if not b.stragglers.fraction or b.policy.policy in ASYNC_POLICIES:
            return
        self.pools[t] = np.asarray(sel, np.int32 if len(self.budgets.counts) < 2**31
                                   else np.int64)
        for old in [k for k in self.pools if k <= t - self.KEEP]:
            del self.pools[old]
        self.drawn.clear()

    def draw(self, t: int, r: int, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(budgets, straggler mask) of `sel` in round (t, r), or None where round t kept no
        pool (the caller draws over `sel` alone)."""
        pool = self.pools.get(t)
        if pool is None:
            return None
        if (t, r) not in self.drawn:
            order = np.argsort(pool, kind="stable")
            self.drawn[t, r] = (order, *self.budgets.straggle(t, r, pool,
                                                              self.planned_of(t, r, pool)))
        order, budgets, strag = self.drawn[t, r]
        at = np.searchsorted(pool, sel, sorter=order)
        pos = order[np.minimum(at, len(pool) - 1)]
        if len(sel) and not np.array_equal(pool[pos], sel):
            return None                # a client outside the round's selection
        return budgets[pos], strag[pos]
