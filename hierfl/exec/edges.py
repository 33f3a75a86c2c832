"""Every bottom aggregator's round in one executor call (issue 19).

A hierarchical round whose learning does not depend on timing (sim/edge_plan.py) trains, at
each aggregator round, the clients of ALL edges at once: client k starts from its own edge's
model (a (C, P) start matrix, one row per client, its edge's model repeated), one RoundRunner
call plans the budgets (each client's from the round's straggler draw, as in one call per
edge: sim/stragglers.RoundPools), the
minibatches and the executor run, and the result is cut back into one `Work` per edge. A
client's numbers do not depend on which clients share its call (per-client seeded plans,
row-wise solver, row-wise sizes) where the model's matrix products are small enough for torch
to compute every batch item alike (`company_free`), so each edge's Work holds the same bytes
as its own call; each edge then aggregates its own rows as before (the same weighted mean,
same order). Larger models keep one call per edge (`edge_batching: fast` shares anyway).

Batched only where the algorithm says its local round reads nothing but its start row
(`batch_edges`, HierFAVG) and no codec compresses messages; others keep one call per edge."""
from __future__ import annotations

import numpy as np
import torch

from ..algorithms.base import Algorithm, Upload
from ..models.functional import AutogradModel, Model
from ..sim.work import Work

SMALL_PRODUCT = 400     # ATen: a bmm whose contraction x rows x columns is below this runs its
#                         per-entry loop (baddbmm_cpu_kernel) for any batch count, one included


def batches_edges(runner) -> bool:
    """Can this runner train all edges of a tier round in one call? Not a TorchModel whose
    clients run vmapped together (its kernels see the whole stack: a client's numbers would
    depend on its company); stacked functional models and the per-client loop do not."""
    return (bool(getattr(runner.algo, "batch_edges", False)) and runner.codec is None
            and getattr(runner.model, "batching", "loop") == "loop")


def call_groups(segments: list[np.ndarray], counts: np.ndarray, shares: bool,
                matters: bool) -> list[list[int]]:
    """The segments trained in each call. Not `shares` (`shares_calls`): one call each.
    Otherwise all of them in one call where the full batch is not evaluated, and one call per
    full-batch width where it is (a measured round, a gamma target, full-batch steps: the
    padded full batch of a call is as wide as its widest client)."""
    if not shares:
        return [[i] for i in range(len(segments))]
    if not matters:
        return [list(range(len(segments)))]
    groups: dict[int, list[int]] = {}
    for i, seg in enumerate(segments):
        groups.setdefault(int(counts[seg].max()) if len(seg) else 0, []).append(i)
    return list(groups.values())


def split(work: Work, sizes: list[int],
          finite: np.ndarray) -> list[tuple[Work, list[int]]]:
    """One call's Work over consecutive segments cut into one Work per segment, each with its
    clients whose upload was not finite (views: no row is copied)."""
    up, sel = work.uploads, work.sel
    out = []
    cuts = np.cumsum([0, *sizes]).tolist()
    for a, b in zip(cuts[:-1], cuts[1:]):
        part = Upload(tuple(x[a:b] for x in up.tensors), up.encoding, up.header)
        seg = sel[a:b]
        out.append((Work(seg, part, work.ctime[a:b], work.up_bytes[a:b], work.recs[a:b],
                         work.drop[a:b], work.r), seg[~finite[a:b]].tolist()))
    return out


def start_rows(starts: list[torch.Tensor], sizes: list[int]) -> torch.Tensor:
    """(C, P): each segment's start model repeated over its clients."""
    return torch.cat([s.reshape(1, -1).expand(n, -1) for s, n in zip(starts, sizes)])


