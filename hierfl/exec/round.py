"""The round runner: the only bridge between timing (sim/) and learning (algorithms/, learn/).

When an aggregator starts a round, the engine asks the runner to train its clients: the runner
builds the step budgets and minibatch plans, makes one executor call, lets the algorithm
`finish` (what each client uploads), checks the uploads for finiteness, turns the rows each
client evaluated into FLOPs and compute seconds, and sizes every upload. It hands the engine a
torch-free `Work` (steps, budgets, compute seconds, bytes, drops) and an opaque handle to the
uploads; when the round closes the engine hands back who arrived and the runner aggregates.
Models and aggregator states pass through the engine as opaque handles, with their sizes."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from ..algorithms.base import Algorithm, RoundCtx, Upload
from ..compress import EdgeState, build as build_compressor
from ..config.errors import ScenarioError
from ..config.schema import AlgorithmEntry, Scenario
from ..data.federated import FederatedData
from ..learn import dpsgd
from ..learn.batches import Augment, Batch, augment_keys, full_plan, minibatch_plan, \
    poisson_plan, steps_for
from ..learn.optim import build as build_optimizer, build_clip
from ..learn.plugin_program import own_local
from ..learn.schedules import StepLR, round_lr
from ..learn.solver import TermsProgram
from ..models.functional import Model
from ..models.torch_model import OneRowBatch
from ..sim import messages
from ..sim.stragglers import Budgets, RoundPools
from ..sim.work import ClientRecord, Work
from ..topology.graph import Topology
from .asynchronous import AsyncEdgeSteps, fedasync_mix, fedbuff_apply
from .carry import ClientCarry
from .edges import (batches_edges, call_groups, close_edges, shares_calls, split,
                    start_rows)
from .local import Executor
from .protect import Protect


def tensors_bytes(tensors: tuple[torch.Tensor, ...]) -> float:
    """A dense message carrying these tensors."""
    return messages.message_bytes([t.numel() for t in tensors])


def finite_rows(tensors: tuple[torch.Tensor, ...], c: int) -> torch.Tensor:
    """(c,) True where every entry of the row in every (c, P) tensor is finite."""
    finite = torch.ones(c, dtype=torch.bool)
    for tensor in tensors:         # a non-finite entry makes its row's sum non-finite;
        ok = torch.isfinite(tensor.sum(1))      # the sum is 7x cheaper than isfinite
        if not bool(ok.all()):                  # exact (a large finite row may overflow)
            ok = torch.isfinite(tensor).all(1)
        finite &= ok
    return finite


class RoundRunner(AsyncEdgeSteps):
    """One algorithm's learning side of every round, called by sim.engine.Simulation."""

    def __init__(self, scenario: Scenario, entry: AlgorithmEntry, topo: Topology,
                 data: FederatedData, model: Model, algo: Algorithm, executor: Executor):
        self.sc, self.topo, self.data, self.model = scenario, topo, data, model
        self.algo, self.executor = algo, executor
        self.local, self.label = entry.local, entry.label
        self.optimizer = build_optimizer(self.local.optimizer)   # None: plain SGD
        self.grad_clip = build_clip(self.local.clip)             # None: no train.local.clip
        opt_spec = self.local.optimizer
        self.carry = ClientCarry(model, len(data.counts), self.optimizer,
                                 opt_spec is not None and opt_spec.state == "keep",
                                 algo.caps.local_norm)
        self.stragglers = entry.stragglers or scenario.stragglers
        self.algo_edge_rounds = entry.edge_rounds if algo.hierarchical else 1
        self.counts = data.counts
        self.nonfinite: dict[int, list[int]] = {}   # round -> clients whose upload was not finite
        policy = scenario.train.edge_round if algo.hierarchical else \
            entry.round_policy(scenario.train)
        self.budgets = Budgets(scenario.seed, self.local, self.stragglers, policy, self.counts,
                               topo, self.model.n_params, self.model.fwd_flops,
                               algo.upload_tensors, algo.hierarchical)
        self.pools = RoundPools(self.budgets, self._planned)
        # message codecs (entry.compress; None: every message dense, as without the key)
        self.codec = build_compressor(entry.compress, scenario.seed, len(self.counts),
                                      model.n_params, algo)
        self._edge_wrap = self.codec is not None and self.codec.spec.edge_up.active
        # privacy, robust rules, attackers, secure aggregation (exec/protect.py)
        try:
            self.protect = Protect(scenario, entry, algo, self.counts, *_edges_of(topo),
                                   topo.device_class)
            self.y_train = self.protect.labels(data.y, data.offsets, data.n_classes) \
                if entry.attack is not None else data.y
        except ValueError as exc:       # an attack that does not fit the data or the system
            given = {k: v for k, v in dataclasses.asdict(entry.attack).items()
                     if v is not None} if entry.attack is not None else None
            raise ScenarioError.one(scenario.file, _attack_key(scenario, entry), given,
                                    str(exc)) from None
        if self.protect.active:
            algo.combiner = self.protect.combine

    # ------------------------------------------------------------------ the algorithm's flags
    @property
    def hierarchical(self) -> bool:
        return self.algo.hierarchical

    @property
    def linear_aggregate(self) -> bool:
        """Edges may pre-aggregate (sums of n_k-weighted uploads), unless the cloud combines
        each client's row itself (a robust cloud rule, privacy noise at the cloud)."""
        return self.algo.linear_aggregate and not self.protect.needs_rows

    def selected_from(self, n: int) -> None:
        """The clients this round's selection drew from (the available ones): privacy's q."""
        self.protect.pool = n

    def exhausted(self) -> bool:
        """privacy.target_epsilon: the next round would spend past it (the run ends)."""
        return self.protect.exhausted()

    def lr(self, t: int, r: int = 0) -> float:
        """The local lr of round (t, r) (its first step's, under a per-step schedule)."""
        step = self._step_lr(t, r)
        if step is not None:
            return step(0)
        if self.local.lr_schedule is not None:
            return round_lr(self.local.lr_schedule, self.local.lr, t, self.sc.train.rounds)
        return self.local.lr * self.local.lr_decay ** (t - 1)

    def _step_lr(self, t: int, r: int) -> StepLR | None:
        """An `every: step` schedule's lr of each step of round (t, r) (learn/schedules.py)."""
        sched = self.local.lr_schedule
        if sched is None or sched.every != "step":
            return None
        per_round = self.algo_edge_rounds * int(self.local.steps)
        return StepLR(sched, self.local.lr, ((t - 1) * self.algo_edge_rounds + r) *
                      int(self.local.steps), self.sc.train.rounds * per_round)

    def _ctx(self, t: int, r: int = 0) -> RoundCtx:
        return RoundCtx(t, r, self.lr(t, r), torch.zeros(0))

    def trainees(self, picked: np.ndarray) -> np.ndarray:
        return self.algo.trainees(picked)

    def reporting(self, t: int, kids: list[str]) -> list[str]:
        return self.algo.reporting(t, kids)

    def global_model(self) -> torch.Tensor:
        return self.algo.global_model()

    def down_bytes(self) -> float:
        if self.codec is not None:      # a hierarchical cloud sends to aggregators
            return self.codec.model_bytes("edge_down" if self.hierarchical else "down",
                                          self.algo.downlink()) + self.carry.sent_bytes
        return tensors_bytes(self.algo.downlink()) + self.carry.sent_bytes

    # ------------------------------------------------------------------ training
    def train(self, t: int, r: int, sel: np.ndarray, start: torch.Tensor,
              silent: np.ndarray | None = None, sizes: list[int] | None = None,
              doomed: np.ndarray | None = None) -> Work:
        """One executor call for the clients `sel` of one aggregation round. With `sizes`,
        `sel` is consecutive segments (one per aggregator, exec/edges.py): each segment's
        budgets are what one call per segment would get. `doomed`: clients that will crash
        before they finish (the engine's draw): their client state, and their compression
        residuals, stay as they were."""
        planned = self._planned(t, r, sel)
        clients = torch.from_numpy(sel)
        if self.codec is not None and self.codec.spec.down.active and start.dim() == 1:
            start = self.codec.model("down", start, (t, r), int(sel[0])).decoded
        ctx = RoundCtx(t, r, self.lr(t, r), torch.from_numpy(planned))
        program = self._with_local(self.algo.program(clients, start, ctx), sel, t, r)
        program = own_local(program, self.local, self.sc, self.label, sel, t, r)
        program = self._with_dp(program, sel, t, r)
        budgets, strag = self._budgets(t, r, sel, planned, program.grad_evals_per_step, sizes,
                                       self._start_evals(program))
        plan = (poisson_plan if self._poisson else minibatch_plan)(
            self.data.offsets, sel, self.local.batch_size, budgets, self.sc.seed, t, r,
            self.data.x, self.y_train)
        if self.local.augment is not None:
            plan = dataclasses.replace(plan, aug=self._augment(t, r, sel))
        step_lr = self._step_lr(t, r)
        try:
            res = self.executor.run(program, plan, self._full(sel, program, t),
                                    torch.from_numpy(budgets),
                                    ctx.lr if step_lr is None else step_lr, self.local.gamma,
                                    self.local.check_every, measure=self._measure(t))
        except OneRowBatch as exc:
            raise self._one_row(t, sel, exc) from None
        if isinstance(program, TermsProgram):
            self.carry.finish(sel, res.state, program, doomed)
        if self._poisson or self.privacy is not None and self.privacy.kind == "sample_level":
            self.protect.sample_steps(sel, np.maximum(res.steps.numpy(), 0),
                                      self.local.batch_size)
        up = self.algo.finish(clients, start, res, ctx, doomed)
        if self.protect.active and not up.silent:
            ref = self.algo.upload_reference(clients, start, up)
            up = dataclasses.replace(up, tensors=(self.protect.client_side(
                t, r, sel, ref, up.tensors[0], sizes), *up.tensors[1:]))
        finite = finite_rows(up.tensors, len(sel))
        sent = up.tensors                               # (what a codec leaves as it was)
        if sizes is None and not bool(finite.all()):   # numerical health: name the clients
            #                                 where it arose (segments: named per edge, edges.py)
            self.nonfinite.setdefault(t, []).extend(sel[~finite.numpy()].tolist())
        ctime = self._compute_s(sel, self.counts[sel], plan.weights, res, program)
        drop = self._dropped(strag)
        if silent is not None:
            drop = drop | silent
        recs = [ClientRecord(t, r, k, st, bu, ct, float("nan"), dr, sg, ga)
                for k, st, bu, ct, dr, sg, ga in zip(sel.tolist(), res.steps.tolist(),
                                                     budgets.tolist(), ctime.tolist(),
                                                     drop.tolist(), strag.tolist(),
                                                     res.gamma.tolist())]
        if self.protect.bad is not None:
            for rec in recs:
                rec.attacker = int(self.protect.bad[rec.client])
        if self.codec is not None and self.codec.spec.up.active and not up.silent:
            quiet = silent if doomed is None else doomed if silent is None else silent | doomed
            ref = self.algo.upload_reference(clients, start, up)
            up, up_bytes = self._compressed(t, r, sel, ref, up, recs, quiet)
        else:
            up_bytes = self._upload_sizes(up, recs)
        trips = self.protect.trips(sel, drop if doomed is None else drop | doomed,
                                   self.model.n_params, sizes)
        if trips is not None:       # masked inputs: field elements of `bits`, not floats
            rest = up_bytes - self._upload_sizes(Upload(up.tensors[:1]), []) \
                if len(up.tensors) > 1 else 0.0
            up_bytes = trips.masked + rest
            for rec, nb in zip(recs, up_bytes.tolist()):
                rec.up_bytes, rec.encoding = float(nb), "masked"
        if self.carry.sent_bytes and not up.silent:        # the statistics travel with it
            up_bytes = up_bytes + self.carry.sent_bytes
            for rec in recs:
                rec.up_bytes += self.carry.sent_bytes
        cluster = self.algo.cluster_of(up)
        if cluster is not None:
            for rec, cl in zip(recs, cluster.tolist()):
                rec.cluster = int(cl)
        return Work(sel, up, ctime, up_bytes, recs, drop, r,
                    finite.numpy() if up.tensors is sent else None, secagg=trips)

    def round_selection(self, t: int, sel: np.ndarray) -> None:
        """A hierarchical cloud round's clients: its edge rounds' stragglers are drawn over
        all of them (sim/stragglers.RoundPools)."""
        self.pools.enter(t, sel)

    def dropped_before(self, t: int, r: int, sel: np.ndarray) -> np.ndarray | None:
        """The clients of `sel` that round (t, r) will drop (its dropped stragglers), known
        before they train; None where no straggler is dropped."""
        if not self.stragglers.fraction or not self._dropped(np.ones(1, bool)).any():
            return None
        drawn = self.pools.draw(t, r, sel)
        strag = drawn[1] if drawn is not None else \
            self.budgets.straggle(t, r, sel, self._planned(t, r, sel))[1]
        return self._dropped(strag)

    def _planned(self, t: int, r: int, sel: np.ndarray) -> np.ndarray:
        """The steps each client of `sel` is planned to take in round (t, r)."""
        return self.algo.round_steps(t, r, steps_for(self.counts[sel], self.local.batch_size,
                                                     self.local.steps, self.local.epochs))

    def _budgets(self, t: int, r: int, sel: np.ndarray, planned: np.ndarray, evals: int,
                 sizes: list[int] | None,
                 full: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Step budgets and straggler masks: drawn over the hierarchical round's selection
        where it was given (round_selection), else over `sel` (per segment where `sizes`
        says)."""
        def down() -> int:
            return len(self.algo.downlink())
        drawn = self.pools.draw(t, r, sel)
        if drawn is not None:
            return self.budgets.cap(sel, drawn[0], evals, down, full), drawn[1]
        if sizes is None:
            return self.budgets.plan(t, r, sel, planned, evals, down, full)
        cuts = np.cumsum([0, *sizes])
        parts = [self.budgets.plan(t, r, sel[a:b], planned[a:b], evals, down, full)
                 for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())]
        return (np.concatenate([p[0] for p in parts]) if parts else planned.copy(),
                np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, bool))

    @property
    def batches_edges(self) -> bool:
        """Can every edge of a tier round train in one call (exec/edges.py)?"""
        return batches_edges(self)

    def train_edges(self, t: int, r: int, segments: list[np.ndarray],
                    starts: list[torch.Tensor]) -> list[tuple[Work, list[int]]]:
        """One executor call for the clients of every edge (`segments[i]` from `starts[i]`),
        or one per full-batch width where that width is evaluated, or one per edge where the
        calls may not be shared (edges.shares_calls, call_groups): per edge, its Work and its
        clients whose upload was not finite."""
        matters = self._measure(t) or self.local.gamma is not None or \
            self.local.batch_size == "full"
        out: list = [None] * len(segments)
        groups = call_groups(segments, self.counts, shares_calls(self), matters)
        for group in groups:
            if not group:
                continue
            sizes = [len(segments[i]) for i in group]
            sel = np.concatenate([segments[i] for i in group])
            work = self.train(t, r, sel, start_rows([starts[i] for i in group], sizes),
                              sizes=sizes)
            finite = work.finite if work.finite is not None else \
                finite_rows(work.uploads.tensors, len(sel)).numpy()
            parts = split(work, sizes, finite)
            for i, part in zip(group, parts):
                out[i] = part
        return out

    def close_edges(self, t: int, states: list, works: list[Work]) -> list:
        """Every edge of a batched tier round aggregates its arrivals (exec/edges.py)."""
        for work in works:
            kept = work.sel[~work.drop]
            self.carry.arrived(kept, self.counts[kept])
        return close_edges(self, t, states, works)

    def note_nonfinite(self, t: int, clients: list[int]) -> None:
        if clients:
            self.nonfinite.setdefault(t, []).extend(clients)

    def _augment(self, t: int, r: int, sel: np.ndarray) -> Augment:
        """train.local.augment for the clients `sel` of round (t, r), keyed per client."""
        shape = tuple(self.data.input_shape)
        a = self.local.augment
        return Augment(augment_keys(self.sc.seed, t, r, sel), a.crop, a.flip,
                       (1, *shape) if len(shape) == 2 else shape)

    def _measure(self, t: int) -> bool:
        """The achieved gamma is measured in evaluated rounds (train.eval_every) and the last."""
        return t % self.sc.train.eval_every == 0 or t >= self.sc.train.rounds

    def _one_row(self, t: int, sel: np.ndarray, exc: Exception) -> ScenarioError:
        """A BatchNorm layer given a minibatch of one row in training (torch refuses it):
        named with the clients whose sizes leave such a batch."""
        b = self.local.batch_size
        odd = [int(k) for k in sel if b == "full" and self.counts[k] == 1 or
               b != "full" and (int(b) == 1 or self.counts[k] % int(b) == 1)]
        who = f"client(s) {', '.join(map(str, odd[:5]))}" if odd else "a client"
        return ScenarioError.one(self.sc.file, "train.local.batch_size", b,
                                 f"round {t}: {who} of this round trained on a minibatch of one "
                                 f"row (n_k % batch_size == 1: the last batch of an epoch), "
                                 f"which BatchNorm cannot normalise in training ({exc}); choose "
                                 "another batch size, or a model with GroupNorm (norm: group)")

    def _with_local(self, program, sel: np.ndarray, t: int, r: int):
        """The algorithm's program with train.local.optimizer's steps (from the clients' kept
        state where optimizer.state is keep), train.local.clip and a stateful model's
        per-client statistics and dropout streams (exec/carry.py): the one place they reach a
        program (the world refuses them for an algorithm whose program is not a plain
        TermsProgram: Capabilities.optimizers, run/world.py). A TermsProgram subclass that
        changes only the gradient (MOON's) says so with `optimizer_steps = True`."""
        if self.optimizer is None and self.grad_clip is None and not self.carry.stateful:
            return program
        if type(program) is not TermsProgram and \
                not (isinstance(program, TermsProgram) and
                     getattr(type(program), "optimizer_steps", False)):
            raise TypeError(f"{self.algo.name}: train.local.optimizer, clip and stateful "
                            f"models need a TermsProgram, got {type(program).__name__} "
                            "(declare optimizers=False)")
        return dataclasses.replace(program, optimizer=self.optimizer, grad_clip=self.grad_clip,
                                   **self.carry.program_fields(sel, program.start, self.sc.seed,
                                                               t, r))

    def _with_dp(self, program, sel: np.ndarray, t: int, r: int):
        """DP-SGD in the local steps (privacy kind sample_level, learn/dpsgd.py): per-sample
        clipping and noise keyed by (seed, client, round, edge round), on a plain TermsProgram
        only (after own_local: a plugin's program is refused, not silently left without DP)."""
        p = self.privacy
        if p is None or p.kind != "sample_level":
            return program
        return dpsgd.attach(program, p, self.counts[sel], self.local.batch_size, self.sc.seed,
                            sel, t, r)

    @property
    def privacy(self):
        """The entry's privacy spec, its noise multiplier chosen where target_epsilon asked."""
        return self.protect.priv

    @property
    def _poisson(self) -> bool:
        """Poisson-sampled minibatches (DP-SGD's sampling: poisson) instead of shuffled ones."""
        p = self.privacy
        return p is not None and p.kind == "sample_level" and p.sampling == "poisson"

    def _full(self, sel: np.ndarray, program, t: int) -> Batch:
        """The clients' full local data, where a gamma target, a measurement or the program's
        `prepare` needs it; otherwise an empty batch."""
        # (dataclass programs all have the attribute, None unless they prepare: `hasattr`
        # gathered every client's whole data every round for nothing)
        if self._measure(t) or self.local.gamma is not None or \
                getattr(program, "prepare", None) is not None:
            return full_plan(self.data.offsets, sel, self.data.x, self.y_train).at(0)
        x, y = self.data.x, self.data.y
        return Batch(x[:0].expand(len(sel), 0, -1), y[:0].expand(len(sel), 0, *y.shape[1:]),
                     x.new_zeros(len(sel), 0))

    def _start_evals(self, program) -> float:
        """Full-data gradient evaluations charged before the first step (as _compute_s
        charges them): one for a gamma target's reference or a program's `prepare`, which
        may declare its own count (`prepare_evals`)."""
        prepared = getattr(program, "prepare", None) is not None
        full = 1.0 if self.local.gamma is not None or prepared else 0.0
        if prepared and hasattr(program, "prepare_evals"):
            full += float(program.prepare_evals) - 1.0
        return full

    def _compute_s(self, sel: np.ndarray, counts: np.ndarray, weights: torch.Tensor, res,
                   program) -> np.ndarray:
        """Compute seconds: FLOPs of every sample-gradient evaluated (forward + backward =
        3 x forward) over the device's FLOP/s. A program's `prepare` is charged as one
        full-data gradient unless it declares `prepare_evals` (IFCA: k losses = k/3)."""
        evals_per_step = program.grad_evals_per_step      # (numpy: a third of torch's cost on
        valid = (weights > 0).numpy().sum(-1).cumsum(1)   # these small arrays, same doubles)
        steps = np.maximum(res.steps.numpy(), 0)                       # (C, S) rows so far
        if valid.shape[1] == 1:                                        # full batch: reused
            rows = valid[:, 0] * steps
        else:
            idx = np.maximum(steps - 1, 0) % valid.shape[1]
            rows = np.where(steps > 0, valid[np.arange(len(steps)), idx], 0)
        full = res.full_evals.numpy().astype(np.float64)
        if getattr(program, "prepare", None) is not None and hasattr(program, "prepare_evals"):
            full = full + (float(program.prepare_evals) - 1.0)
        samples = rows.astype(np.float64) * evals_per_step + full * counts.astype(np.float64)
        flops = samples * 3 * self.model.fwd_flops
        return flops / self.topo.client_flops[sel]

    def _dropped(self, stragglers: np.ndarray) -> np.ndarray:
        """Stragglers whose work the algorithm discards (FedAvg's rule in FedProx's
        experiment)."""
        mode = self.stragglers.drop
        if mode == "never" or not stragglers.any():
            return np.zeros_like(stragglers)
        if mode == "always" or self.algo.drops_stragglers:
            return stragglers.copy()
        return np.zeros_like(stragglers)

    @staticmethod
    def _upload_sizes(up: Upload, recs: list[ClientRecord]) -> np.ndarray:
        """Each row's encoded size (written on its record with the encoding used)."""
        widths = [t.shape[1] for t in up.tensors]
        rows = up.tensors[0].shape[0]
        nnz = [torch.count_nonzero(t, dim=1).double().numpy() for t in up.tensors] \
            if messages.needs_nnz(up.encoding) else None
        up_bytes = messages.row_bytes(widths, nnz, rows, up.encoding)
        for rec, nb, enc in zip(recs, up_bytes,
                                messages.row_encodings(widths, nnz, rows, up.encoding)):
            rec.up_bytes, rec.encoding = float(nb), enc
        return up_bytes

    def _compressed(self, t: int, r: int, sel: np.ndarray, start: torch.Tensor, up: Upload,
                    recs: list[ClientRecord],
                    silent: np.ndarray | None) -> tuple[Upload, np.ndarray]:
        """The uploads as the edge decodes them (compress.layer), sizes on the records."""
        sent = self.codec.uploads(t, r, sel, start, up.tensors, up.header, silent)
        kind = self.codec.spec.up.kind
        for rec, nb, wire in zip(recs, sent.bytes.tolist(), sent.wire):
            rec.up_bytes, rec.encoding, rec.compress = float(nb), wire, kind
        return Upload(sent.tensors, "dense", up.header), sent.bytes

    # ------------------------------------------------------------------ closing rounds
    @staticmethod
    def _rows(work: Work, rows: list[int] | None) -> Upload:
        up = work.uploads
        if rows is None:
            return up
        index = torch.tensor(rows, dtype=torch.long)
        return Upload(tuple(x[index] for x in up.tensors), up.encoding)

    def aggregate(self, t: int, arrived: np.ndarray, work: Work, rows: list[int] | None) -> None:
        """Flat: the cloud aggregates the clients that arrived (rows of `work`; None: all)."""
        self.protect.enter(t, 0, -1)
        self.algo.aggregate(torch.from_numpy(arrived), self._rows(work, rows), self._ctx(t))
        self.carry.arrived(arrived, self.counts[arrived])
        self.carry.close()
        self.protect.close_round(t, len(arrived))

    def partial(self, clients: list[int], rows: list[int], work: Work) -> tuple[Any, float]:
        """A bottom-tier pre-aggregate of some clients' uploads, with its size."""
        self.carry.arrived(np.asarray(clients), self.counts[clients])
        return self._partial(clients, rows, work)

    def _partial(self, clients: list[int], rows: list[int], work: Work) -> tuple[Any, float]:
        if self.protect.active:
            self.protect.enter(work.recs[0].round if work.recs else 0, work.r, -1)
            tensors, weight = self.protect.partial(clients, self._rows(work, rows).tensors[0])
            return (tensors, weight), tensors_bytes(tensors) + 4.0 + self.carry.sent_bytes
        tensors, weight = self.algo.partial(torch.tensor(clients), self._rows(work, rows))
        return (tensors, weight), tensors_bytes(tensors) + 4.0 + self.carry.sent_bytes

    def partial_bytes(self, work: Work) -> float:
        """The size of an edge's partial sum as `partial` counts it, before one is made: the
        algorithm's partial of its first client (the sums of one client are as large as those
        of many)."""
        return self._partial([int(work.sel[0])], [0], work)[1]

    def aggregate_partials(self, t: int, partials: list[Any]) -> None:
        self.algo.aggregate_partials(list(partials), self._ctx(t))
        self.carry.close()
        self.protect.close_round(t, 0)

    def edge_start(self, model: torch.Tensor) -> Any:
        if self.codec is not None and self.codec.spec.edge_down.active:
            model = self.codec.model("edge_down", model).decoded    # what the aggregator got
        es = self.algo.edge_start(model)
        return EdgeState(es, model) if self._edge_wrap else es

    def _es(self, state: Any) -> Any:
        return state.inner if self._edge_wrap else state

    def _wrap(self, old: Any, es: Any) -> Any:
        return EdgeState(es, old.ref) if self._edge_wrap else es

    def edge_model(self, state: Any) -> tuple[torch.Tensor, float]:
        """The model an aggregator broadcasts this round, with its size."""
        start = self.algo.edge_model(self._es(state))
        if self.codec is not None:
            return start, self.codec.model_bytes("down", (start,)) + self.carry.sent_bytes
        return start, tensors_bytes((start,)) + self.carry.sent_bytes

    def edge_close(self, t: int, state: Any, work: Work, arrived: np.ndarray,
                   rows: list[int]) -> Any:
        """A bottom-tier aggregator aggregates the clients that arrived."""
        weights = torch.from_numpy(self.counts[arrived].astype(np.float64))
        self.carry.arrived(arrived, self.counts[arrived])
        self.protect.enter(t, work.r, int(arrived[0]) if len(arrived) else -1)
        return self._wrap(state, self.algo.edge_aggregate(
            self._es(state), torch.from_numpy(arrived), self._rows(work, rows), weights,
            self._ctx(t, work.r)))

    def tier_close(self, t: int, state: Any, arrived: list[str], uploads: dict[str, Any],
                   weights: list[float], start: torch.Tensor) -> Any:
        """An upper-tier aggregator aggregates its children's uploads that arrived."""
        w = torch.tensor(weights, dtype=torch.float64)
        up = Upload(tuple(torch.stack([uploads[n][j] for n in arrived])
                          for j in range(len(uploads[arrived[0]])))) if arrived else \
            Upload((torch.zeros(0, start.numel()),))
        return self._wrap(state, self.algo.edge_aggregate(self._es(state), None, up, w,
                                                          self._ctx(t)))

    def edge_upload(self, state: Any) -> tuple[Any, float]:
        """What an aggregator sends to its parent, with its size."""
        msg = self.algo.edge_upload(self._es(state))
        if msg is not None and self._edge_wrap:
            msg, size = self.codec.edge_upload(state.ref, msg)
            return msg, size + self.carry.sent_bytes
        return msg, (0.0 if msg is None else tensors_bytes(msg) + self.carry.sent_bytes)

    def async_update(self, work: Work | None, msg: Any = None, weight: float = 0.0) -> Any:
        """An asynchronous update: one client's upload (`work` of one client) or a top
        aggregator's upload `msg` with its weight (exec/asynchronous.py)."""
        if work is not None:
            return work.uploads.tensors[0][0], float(self.counts[int(work.sel[0])])
        return msg[0], weight

    def async_mix(self, update: Any, alpha: float) -> None:
        """FedAsync: mix one arrived update into the global model."""
        fedasync_mix(self.algo, update, alpha)

    def async_buffer(self, buffer: list[tuple[Any, Any, float]], server_lr: float) -> None:
        """FedBuff: apply k buffered updates as one weighted mean of deltas."""
        fedbuff_apply(self.algo, buffer, server_lr)

    def cloud_close(self, t: int, arrived: list[str], uploads: dict[str, Any],
                    weights: list[float]) -> None:
        self.protect.enter(t, 0, -1)
        self.algo.cloud_aggregate(arrived, [uploads[n] for n in arrived],
                                  torch.tensor(weights, dtype=torch.float64), self._ctx(t))
        self.carry.close()
        self.protect.close_round(t, 0)


def _edges_of(topo: Topology) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Per client the index of its bottom aggregator, and each one's client count (privacy's
    per-edge sampling rates); None, None on a flat topology."""
    if not topo.edges:
        return None, None
    of = np.asarray(topo.edge_of, dtype=np.int64)
    return of, np.bincount(of, minlength=len(topo.edges))


def _attack_key(sc: Scenario, entry: AlgorithmEntry) -> str:
    """Where an entry's attack was written: its own attack:, else the scenario's."""
    i = sc.algorithms.index(entry)
    return f"algorithms[{i}].attack" if entry.attack_own else "attack"
