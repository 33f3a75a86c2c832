"""An algorithm entry's privacy, robustness, attack and secure aggregation keys (issue 43): read
and validated with the rest of the scenario, and the combinations that have no meaning refused
with the reason (exit 2, the key named). Torch-free: `hierfl validate` reads it.

    privacy:            privacy/spec.PrivacySpec       (docs/privacy.md)
    aggregate:          robust/spec.AggregateSpec      (docs/robustness.md)
    attack:             robust/spec.AttackSpec; the scenario's `attack:` is every entry's
                        unless the entry gives its own ({kind: none} turns it off)
    secure_aggregation: secagg/spec.SecAggSpec         (docs/secure-aggregation.md)
"""
from __future__ import annotations

from typing import Any

from ..config.errors import Problems
from ..config.fields import convert, is_fail
from ..privacy.spec import PrivacySpec
from ..robust.spec import AggregateSpec, AttackSpec, check as rule_problem
from ..secagg.spec import SecAggSpec

KEYS = ("privacy", "aggregate", "attack", "secure_aggregation")
_SPECS = {"privacy": PrivacySpec, "aggregate": AggregateSpec, "attack": AttackSpec,
          "secure_aggregation": SecAggSpec}

# the asynchronous round policies (a round of one update has no aggregate to protect)
_ASYNC = ("fedasync", "fedbuff")


def scenario_attack(raw: dict, p: Problems) -> Any:
    """The scenario-level `attack:` (None where absent or kind none; a failure sentinel where
    malformed, reported)."""
    if raw.get("attack") is None:
        return None
    out = convert(AttackSpec, raw["attack"], "attack", p)
    return None if not is_fail(out) and out.kind == "none" else out


def entry_keys(a: dict, key: str, p: Problems, attack: Any) -> dict | None:
    """An entry's four specs by key (its own attack: over the scenario's `attack`), or None
    where one is malformed (reported)."""
    out: dict[str, Any] = {}
    for name, cls in _SPECS.items():
        if name in a and a[name] is not None:
            out[name] = convert(cls, a[name], f"{key}.{name}", p)
        else:
            out[name] = None
    if any(is_fail(v) for v in out.values()):
        return None
    out["attack_own"] = "attack" in a
    if "attack" not in a:
        out["attack"] = None if is_fail(attack) else attack
    elif out["attack"] is not None and out["attack"].kind == "none":
        out["attack"] = None
    agg = out["aggregate"]
    if agg is not None and agg.cloud.is_mean and agg.edge.is_mean:
        out["aggregate"] = None             # means everywhere: today's aggregation, unchanged
    return out


