"""An algorithm entry's privacy, robustness, attack and secure aggregation at run time (issue 43):
the one mechanism between the clients' uploads and every aggregation of them.

On the client side (RoundRunner.train, after the algorithm's `finish`), each upload row x_k of a
client that started from s is turned into its update u_k = x_k - s, and
  - an attacker's update is poisoned (robust/attacks.py; label_flip poisons its data instead:
    `labels`),
  - a DP client's update is clipped to norm C (privacy/mechanism.py) and, with noise_at:
    client, noised with std z C (local DP),
and sent as s + u_k (under secure aggregation, masked: its protocol's messages are charged on
the links by the engine, `trips`, and the aggregate passes through the field, secagg/field.py). At an aggregation (Algorithm.combine) of rows x_k from an aggregator that
sent ref, the result is ref + RULE(x - ref, w) (robust/rules.py; `mean` is today's weighted
mean, bit for bit), plus Gaussian noise of std z * C * sensitivity(w) where this tier is the
entry's noise_at and the rows are clients'. The privacy spent is accounted per cloud round
(privacy/accountant.py) with the sampling rates the round actually had."""
from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..algorithms.base import weighted_mean
from ..privacy.accountant import Accountant, noise_for
from ..privacy.mechanism import AdaptiveClip, clip_rows, noise, sensitivity
from ..robust.attacks import attackers, label_map, poison
from ..robust.rules import check as rule_problem, combine as rule_combine
from ..secagg.cost import round_cost
from ..secagg.field import field_mean
from ..seeding import torch_gen


@dataclass(frozen=True)
class Trips:
    """Secure aggregation's messages per client of one call (sim/engine.py sends them): the
    tier whose aggregator is the protocol's server, the round trips before the masked upload
    and after it, each (bytes up, bytes down, up first), and each masked input's bytes."""

    at: str
    before: list
    after: list
    masked: np.ndarray


