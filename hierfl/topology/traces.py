"""Measured traces as CSV files (never pickles): each row is checked, and a bad one is a
`ScenarioError` naming the file, the line, the column and the reason (exit 2).

- availability: `client,start_s,end_s` — the intervals in which a client is available; a
  client's intervals come in increasing time and do not overlap; a client with no row is never
  available.

A client is named by its index (0 .. clients-1) or its node name (`client7`)."""
from __future__ import annotations

import csv
import hashlib
import math
import os

import numpy as np

from ..config.errors import Problem, ScenarioError
from ..config.paths import not_a_file
from ..config.limits import MAX_BYTES

MAX_TRACE_BYTES = 20 * MAX_BYTES        # a trace of a million clients is a few hundred MB no more


class TraceRows:
    """The rows of one trace file, with the checks every trace shares."""

    def __init__(self, path: str, key: str, columns: tuple[str, ...], more: bool = False):
        """`more`: the header may name further columns (the caller checks them); a line
        never holds more cells than its header names (a cell was dropped silently)."""
        self.path, self.key, self.columns = path, key, columns
        kind = not_a_file(path)
        if kind:
            raise ScenarioError.one(path, key, path, f"the trace file is {kind}, not a "
                                    "regular file")
        if not os.path.isfile(path):
            raise ScenarioError.one(path, key, path, "trace file not found")
        if os.path.getsize(path) > MAX_TRACE_BYTES:
            raise ScenarioError.one(path, key, path,
                                    f"trace file larger than {MAX_TRACE_BYTES} bytes")
        with open(path, encoding="utf-8", newline="") as fh:
            try:
                self.rows = list(csv.reader(fh))
            except (csv.Error, UnicodeDecodeError) as e:
                raise ScenarioError.one(path, key, path, f"not a readable CSV file: {e}")
        head = [c.strip() for c in self.rows[0]] if self.rows else []
        if head[:len(columns)] != list(columns):
            raise ScenarioError([Problem(path, "header", ",".join(head),
                                         f"the first line must be {','.join(columns)}", 1)])
        if not more and len(head) > len(columns):
            raise ScenarioError([Problem(path, "header", ",".join(head),
                                         f"the first line must be {','.join(columns)} (no "
                                         "further columns)", 1)])
        self.body = [(i, r) for i, r in enumerate(self.rows[1:], 2) if any(c.strip() for c in r)]
        for i, r in self.body:
            if len(r) > len(head) and any(c.strip() for c in r[len(head):]):
                raise self.fail(i, "line", ",".join(r), f"{len(r)} columns, more than the "
                                f"header's {len(head)} ({','.join(head)}): an extra column")

    def fail(self, line: int, column: str, value: object, why: str) -> ScenarioError:
        return ScenarioError([Problem(self.path, column, value, why, line)])

    def number(self, line: int, row: list[str], j: int, *, lo: float = 0.0) -> float:
        col = self.columns[j]
        if j >= len(row):
            raise self.fail(line, col, None, f"missing: each line has {','.join(self.columns)}")
        try:
            v = float(row[j])
        except ValueError:
            raise self.fail(line, col, row[j], "expected a number") from None
        if not math.isfinite(v) or v < lo:
            raise self.fail(line, col, row[j], f"expected a finite number >= {lo:g}")
        return v

    def client(self, line: int, row: list[str], names: dict[str, int], n: int) -> int:
        text = row[0].strip() if row else ""
        k = names.get(text)
        if k is None and text.isdigit():
            k = int(text)
        if k is None or not 0 <= k < n:
            raise self.fail(line, "client", text,
                            f"unknown client: give an index 0..{n - 1} or a name like client0")
        return k


def digest(path: str) -> str:
    """sha256 of a trace file's bytes (for the resume fingerprint)."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:32]


def read_availability(path: str, clients: list[str],
                      key: str = "availability.path") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """client index -> (starts, ends) of its availability intervals, checked."""
    t = TraceRows(path, key, ("client", "start_s", "end_s"))
    names = {c: k for k, c in enumerate(clients)}
    spans: dict[int, list[tuple[float, float]]] = {}
    for line, row in t.body:
        k = t.client(line, row, names, len(clients))
        a, b = t.number(line, row, 1), t.number(line, row, 2)
        if b <= a:
            raise t.fail(line, "end_s", row[2], f"an interval ends after it starts ({row[1]})")
        own = spans.setdefault(k, [])
        if own and a < own[-1][0]:
            raise t.fail(line, "start_s", row[1], f"unsorted: client {row[0].strip()}'s "
                         f"intervals must come in increasing time (one starts at {own[-1][0]:g})")
        if own and a < own[-1][1]:
            raise t.fail(line, "start_s", row[1], f"overlaps client {row[0].strip()}'s interval "
                         f"{own[-1][0]:g}..{own[-1][1]:g}")
        own.append((a, b))
    return {k: (np.array([s for s, _ in v]), np.array([e for _, e in v])) for k, v in spans.items()}


DEVICE_COLUMNS = ("client", "compute_flops", "uplink_Bps", "downlink_Bps", "latency_s")


def read_devices(path: str, key: str = "clients.trace") -> dict[str, np.ndarray | list[str]]:
    """Per client (ids 0..N-1, each once, in any order): compute_flops, uplink_Bps,
    downlink_Bps, latency_s and, where the columns `device` / `link` follow, the class names
    (clients.csv, the report's breakdown by class)."""
    t = TraceRows(path, key, DEVICE_COLUMNS, more=True)
    head = [c.strip() for c in t.rows[0]]
    extra = head[len(DEVICE_COLUMNS):]
    if extra not in ([], ["device"], ["device", "link"]):
        raise ScenarioError([Problem(path, "header", ",".join(head), "after "
                                     f"{','.join(DEVICE_COLUMNS)} only device and link may "
                                     "follow", 1)])
    n = len(t.body)
    if n == 0:
        raise ScenarioError.one(path, key, path, "the trace lists no client")
    vals = np.full((n, 4), np.nan)
    names: list[list[str]] = [["", ""] for _ in range(n)]
    seen = np.zeros(n, dtype=bool)
    for line, row in t.body:
        k = t.client(line, row, {}, n)
        if seen[k]:
            raise t.fail(line, "client", row[0], "listed twice")
        seen[k] = True
        for j in range(1, 5):
            vals[k, j - 1] = t.number(line, row, j, lo=0.0)
            if j < 4 and vals[k, j - 1] <= 0:
                raise t.fail(line, DEVICE_COLUMNS[j], row[j], "expected a number > 0")
        for j, name in enumerate(extra):
            names[k][j] = row[5 + j].strip() if 5 + j < len(row) else ""
    return {"compute_flops": vals[:, 0], "uplink_Bps": vals[:, 1], "downlink_Bps": vals[:, 2],
            "latency_s": vals[:, 3], "device": [a for a, _ in names],
            "link": [b for _, b in names]}


def device_rows(path: str) -> int:
    """How many clients a devices trace lists (checked in full)."""
    return len(read_devices(path)["latency_s"])
