"""Measured client moves as a CSV file (`mobility: {kind: trace, path: moves.csv}`):
`time_s,client,node` — at time_s the client moves under node, a bottom-tier aggregator named as
in the topology (`edge3`). Lines come in non-decreasing time; a client is named by its index or
its node name (`client7`); before its first line a client is under the edge the topology gives
it. A line that moves a client to the edge it is already under is no handover (skipped). Each
line is checked: a bad one is a ScenarioError naming the file, the line and the reason."""
from __future__ import annotations

import numpy as np

from .traces import TraceRows

MOVE_COLUMNS = ("time_s", "client", "node")


def read_moves(path: str, clients: list[str], edges: list[str], home: list[int],
               key: str = "mobility.path") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """client index -> (times, edge ids after each move), checked. `home`: each client's edge
    id in the topology (where it is before its first move)."""
    t = TraceRows(path, key, MOVE_COLUMNS)
    names = {c: k for k, c in enumerate(clients)}
    eid = {e: i for i, e in enumerate(edges)}
    moves: dict[int, list[tuple[float, int]]] = {}
    last = 0.0
    seen: dict[int, float] = {}
    for line, row in t.body:
        when = t.number(line, row, 0)
        if when < last:
            raise t.fail(line, "time_s", row[0], f"unsorted: lines must come in non-decreasing "
                         f"time (the line before is at {last:g})")
        last = when
        k = t.client(line, row[1:], names, len(clients))
        node = row[2].strip() if len(row) > 2 else ""
        if node not in eid:
            shown = ", ".join(edges[:4]) + (", ..." if len(edges) > 4 else "")
            raise t.fail(line, "node", node, f"unknown node: give a bottom-tier aggregator of "
                         f"the topology ({shown})")
        own = moves.setdefault(k, [])
        if seen.get(k) == when:             # any two lines of a client at one time, kept or not
            raise t.fail(line, "time_s", row[0], f"client {row[1].strip()} moves twice at "
                         f"{when:g} s")
        seen[k] = when
        where = own[-1][1] if own else home[k]
        if eid[node] != where:
            own.append((when, eid[node]))
    return {k: (np.array([a for a, _ in v], float), np.array([b for _, b in v], np.int64))
            for k, v in moves.items() if v}