class Protect:
    """One entry's protections; `active` False where the entry gives none (nothing changes)."""

    def __init__(self, sc: Any, entry: Any, algo: Any, counts: np.ndarray,
                 edge_of: np.ndarray | None, edge_sizes: np.ndarray | None,
                 device_class: tuple[str, ...] = ()):
        self.seed, self.label = sc.seed, entry.label
        self.priv, self.agg = entry.privacy, entry.aggregate
        self.attack, self.sa = entry.attack, entry.secure_aggregation
        self.hierarchical = algo.hierarchical
        self.counts = counts
        n = len(counts)
        self.bad = attackers(self.attack, n, sc.seed, device_class) \
            if self.attack is not None else None
        self.active = any(x is not None for x in (self.priv, self.agg, self.attack, self.sa))
        self.edge_of, self.edge_sizes = edge_of, edge_sizes
        self.pool = n                                   # clients the round drew from
        self.at: tuple[int, int, int] = (0, 0, -1)      # (round, edge round, key) of combine
        self.skipped: list[str] = []                    # rounds a rule could not run
        dp = self.priv
        self.client_dp = dp is not None and dp.kind == "client_level"
        self.clip = float(dp.clip) if dp is not None else math.inf
        self.z = 0.0 if dp is None else dp.noise_multiplier if dp.noise_multiplier is not None \
            else noise_for(dp.target_epsilon, dp.delta, self.plan(sc, entry), dp.relation)
        ad = dp.adaptive if self.client_dp else None
        self.adaptive = None if ad is None else \
            AdaptiveClip(self.clip, ad.target_quantile, ad.lr, count_noise(ad, sc, len(counts)))
        if dp is not None and dp.noise_multiplier is None:     # chosen for target_epsilon
            self.priv = dataclasses.replace(dp, noise_multiplier=self.z)
            print(f"{self.label}: noise multiplier z = {self.z:.6g}, chosen so that the "
                  f"planned {sc.train.rounds} rounds end at epsilon {dp.target_epsilon:g} "
                  f"(delta {dp.delta:g})")
        self.accountant = Accountant(dp.delta, self.z, dp.relation) if dp is not None else None
        self.last_events: list[tuple[float, int]] = []  # the last round's (q, count)
        self.participations = np.zeros(n, np.int64)    # noise_at client: per client
        self.round_q: dict[int, float] = {}             # noise_at edge: edge round -> max q
        self.norms: list[torch.Tensor] = []             # adaptive: this round's update norms
        self.epsilon = math.nan if dp is None else 0.0
        self.dp_steps = np.zeros(n, np.int64)           # sample_level: DP-SGD steps per client
        self.sample_q = 1.0                             # and the largest q of a step

    # ------------------------------------------------------------------ run-time choices
    @property
    def needs_rows(self) -> bool:
        """The cloud combines every client's row itself (no linear pre-aggregation): a robust
        cloud rule, or client-level noise added at the cloud."""
        if not self.active:
            return False
        rule = self.agg is not None and not self.agg.cloud.is_mean
        masked = self.sa is not None and self.sa.at == "cloud"     # the cloud unmasks the sum
        return rule or masked or (self.client_dp and self.priv.noise_at == "cloud")

    def noise_tier(self) -> str | None:
        return self.priv.noise_at if self.client_dp and self.z > 0 else None

    def uniform(self) -> bool:
        return self.priv is not None and self.priv.kind == "client_level" and \
            self.priv.weights == "uniform"

    # ------------------------------------------------------------------ the clients' side
    def labels(self, y: torch.Tensor, offsets: np.ndarray, n_classes: int) -> torch.Tensor:
        """The training labels this entry's clients train on: label_flip attackers' rows mapped
        (a copy; the data set itself is shared by every entry)."""
        if self.attack is None or self.attack.kind != "label_flip":
            return y
        if n_classes == 0 or y.dim() != 1 or y.is_floating_point():
            raise ValueError("label_flip maps class labels; this data set's targets are not "
                             "classes (a regression set): choose another attack kind")
        m = label_map(self.attack, n_classes)
        out = y.clone()
        for k in np.flatnonzero(self.bad).tolist():
            a, b = int(offsets[k]), int(offsets[k + 1])
            out[a:b] = m[y[a:b]]
        return out

    def client_side(self, t: int, r: int, sel: np.ndarray, ref: torch.Tensor,
                    rows: torch.Tensor, sizes: list[int] | None) -> torch.Tensor:
        """The rows the clients `sel` send, from the rows they computed (see the module)."""
        if self.attack is None and not self.client_dp:
            return rows
        u = rows - ref
        changed = torch.zeros(len(sel), dtype=torch.bool)  # rows sent as computed stay exact
        if self.attack is not None and self.attack.kind != "label_flip":
            bad = torch.from_numpy(self.bad[sel])
            if bool(bad.any()):
                cuts = np.cumsum([0, *(sizes or [len(sel)])]).tolist()
                parts = []
                for a, b in zip(cuts[:-1], cuts[1:]):    # per aggregator: what it sees
                    gen = torch_gen(self.seed, "attack", t, r, int(sel[a]) if b > a else 0)
                    parts.append(poison(self.attack, u[a:b], bad[a:b], gen))
                u = torch.cat(parts) if parts else u
                changed |= bad
        if self.client_dp:
            u, norms = clip_rows(u, self.clip)
            self.norms.append(norms)
            changed |= torch.from_numpy(norms.numpy() > self.clip)
            if self.priv.noise_at == "client" and self.z > 0:
                cuts = np.cumsum([0, *(sizes or [len(sel)])]).tolist()
                u = u + torch.cat([      # per aggregator (edge calls may be batched or not)
                    noise((b - a, u.shape[1]), self.z * self.clip,
                          torch_gen(self.seed, "dp-client", t, r, int(sel[a])), u.dtype)
                    for a, b in zip(cuts[:-1], cuts[1:]) if b > a])
                changed[:] = True
            if self.priv.noise_at == "client":
                self.participations[sel] += 1
        if not bool(changed.any()):
            return rows
        return torch.where(changed[:, None], ref + u, rows)

    def trips(self, sel: np.ndarray, gone: np.ndarray, p: int,
              sizes: list[int] | None) -> "Trips | None":
        """Secure aggregation's messages of the clients `sel` (`gone`: those that drop before
        their masked input), one protocol run per aggregator at spec.at: per segment (`sizes`,
        a hierarchical algorithm's edges), per bottom edge (a flat algorithm's pre-aggregating
        edges), or all of `sel` (at: cloud of a flat algorithm)."""
        if self.sa is None:
            return None
        if sizes is not None:
            groups = np.repeat(np.arange(len(sizes)), sizes)
        elif self.sa.at == "edge" and self.edge_of is not None:
            groups = self.edge_of[sel]
        else:
            groups = np.zeros(len(sel), np.int64)
        before: list = [()] * len(sel)
        after: list = [()] * len(sel)
        masked = np.zeros(len(sel))
        for g in np.unique(groups).tolist():
            idx = np.flatnonzero(groups == g)
            c = round_cost(self.sa, len(idx), int(gone[idx].sum()), p)
            pre = ((c.advertise.client_sent, c.advertise.client_received, True),
                   (c.share.client_sent, c.share.client_received, True))
            post = ((c.unmask.client_sent, c.unmask.client_received, False),) \
                if c.unmask.round_trips else ()
            for i in idx.tolist():
                before[i], after[i], masked[i] = pre, post, c.masked_bytes
        return Trips(self.sa.at, before, after, masked)

    # ------------------------------------------------------------------ aggregations
    def enter(self, t: int, r: int, key: int) -> None:
        """The round, edge round and aggregator key (its first client, or -1 for the cloud)
        of the next combine: its noise stream."""
        self.at = (t, r, key)

    def combine(self, tier: str, rows: torch.Tensor, weights: torch.Tensor, ref: torch.Tensor,
                clients: bool) -> torch.Tensor:
        """Algorithm.combine's rule (see the module)."""
        rule = None if self.agg is None else (self.agg.edge if tier == "edge" else self.agg.cloud)
        noisy = clients and self.noise_tier() == tier
        w = weights
        if clients and self.uniform():
            w = torch.full_like(weights, 1.0 / max(len(weights), 1), dtype=torch.float64)
        masked = clients and self.sa is not None and self.sa.at == tier
        if (rule is None or rule.is_mean) and not noisy and not masked:
            return weighted_mean(rows, w)
        u = rows - ref
        if masked:          # the sum the server unmasks, through the field
            out = field_mean(u, w, self.sa.bits, self.sa.range)
        elif rule is not None and not rule.is_mean:
            why = rule_problem(rule, len(u))
            if why is not None:         # (fewer arrivals than the rule needs: said once)
                if not self.skipped:
                    print(f"warning: {self.label}: round {self.at[0]}: {why}; that "
                          "aggregator keeps its model this round (said once per run)",
                          file=sys.stderr)
                self.skipped.append(f"round {self.at[0]} ({tier}): {why}")
                return ref.clone()
            out = rule_combine(rule, u, w)
        else:
            out = weighted_mean(u, w)
        if noisy:
            z = self.z if self.adaptive is None else \
                self.adaptive.noise_multiplier(self.z, len(u))      # the count takes its share
            std = z * sensitivity(w, self.clip, self.priv.weights)
            t, r, key = self.at
            out = out + noise(out.shape, std, torch_gen(self.seed, "dp-noise", t, r, key + 1),
                              out.dtype)
            if tier == "edge" and self.edge_of is not None and len(u):
                e = self.edge_of[key] if key >= 0 else 0
                q = len(u) / float(self.edge_sizes[e])
                self.round_q[r] = max(self.round_q.get(r, 0.0), q)
        return ref + out

    def partial(self, clients: list[int], rows: torch.Tensor) -> tuple[tuple[torch.Tensor, ...],
                                                                       float]:
        """A flat round's pre-aggregating edge: its weighted partial sum (weights 1 per client
        under privacy weights: uniform, else n_k), noised where noise_at is edge."""
        n = torch.ones(len(clients), dtype=torch.float64) if self.uniform() else \
            torch.from_numpy(self.counts[clients].astype(np.float64))
        total = n @ rows.double()
        if self.sa is not None and self.sa.at == "edge":     # a masked partial sum
            total = field_mean(rows.double(), n / n.sum(), self.sa.bits, self.sa.range) * \
                n.sum()
        if self.noise_tier() == "edge":
            t, r, _ = self.at
            std = self.z * self.clip * float(n.max())
            total = total + noise(total.shape, std, torch_gen(self.seed, "dp-noise", t, r,
                                                              clients[0] + 1), torch.float64)
            e = self.edge_of[clients[0]] if self.edge_of is not None else 0
            q = len(clients) / float(self.edge_sizes[e]) if self.edge_sizes is not None else 1.0
            self.round_q[r] = max(self.round_q.get(r, 0.0), q)
        return (total,), float(n.sum())

    # ------------------------------------------------------------------ per cloud round
    def close_round(self, t: int, aggregated: int) -> None:
        """After cloud round t (`aggregated` clients' updates in it): adaptive clipping's step
        and the privacy spent (the sampling rates this round actually had)."""
        if self.adaptive is not None and self.norms:
            norms = torch.cat(self.norms)
            self.clip = self.adaptive.update(norms, torch_gen(self.seed, "dp-clip", t))
        self.norms = []
        if self.accountant is None:
            self.round_q = {}
            return
        where = self.priv.noise_at if self.client_dp else "sample"
        before = self.accountant.state()
        if where == "cloud" and aggregated:     # q = m over the clients it was drawn from
            self.accountant.step(aggregated / float(max(self.pool, aggregated)))
        elif where == "edge":
            for r in sorted(self.round_q):
                self.accountant.step(self.round_q[r])
        elif where == "client":         # local DP: the client that took part most often
            self._restart([(1.0, int(self.participations.max()))])
        elif where == "sample" and self.dp_steps.any():
            self._restart([(self.sample_q, int(self.dp_steps.max()))])
        after = self.accountant.state()
        self.last_events = after[len(before):] if after[:len(before)] == before else \
            _increment(before, after)
        self.round_q = {}
        self.epsilon = self.accountant.epsilon()

    def _restart(self, events: list[tuple[float, int]]) -> None:
        acc = Accountant(self.priv.delta, self.z, self.priv.relation)
        for q, count in events:
            if count:
                acc.step(q, count)
        self.accountant = acc

    def plan(self, sc: Any, entry: Any) -> list[tuple[float, int]]:
        """The events a run is planned to compose (target_epsilon without a noise multiplier:
        the z that ends this plan at the target): every round's q from clients_per_round / N
        (noise_at cloud; per edge round at the edges: an edge's expected share), q = 1 per
        round for local noise (a client chosen every round), and for DP-SGD q = B / the
        smallest n_k over every local step of every round."""
        dp, train = entry.privacy, sc.train
        n = len(self.counts)
        cpr = n if train.clients_per_round == "all" else min(int(train.clients_per_round), n)
        rounds = int(train.rounds)
        if dp.kind == "sample_level":
            b = entry.local.batch_size
            small, big = int(self.counts.min()), int(self.counts.max())
            q = 1.0 if b == "full" else min(1.0, int(b) / small)
            steps = entry.local.steps if entry.local.steps is not None else \
                entry.local.epochs * (1 if b == "full" else math.ceil(big / int(b)))
            return [(q, rounds * int(steps) * max(1, entry.edge_rounds))]
        if dp.noise_at == "client":
            return [(1.0, rounds)]
        per_round = entry.edge_rounds if dp.noise_at == "edge" and entry.edge_rounds else 1
        return [(cpr / n, rounds * per_round)]

    def sample_steps(self, sel: np.ndarray, steps: np.ndarray, batch: int | str) -> None:
        """sample_level: clients `sel` took `steps` DP-SGD steps of batch `batch` (Poisson:
        each row with probability q_k = min(1, B / n_k)); the accountant holds the bound of the
        worst client: the largest q of any client and the most steps any client has taken
        (epsilon grows with both), composed at the end of the cloud round."""
        self.dp_steps[sel] += steps
        q = 1.0 if batch == "full" else min(1.0, int(batch) / float(self.counts.min()))
        self.sample_q = q

    def exhausted(self) -> bool:
        """target_epsilon with a given z: the next round would spend past it."""
        target = None if self.priv is None else self.priv.target_epsilon
        if target is None or self.accountant is None or not self.last_events:
            return False
        nxt = Accountant(self.priv.delta, self.z, self.priv.relation)
        nxt.load(self.accountant.state() + [list(e) for e in self.last_events])
        return nxt.epsilon() > target


