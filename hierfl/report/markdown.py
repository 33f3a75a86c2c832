"""The run report: report.md with figures and the time/bytes-to-accuracy table."""
from __future__ import annotations

import math
import os

from ..io_util import atomic_text
from .plots import standard_figures
from .records import Series, read_run


def _f(v: float, spec: str = ".3f") -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, spec)


def _bytes(v: float) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(v) < 1000:
            return f"{v:.1f} {unit}" if unit != "B" else f"{v:.0f} B"
        v /= 1000
    return f"{v:.1f} PB"


def target_of(series: list[Series], target: float | None) -> float:
    if target is not None:
        return target
    finals = [s.final_acc for s in series if math.isfinite(s.final_acc)]
    return 0.9 * max(finals) if finals else math.nan


def table(series: list[Series], target: float) -> str:
    head = ("| algorithm | final acc | personal acc | sim time (s) | bytes client-edge | "
            "bytes edge-cloud | time to target (s) | bytes to target | rounds to target | note |")
    lines = [head, "|" + "---|" * 10]
    for s in series:
        last = s.rows[-1] if s.rows else {}
        hit = s.first_reaching(target) if math.isfinite(target) else None
        note = f"diverged at round {s.diverged_at}" if s.diverged_at is not None else ""
        lines.append(
            f"| {s.label} | {_f(s.final_acc)} | {_f(s.final_personal)} | "
            f"{_f(last.get('sim_time_s', math.nan), '.1f')} | "
            f"{_bytes(last.get('bytes_client_edge', math.nan))} | "
            f"{_bytes(last.get('bytes_edge_cloud', math.nan))} | "
            f"{_f(hit['sim_time_s'], '.1f') if hit else 'not reached'} | "
            f"{_bytes(hit['bytes_up'] + hit['bytes_down']) if hit else 'not reached'} | "
            f"{int(hit['round']) if hit else '—'} | {note} |")
    return "\n".join(lines)


def write_report(out: str, title: str = "", target: float | None = None,
                 series: list[Series] | None = None) -> str:
    series = series if series is not None else read_run(out)
    if not series:
        raise FileNotFoundError(f"no <algorithm>/metrics.csv under {out}")
    figs = standard_figures(series, out)
    tgt = target_of(series, target)
    parts = [f"# hierfl report{': ' + title if title else ''}", "",
             f"Algorithms: {', '.join(s.label for s in series)}. Target accuracy for the table: "
             f"{_f(tgt)} ({'given' if target is not None else '0.9 x best final accuracy'}).",
             "", "## Time and bytes to accuracy", "", table(series, tgt), "",
             "Bytes count every link a message crosses (a client's upload relayed through its "
             "edge counts on both tiers).", "", "## Figures", ""]
    for key, cap in (("acc_time", "Test accuracy vs simulated wall-clock time"),
                     ("acc_bytes", "Test accuracy vs bytes sent (log)"),
                     ("loss_round", "Training loss vs round")):
        parts += [f"### {cap}", "", f"![{cap}]({os.path.basename(figs[key])})", ""]
    div = [s for s in series if s.diverged_at is not None]
    if div:
        parts += ["## Divergence", ""]
        parts += [f"- {s.label}: non-finite or exploding parameters at round {s.diverged_at}; "
                  "the run of this algorithm was stopped there." for s in div]
    path = os.path.join(out, "report.md")
    atomic_text(path, "\n".join(parts) + "\n")
    return path