def close_edges(runner, t: int, states: list, works: list[Work]) -> list:
    """Each edge aggregates its clients that were not dropped (every one arrives in a round
    computed in closed form), exactly as RoundRunner.edge_close would: the same rows in
    ascending client order, the same weights; rows all in order are passed as the Work's own
    tensors (a gather of every row is the same values). Under the base rule (the weighted mean)
    the edges with one arrival are closed together (`_lone_means`: the same products)."""
    algo, counts = runner.algo, runner.counts
    ctx = runner._ctx(t, works[0].r) if works else None
    out: list = [None] * len(states)
    lone: list[tuple[int, int]] = []          # (edge, row) of edges with one arrival
    # an entry's protections (exec/protect.py) combine every edge, one arrival included (its
    # noise, field, rule), each with its own noise stream as RoundRunner.edge_close names it
    protect = getattr(runner, "protect", None)
    guarded = protect is not None and protect.active
    plain = type(algo).edge_aggregate is Algorithm.edge_aggregate and not guarded
    for i, (es, work) in enumerate(zip(states, works)):
        keep = ~work.drop
        if plain and int(keep.sum()) == 1:
            lone.append((i, int(np.flatnonzero(keep)[0])))
            continue
        arrived = work.sel[keep]
        order = np.argsort(arrived, kind="stable")
        rows = np.flatnonzero(keep)[order]
        arrived = arrived[order]
        up = work.uploads
        if len(rows) != len(work.sel) or np.any(rows[1:] <= rows[:-1]):
            index = torch.from_numpy(rows)
            up = Upload(tuple(x[index] for x in up.tensors), up.encoding)
        weights = torch.from_numpy(counts[arrived].astype(np.float64))
        if guarded:
            protect.enter(t, work.r, int(arrived[0]) if len(arrived) else -1)
        out[i] = algo.edge_aggregate(es, torch.from_numpy(arrived), up, weights, ctx)
    if lone:
        means = _lone_means([works[i] for i, _ in lone], [r for _, r in lone], counts)
        for (i, _), mean in zip(lone, means):
            out[i] = mean
    return out


def _lone_means(works: list[Work], rows: list[int], counts: np.ndarray) -> list[torch.Tensor]:
    """The base rule's weighted mean of ONE upload per edge, for many edges at once: weights
    w / sum(w) = w / w, and `weighted_mean`'s float64 product of a single row elementwise:
    0 + w x, one rounding (the matrix product sums onto +0.0, so a -0.0 entry comes out +0.0,
    as here), the same bits as one matrix product per edge."""
    x = torch.stack([w.uploads.tensors[0][r] for w, r in zip(works, rows)])
    w = torch.from_numpy(counts[[int(w.sel[r]) for w, r in zip(works, rows)]]
                         .astype(np.float64))
    means = ((w / w).unsqueeze(1) * x.double()).add_(0.0).to(x.dtype)
    return [m.clone() for m in means]


def company_free(runner) -> bool:
    """Are a client's bytes the same whatever clients share its call, for this run's model?
    Yes where every matrix product of its steps is small (contraction x rows x columns below
    SMALL_PRODUCT, counted at the widest batch a call can hold: the minibatch or a client's
    whole data, with a bias column): torch then computes every bmm and baddbmm with its
    per-entry loop whatever the batch count (the only kernels a call's company changes; the
    rest of a step is per entry or per row). Above it torch's BLAS path rounds an item by the
    batch count: a batch of one is a plain mm, and at some sizes (9 x 9 x 5, found by a
    reviewer) two, three or seven items round differently too. Functional models on the CPU
    only (models/functional.py: affine layers, bmm products); a torch.nn model's kernels are
    its own, and CUDA's are others. Computed once per runner (tests/test_edge_batch.py checks
    the rule and torch's kernels on both sides of the size)."""
    free = getattr(runner, "_company_free", None)
    if free is None:
        model, b = runner.model, runner.local.batch_size
        width = max(int(runner.counts.max()) if len(runner.counts) else 0,
                    0 if b == "full" else int(b))
        device = getattr(runner.executor, "device", torch.device("cpu"))
        free = type(model) in (Model, AutogradModel) and torch.device(device).type == "cpu" \
            and all(width * (layer.n_in + 1) * layer.n_out < SMALL_PRODUCT
                    for layer in model.layers)
        runner._company_free = free
    return free


def shares_calls(runner) -> bool:
    """Do the edges of a tier round share executor calls? With train.executor.edge_batching
    `fast`, always (10^5+ clients: last-bit differences, documented). With `exact`, where a
    client's bytes do not depend on its call's company (`company_free`: a model whose products
    are all small), except where budgets are not known before training (a gamma target stops
    clients by their gradients; a partial deadline prices messages per call)."""
    if runner.sc.train.executor.edge_batching == "fast":
        return True
    if runner.local.gamma is not None or runner.budgets.policy.policy == "deadline_partial":
        return False
    return company_free(runner)
