"""`hierfl validate`: the checks `hierfl run` makes before anything runs, without training
(no torch for the stacked built-in models: the world is checked, not built, by
scenario/checks.check_world), then what it prints: the system, the data, the model, the
schedule and each algorithm entry (with its codecs and what it overrides of train.local,
scenario.stragglers, train.round and the topology's mobility)."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

from ..algorithms.state_size import guard_predicted_state
from ..config.compress import described
from ..config.errors import ScenarioError
from ..scenario.checks import check_world
from ..scenario.load import load


def cmd_validate(args: argparse.Namespace) -> int:
    sc = load(args.scenario)
    world = check_world(sc)
    guard_predicted_state(sc, world.topo.n_clients, world.n_params)   # as run, before building
    if sc.train.executor.device not in ("auto", "cpu"):     # cuda without CUDA: exit 2
        from ..exec.device import resolve       # torch: only a GPU device is resolved

        resolve(sc.train.executor.device, sc.file)
    print("\n".join(validated(sc, world, args.scenario)))
    return 0


def tiers(t) -> str:
    """The aggregators per tier, from the top: '2 regional + 6 edge (2 aggregator tiers)'."""
    by_depth: dict[int, list[str]] = {}
    for n in t.children:        # the nodes with children (built trees store no client's)
        d = t.depth[n]
        if 0 < d and (t.children[n] or not t.is_client(n)):
            by_depth.setdefault(d, []).append(n)
    parts = []
    for d in sorted(by_depth):
        names = sorted({n.rstrip("0123456789") or n for n in by_depth[d]})
        parts.append(f"{len(by_depth[d])} {'/'.join(names)}")
    if len(parts) == 1:
        return f"{parts[0]} aggregator{'s' if len(by_depth[min(by_depth)]) != 1 else ''}"
    return " + ".join(parts) + f" ({len(parts)} aggregator tiers, top first)"


def validated(sc: Any, world: Any, path: str) -> list[str]:
    """The lines `hierfl validate` prints for scenario `sc` (read from `path`) and its checked
    world (scenario/checks.WorldFacts)."""
    t, c = world.topo, world.data.counts
    lines = [f"scenario {sc.name!r} ({path}) is valid",
             f"  topology: 1 cloud, {tiers(t)}, {t.n_clients} clients "
             f"(client speed {t.client_flops.min():.3g}..{t.client_flops.max():.3g} FLOP/s)",
             f"  data: {sc.data.name}, {int(c.sum())} training rows ({c.min()}..{c.max()} per "
             f"client), {len(world.data.x_test)} test rows, dim {world.data.dim}",
             *partition_line(sc, world.data),
             f"  model: {sc.model.name}, {world.n_params} parameters",
             f"  rounds: {sc.train.rounds}, clients per round: {sc.train.clients_per_round}"]
    for e in sc.algorithms:
        codec = described(dataclasses.asdict(e.compress)) if e.compress is not None else ""
        over = overrides(e, sc)
        lines.append(f"  algorithm {e.label}: {e.name} {e.params}" +
                     (f"; compress {codec}" if codec else "") +
                     (f"; overrides {over}" if over else "") +
                     protections(e, sc, t))
    return lines


def partition_line(sc: Any, data: Any) -> list[str]:
    """A partitioned set's split: its kind with the keys that kind reads, the rows per client
    and the distinct labels per client, min..max ([] for a set without partition:)."""
    from ..config.schema import Partitioned
    from ..data.check import PARTITION_READS
    from ..data.partitions import spread

    if not isinstance(sc.data, Partitioned) or not data.n_classes:
        return []
    p = sc.data.partition
    keys = [k for k in PARTITION_READS.get(p.kind, ()) if getattr(p, k) is not None]
    if p.kind == "quantity_skew":
        keys = [k for k in keys if k != {"lognormal": "alpha", "power_law": "sigma"}[p.sizes]]
    lo, hi, llo, lhi = spread(np.asarray(data.y), np.asarray(data.offsets))
    said = ", ".join(f"{k}={getattr(p, k)}" for k in keys)
    sh = getattr(sc.data, "shift", None)
    skew = "" if sh is None or not (sh.rotate or sh.noise) else \
        f"; feature skew per {sh.by}: rotate {sh.rotate:g} degrees, noise {sh.noise:g}"
    return [f"  partition: {p.kind}" + (f" ({said})" if said else "") +
            f": {lo}..{hi} rows and {llo}..{lhi} labels per client" + skew]


def protections(e: Any, sc: Any, t: Any) -> str:
    """An entry's privacy, rules, attack (with the attackers it draws) and secure aggregation,
    as the summary line's tail ('' when it has none); an attack the system cannot hold (a
    device class no client has) is refused here as the run would refuse it."""
    out = []
    for key in ("privacy", "aggregate", "secure_aggregation"):
        v = getattr(e, key, None)
        if v is not None:
            out.append(f"{key} {_short(v)}")
    if getattr(e, "attack", None) is not None:
        from ..robust.attacks import attackers      # numpy only; torch is loaded by now
        try:
            bad = attackers(e.attack, t.n_clients, sc.seed, t.device_class)
        except ValueError as exc:
            key = f"algorithms[{sc.algorithms.index(e)}].attack" if e.attack_own else "attack"
            raise ScenarioError.one(sc.file, key, _short(e.attack), str(exc)) from None
        ids = [int(k) for k in bad.nonzero()[0]]
        shown = ", ".join(map(str, ids[:10])) + (" ..." if len(ids) > 10 else "")
        out.append(f"attack {_short(e.attack)}: {len(ids)} attacker(s) [{shown}]")
    return "".join(f"; {x}" for x in out)


def _short(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "{" + ", ".join(f"{f.name}={_short(getattr(value, f.name))}"
                               for f in dataclasses.fields(value)
                               if getattr(value, f.name) is not None) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def overrides(e: Any, sc: Any) -> str:
    """What entry `e` sets differently from the scenario's shared settings: 'local: lr=50.0
    (train.local: 0.3), stragglers {...}', or ''."""
    parts = []
    local = [f"{f.name}={_short(getattr(e.local, f.name))} (train.local: "
             f"{_short(getattr(sc.train.local, f.name))})"
             for f in dataclasses.fields(e.local)
             if getattr(e.local, f.name) != getattr(sc.train.local, f.name)]
    if local:
        parts.append("local: " + ", ".join(local))
    for key in ("stragglers", "round", "mobility"):
        value = getattr(e, key)
        if value is not None:
            parts.append(f"{key} {_short(value)}")
    return "; ".join(parts)
