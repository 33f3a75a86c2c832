"""The report's breakdown by device and link class (profiles): per algorithm and class, the
clients, client-rounds, mean local steps, mean compute and upload time, bytes uploaded and the
share of client-rounds not aggregated. Shown only when the topology gives classes
(`clients.mix`)."""
from __future__ import annotations

import math

from ..outputs.classes import read_class_totals
from .model import Section
from .stats import Group
from .tables import num, size

HEAD = ["algorithm", "class (device / link)", "clients", "client-rounds", "mean steps",
        "mean compute (s)", "mean upload (s)", "bytes uploaded", "not aggregated"]
TEXT = ("Client-rounds are (client, aggregation round) pairs of clients.csv, pooled over seeds. "
        "Upload time is measured on the client-rounds whose upload arrived; bytes uploaded sum "
        "every client upload (each counted once, on its first link); not aggregated: the share "
        "of client-rounds dropped (late, failed or discarded).")


def class_rows(groups: list[Group]) -> list[list[str]]:
    rows = []
    for g in groups:
        totals = read_class_totals([s.folder for s in g.members])
        for label, t in sorted(totals.items()):
            dropped = t.mean("dropped")
            rows.append([g.label, label, str(len(t.clients)), str(t.rounds),
                         num(t.mean("steps"), ".1f"), num(t.mean("compute_s"), ".3g"),
                         num(t.mean("upload_s"), ".3g"),
                         size(t.sums["up_bytes"]) if t.counts["up_bytes"] else "—",
                         f"{100 * dropped:.1f} %" if math.isfinite(dropped) else "—"])
    return rows


def fill_classes(sec: Section, groups: list[Group]) -> None:
    """The section's table (left empty, so not shown, without classes)."""
    rows = class_rows(groups)
    if rows:
        sec.head, sec.rows, sec.text = HEAD, rows, TEXT
