"""The clients' energy attributes, drawn with the rest of the topology: power while computing
and while idle inside a round (node attributes `power_w`, `idle_w`) and the radio's power while
sending and receiving (`tx_w`, `rx_w` on the client's upward link). Each comes from the clients'
defaults (`clients.power_w`, `clients.link.tx_w`, ...) or, with `clients.mix`, from the share's
device and link profiles. Every attribute has its own seed stream, so adding them moves no other
draw; absent, they are 0 (no energy counted). docs/energy.md gives the energy rule."""
from __future__ import annotations

import numpy as np

from .. import seeding
from ..config.limits import MAX_POWER_W
from ..config.topology import TopologySpec
from .dist import draw

NODE_KEYS = ("power_w", "idle_w")     # client node attributes
LINK_KEYS = ("tx_w", "rx_w")          # attributes of a client's upward link (its radio)


def client_powers(spec: TopologySpec, n: int, seed: int,
                  cls_of: np.ndarray | None) -> np.ndarray:
    """(n, 4) float64: power_w, idle_w, tx_w, rx_w of every client; `cls_of[k]` is client k's
    index in clients.mix (None without a mix)."""
    c = spec.clients
    assert c is not None
    out = np.empty((n, 4))
    for j, d in enumerate((c.power_w, c.idle_w, c.link.tx_w, c.link.rx_w)):
        out[:, j] = draw(d, seeding.rng(seed, "topology/client-power", j), n)
    if cls_of is None or not c.mix:
        return out
    for i, s in enumerate(c.mix):
        ks = np.flatnonzero(cls_of == i)
        if s.device is not None:
            dev = spec.profiles.devices[s.device]
            for j, d in enumerate((dev.power_w, dev.idle_w)):
                out[ks, j] = draw(d, seeding.rng(seed, "topology/device-power", i, j), len(ks))
        if s.link is not None:
            ln = spec.profiles.links[s.link]
            for j, d in enumerate((ln.tx_w, ln.rx_w)):
                out[ks, 2 + j] = draw(d, seeding.rng(seed, "topology/link-power", i, j), len(ks))
    return out


def power_problems(g, n: str, parent: str, p) -> None:
    """A graph file's optional energy attributes of node `n` and its upward link: finite watts
    in [0, MAX_POWER_W]."""
    where = [(f"nodes.{n}.{k}", g.nodes[n].get(k)) for k in NODE_KEYS]
    if g.has_edge(n, parent):
        where += [(f"links.{n}->{parent}.{k}", g.edges[n, parent].get(k)) for k in LINK_KEYS]
    watts_problems(p, where)


def bad_powers(power: np.ndarray) -> np.ndarray:
    """(n,) bool: clients whose drawn power_w, idle_w, tx_w or rx_w is not finite watts in
    [0, MAX_POWER_W] (a wide distribution's tail: the scenario's bounds check only its
    parameters)."""
    with np.errstate(invalid="ignore"):
        return (~np.isfinite(power) | (power < 0) | (power > MAX_POWER_W)).any(1)


def drawn_power_problems(p, n: str, parent: str, row: np.ndarray) -> None:
    """The problems of client `n`'s drawn powers (power_problems' wording)."""
    watts_problems(p, [(f"nodes.{n}.{k}", float(v)) for k, v in zip(NODE_KEYS, row[:2])] +
                   [(f"links.{n}->{parent}.{k}", float(v)) for k, v in zip(LINK_KEYS, row[2:])])


def watts_problems(p, where: list) -> None:
    for key, v in where:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            p.add(key, v, "expected a finite number of watts")
        elif not 0 <= v <= MAX_POWER_W:
            p.add(key, v, f"must be in [0, {MAX_POWER_W:g}] W")