def _increment(before: list, after: list) -> list:
    """The events that take a restarted accountant from `before` to `after` (same q, the
    count's growth): the next round's spend is assumed to be the same again."""
    if len(after) == 1 and len(before) == 1 and after[0][0] == before[0][0]:
        return [(after[0][0], after[0][1] - before[0][1])]
    return list(after)


def count_noise(ad: Any, sc: Any, n: int) -> float:
    """Adaptive clipping's sigma_b: the given one, else m / 20 (Andrew et al.'s suggestion)
    for the m = clients_per_round the rounds are planned with, fixed for the run (so a round
    with fewer arrivals does not change the privacy split)."""
    if ad.count_noise is not None:
        return float(ad.count_noise)
    cpr = sc.train.clients_per_round
    return (n if cpr == "all" else min(int(cpr), n)) / 20


def state_of(p: "Protect") -> tuple[dict, dict[str, np.ndarray]]:
    """What a checkpoint keeps of an entry's protections: the accountant's events, the
    adaptive clip, the last round's events (JSON) and the per-client counters (arrays)."""
    meta = {"events": [] if p.accountant is None else [list(e) for e in p.accountant.state()],
            "clip": p.clip, "epsilon": p.epsilon,
            "last": [list(e) for e in p.last_events]}
    return meta, {"participations": p.participations.copy(), "dp_steps": p.dp_steps.copy()}


def load_state(p: "Protect", meta: dict, arrays: dict[str, np.ndarray]) -> None:
    p.clip, p.epsilon = float(meta["clip"]), float(meta["epsilon"])
    p.last_events = [(float(q), int(c)) for q, c in meta["last"]]
    if p.adaptive is not None:
        p.adaptive.load({"clip": p.clip})
    if p.accountant is not None:
        p.accountant.load(meta["events"])
    p.participations[:] = np.asarray(arrays["participations"])
    p.dp_steps[:] = np.asarray(arrays["dp_steps"])
