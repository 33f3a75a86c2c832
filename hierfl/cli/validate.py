"""`hierfl validate`: the checks `hierfl run` makes before anything runs, without training
(no torch for the stacked built-in models: the world is checked, not built, by
scenario/checks.check_world), then what it prints: the system, the data, the model, the
schedule and each algorithm entry (with its codecs)."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..algorithms.state_size import guard_predicted_state
from ..config.compress import described
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
             f"  model: {sc.model.name}, {world.n_params} parameters",
             f"  rounds: {sc.train.rounds}, clients per round: {sc.train.clients_per_round}"]
    for e in sc.algorithms:
        codec = described(dataclasses.asdict(e.compress)) if e.compress is not None else ""
        lines.append(f"  algorithm {e.label}: {e.name} {e.params}" +
                     (f"; compress {codec}" if codec else ""))
    return lines