def entry_problems(p: Problems, i: int, e: Any, caps: Any, train: Any, own: dict,
                   n_clients: int | None = None) -> None:
    """The combinations of entry i's keys with its algorithm, its round policies and the
    schedule that are refused. `own`: the keys the entry itself gave (where a problem is
    named: the entry's key, else the scenario's `attack`)."""
    key = f"algorithms[{i}]"
    given = {k: getattr(e, k) for k in KEYS if getattr(e, k) is not None}
    if not given:
        return

    def where(k: str) -> str:
        return f"{key}.{k}" if k in own or k != "attack" else "attack"

    def raw(k: str) -> Any:
        return own.get(k, "...")

    att = given.get("attack")
    if att is not None and att.clients is not None and n_clients:
        outside = [k for k in att.clients if not 0 <= k < n_clients]
        if outside:
            p.add(f"{where('attack')}.clients", outside, f"not clients of this system (ids "
                  f"0..{n_clients - 1})")
    touches = [k for k in ("privacy", "aggregate", "secure_aggregation") if k in given]
    if touches and not caps.robust:
        for k in touches:
            p.add(where(k), raw(k), f"{e.name} ({key}) aggregates its own way (not a weighted "
                  "mean of the model uploads); privacy:, aggregate: and secure_aggregation: "
                  "apply to fedavg, fedprox, hierfavg, fedavgm, fedadam/fedyogi/fedadagrad, "
                  "fedbn and moon")
        return
    policy = e.round_policy(train).policy
    edge_policy = train.edge_round.policy if caps.hierarchical else "sync"
    if policy in _ASYNC or edge_policy in _ASYNC:
        which = "train.round" if policy in _ASYNC else "train.edge_round"
        for k in given:
            p.add(where(k), raw(k), f"does not apply to an asynchronous policy ({which} "
                  f"{policy if policy in _ASYNC else edge_policy!r}): each update is mixed in "
                  "on its own, so there is no round of updates to aggregate, attack or protect")
        return
    agg, priv, sa = e.aggregate, e.privacy, e.secure_aggregation
    if agg is not None and n_clients and not caps.hierarchical:     # the cloud's rows: known
        cpr = train.clients_per_round
        m = n_clients if cpr == "all" else min(int(cpr), n_clients)
        why = rule_problem(agg.cloud, m)
        if why:
            p.add(f"{key}.aggregate.cloud", own.get("aggregate", {}).get("cloud", "...")
                  if isinstance(own.get("aggregate"), dict) else "...",
                  f"{why} (train.clients_per_round)")
    if agg is not None and not caps.hierarchical and not agg.edge.is_mean:
        p.add(f"{key}.aggregate.edge.kind", agg.edge.kind, f"{e.name} is flat: its edges relay "
              "(or pre-aggregate linearly); its rule is aggregate.cloud")
    if priv is not None and priv.kind == "sample_level":
        why = None
        if not caps.optimizers:
            why = f"{e.name}'s local program is not plain gradient steps on F_k"
        elif e.local.solver is not None:
            why = f"train.local.solver {e.local.solver!r} takes its own steps"
        elif e.local.gamma is not None:
            why = "gamma stops on the true gradient's norm would release it unprotected"
        if why:
            p.add(f"{key}.privacy.kind", "sample_level", f"DP-SGD clips and noises each "
                  f"sample's gradient inside the local steps; {why}")
    if priv is not None and priv.kind == "client_level":
        rule = None if agg is None or priv.noise_at == "client" else \
            (agg.edge if priv.noise_at == "edge" else agg.cloud)
        if rule is not None and not rule.is_mean:
            p.add(f"{key}.aggregate.{priv.noise_at}.kind", rule.kind, f"privacy noise is added "
                  f"at the {priv.noise_at} with the mean's sensitivity (C/m); {rule.kind!r} "
                  "there has another, which the accountant does not know: put the noise at "
                  "the clients (noise_at: client) or the rule at the other tier")
        if priv.noise_at == "cloud" and caps.hierarchical:
            p.add(f"{key}.privacy.noise_at", "cloud", f"{e.name} is hierarchical: the cloud "
                  "combines edge models, whose change by one client is not bounded by its "
                  "clipped update; add the noise where the clients' updates meet (noise_at: "
                  "edge), or run a flat algorithm (fedavg) for noise at the cloud")
        if priv.noise_at == "edge" and not caps.hierarchical and not train.edge_preaggregate:
            p.add(f"{key}.privacy.noise_at", "edge", f"{e.name} is flat: its edges relay each "
                  "update unless they pre-aggregate; set train.edge_preaggregate: true (each "
                  "edge adds noise to its partial sum) or add the noise at the cloud")
        if priv.adaptive is not None and priv.noise_at != "cloud":
            p.add(f"{key}.privacy.adaptive", "...", "adaptive clipping moves one clip from the "
                  "noised count of unclipped updates where all of them meet: noise_at: cloud")
        ad, z = priv.adaptive, priv.noise_multiplier
        if ad is not None and ad.count_noise is None and z and n_clients:
            cpr = train.clients_per_round
            m = n_clients if cpr == "all" else min(int(cpr), n_clients)
            if not 2 * (m / 20) > z:
                p.add(f"{key}.privacy.adaptive.count_noise", None, f"its default m / 20 = "
                      f"{m / 20:g} (m = {m} clients per round) must exceed noise_multiplier "
                      f"/ 2 = {z / 2:g}: the update keeps multiplier (z^-2 - (2 sigma_b)^-2)"
                      "^-1/2; give a larger count_noise")
        if priv.noise_at == "edge" and not caps.hierarchical and agg is not None:
            p.add(f"{key}.aggregate.cloud.kind", agg.cloud.kind, "a robust cloud rule needs "
                  "every client's update; with noise_at: edge the edges send noisy partial sums")
    if sa is not None:
        tier_rule = None if agg is None else (agg.edge if sa.at == "edge" else agg.cloud)
        if tier_rule is not None and not tier_rule.is_mean:
            p.add(f"{key}.secure_aggregation.at", sa.at, f"the {sa.at} rule "
                  f"{tier_rule.kind!r} needs each update, which secure aggregation hides (the "
                  "server learns only their sum)")
        comp = e.compress
        if comp is not None and comp.up.active:
            p.add(f"{key}.secure_aggregation", raw("secure_aggregation"), "beside compress.up "
                  f"{comp.up.kind!r}: masked inputs are dense field elements (a mask makes "
                  "every entry random), so the upload cannot be sparsified or quantised")
        if sa.at == "cloud" and caps.hierarchical:
            p.add(f"{key}.secure_aggregation.at", "cloud", f"{e.name} is hierarchical: its "
                  "clients' uploads meet at the edges; run the protocol there (at: edge)")
        if sa.at == "edge" and not caps.hierarchical and not train.edge_preaggregate:
            p.add(f"{key}.secure_aggregation.at", "edge", f"{e.name} is flat: its edges sum "
                  "updates only with train.edge_preaggregate: true")
