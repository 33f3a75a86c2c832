"""Fills the report model from runs read back from their files: the set-up facts, the table, the
figures of every section (PNG + SVG, drawn by plots/) and the notes on divergence and failures.
An optional figure that cannot be drawn becomes a note, not a missing report."""
from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable

import numpy as np

from ..outputs import Run, Series, concat_clients, read_clients
from ..outputs.cells import keeping_layouts
from ..outputs.manifest import read_manifest
from . import plots
from .plots import background
from .plots.background import background_saves
from . import timeline as tline
from .breakdown import add_breakdowns
from .energy import add_energy
from .fairness import add_fairness
from .protection import add_privacy, add_robustness, recorded_entries
from .model import NO_NOTES, Figure, Report, Section, sections, summary_rows
from .stats import Group, add_totals, check_options, groups_of, target_of, target_text
from .tables import TABLE_NOTE, bounds_text, num, size, table_rows, task_of


def _clients(folder: str) -> dict[str, np.ndarray]:
    """read_clients, once per report for each file (the figures and the notes both need it)."""
    p = os.path.join(folder, "clients.csv")
    st = os.stat(p) if os.path.isfile(p) else None
    return _read_clients(folder, st and (st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _read_clients(folder: str, stamp: object) -> dict[str, np.ndarray]:
    return read_clients(folder)


AHEAD_BYTES = 4 << 20   # a trace.csv read aside from this size (~0.1 s of reading; a fork less)


def _read_ahead(groups: list[Group], round_: int) -> list[background.Ahead]:
    """Each group's timeline round, read aside when its trace.csv is large. (clients.csv is
    read here: read aside, the class and energy tables scanned it again, and at W9 the report,
    CPU-bound on 2 cores, was no faster.)"""
    out = []
    for g in groups:
        folder = g.members[0].folder
        trace = os.path.join(folder, "trace.csv")
        large = os.path.isfile(trace) and os.path.getsize(trace) >= AHEAD_BYTES
        out.append(background.ahead(tline.load_fields, folder, round_) if large else
                   background.Ahead(tline.load_fields, (folder, round_)))
    return out


def _timeline(job: background.Ahead) -> tline.Timeline | None:
    return tline.from_fields(job.result())


def _safe(notes: list[str], what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Optional figures: a failure becomes a note in the report instead of no report."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        notes.append(f"The {what} figure could not be drawn: {type(exc).__name__}: {exc}")
        return None


def _add(sec: Section, path: str | None, caption: str, planned: str | None = None) -> None:
    """Add a drawn figure; a figure not drawn (nothing to show) leaves no stale file of an
    earlier report at its planned path."""
    if path:
        sec.figures.append(Figure(path, caption))
    elif planned:
        _remove_figure(planned)


def _remove_figure(png: str) -> None:
    background.forget(png)              # a child may still be writing it
    for f in (png, os.path.splitext(png)[0] + ".svg"):
        if os.path.isfile(f):
            os.unlink(f)


def _gamma_targets(runs: list[Run]) -> dict[str, float]:
    out = {}
    for r in runs:
        for a in ((r.summary or {}).get("scenario") or {}).get("algorithms") or []:
            if isinstance(a, dict) and isinstance(a.get("local"), dict) and \
                    a["local"].get("gamma") is not None:
                out[a.get("label") or a.get("name")] = float(a["local"]["gamma"])
    return out


def _scenario(sec: Section, summary: dict, p: Callable[[str], str], notes: list[str]) -> None:
    for key, fn, cap in (("topology", plots.topology_figure, "The simulated system"),
                         ("devices", plots.devices_figure,
                          "Device speeds and links, as drawn from the seed"),
                         ("data_split", plots.data_figure, "Data split over the clients")):
        _add(sec, _safe(notes, key, fn, summary, p(f"{key}.png")), cap)


def _curves(sec: Section, groups: list[Group], colours: dict[str, str], personal: str,
            p: Callable[[str], str], notes: list[str]) -> None:
    what = "Test MSE" if task_of(groups) == "regression" else "Test accuracy"
    _add(sec, plots.accuracy_figure(groups, colours, "sim_time_s", "simulated time (s)",
                                    p("accuracy_vs_time.png")),
         f"{what} vs simulated wall-clock time" + personal)
    _add(sec, plots.accuracy_figure(groups, colours, "bytes_total",
                                    "bytes sent, all links, both directions (B, log)",
                                    p("accuracy_vs_bytes.png"), logx=True),
         f"{what} vs total bytes sent" + personal)
    _add(sec, plots.tier_figure(groups, colours, p("accuracy_vs_bytes_tier.png")),
         f"{what} vs bytes per tier")
    _add(sec, plots.loss_figure(groups, colours, p("loss_vs_round.png")),
         "Training loss vs round")
    _add(sec, _safe(notes, "bytes per tier", plots.tier_bytes_figure, groups, colours,
                    p("bytes_per_tier.png")), "Bytes over the run, per tier and direction",
         p("bytes_per_tier.png"))
    _add(sec, _safe(notes, "dissimilarity", plots.dissimilarity_figure, groups, colours,
                    p("dissimilarity.png")),
         "Gradient dissimilarity of the global model "
         "(FedProx's B(w), left; variance of client gradients, right)", p("dissimilarity.png"))


def _stragglers(sec: Section, groups: list[Group], colours: dict[str, str], runs: list[Run],
                p: Callable[[str], str], notes: list[str]) -> None:
    clients = {g.label: concat_clients([_clients(s.folder) for s in g.members])
               for g in groups}
    summary = runs[0].summary if len(runs) == 1 else None
    targets = _gamma_targets(runs)
    for key, fn, args, cap in (
            ("gamma", plots.gamma_figure, (groups, colours, clients, targets),
             "Achieved γ per client and round (box: quartiles, whiskers: 5–95 %, ◇: mean" +
             ("; dashed: target)" if targets else ")")),
            ("steps_vs_budget", plots.steps_figure, (groups, colours, clients),
             "Local steps done vs step budget (area: number of client-rounds; ×: stragglers)"),
            ("steps_vs_speed", plots.steps_speed_figure, (groups, colours, clients, summary),
             "Local steps done per round vs device speed (one point per client)"),
            ("stragglers", plots.stragglers_figure, (groups, colours),
             "Stragglers and clients not aggregated, per cloud round")):
        _add(sec, _safe(notes, key, fn, *args, p(f"{key}.png")), cap, p(f"{key}.png"))


def _timelines(sec: Section, groups: list[Group], round_: int, p: Callable[[str], str],
               notes: list[str], loading: list[background.Ahead]) -> None:
    """The timeline of each group's first run (`loading`: their `tline.load_fields`, started
    ahead)."""
    folder = os.path.dirname(p("x")) or "."
    for f in os.listdir(folder) if os.path.isdir(folder) else []:   # an earlier report's
        if f.startswith("timeline_") and f.endswith((".png", ".svg")):
            os.unlink(p(f))
    used: set[str] = set()
    for g, load in zip(groups, loading):
        s = g.members[0]
        tl = _safe(notes, f"timeline ({g.label})", _timeline, load)
        if tl is None or not tl.count:
            if os.path.isfile(os.path.join(s.folder, "trace.csv")):
                notes.append(f"{g.label}: trace.csv has no events of cloud round "
                             f"{round_}; no timeline drawn.")
            continue
        name = stem = "timeline_" + "".join(c if c.isalnum() or c in "-_." else "_"
                                            for c in g.label)
        n = 1
        while name.lower() in used:          # "odd dir/x" and "odd_dir/x": one file each
            n += 1                           # (and on a case-blind file system)
            name = f"{stem}-{n}"
        used.add(name.lower())
        path = _safe(notes, f"timeline ({g.label})", plots.timeline_figure, tl, g.label,
                     p(name + ".png"))
        if path:
            seed = f", seed {s.seed}" if g.n > 1 else ""
            _add(sec, path, f"{g.label}{seed}: cloud round {round_}, {tl.end - tl.start:.3g} s")
            if tl.in_flight:
                notes.append(f"{g.label}: {tl.in_flight} transfer(s) of round {round_} "
                             "were still on the wire when the round closed (drawn to its end).")


def _series_notes(s: Series, who: str, planned: Any, finished: bool = False,
                  budget: Any = None) -> list[str]:
    """Divergence, clients not aggregated, stragglers, wasted compute and bytes, a short run
    (`budget`: the entry's privacy.target_epsilon, which ends a run early)."""
    notes = []
    if s.diverged_at is not None:
        notes.append(f"{who}: non-finite or exploding parameters at round {s.diverged_at}; "
                     "this algorithm's run was stopped there (the others continued).")
    failed = [r.get("failed", 0) for r in s.rows if math.isfinite(r.get("failed", 0))]
    if sum(failed) > 0:
        notes.append(f"{who}: {int(sum(failed))} selected client-rounds were not "
                     f"aggregated (dropped, late or failed) in {sum(f > 0 for f in failed)}"
                     f" of {len(failed) - 1} rounds.")
    strag = [r.get("stragglers", 0) for r in s.rows if math.isfinite(r.get("stragglers", 0))]
    if sum(strag) > 0:
        notes.append(f"{who}: {int(sum(strag))} straggler client-rounds.")
    c = _clients(s.folder)
    if "dropped" in c and "compute_s" in c:
        lost = float(np.nansum(c["compute_s"][c["dropped"] > 0.5]))
        if lost > 0:
            notes.append(f"{who}: {lost:.3g} s of client compute did not reach an "
                         "aggregator (wasted compute, summed over clients).")
    wasted = s.last("bytes_wasted")
    if math.isfinite(wasted) and wasted > 0:
        notes.append(f"{who}: {size(wasted)} were sent but not used by any aggregator.")
    last = int(s.rows[-1]["round"]) if s.rows else 0
    if isinstance(planned, int) and last < planned and s.diverged_at is None:
        spent = s.last("epsilon")
        ended = (f"(the run ended there: the next round would have spent more than its "
                 f"privacy budget, target_epsilon {budget:g}; ε {spent:.3g} spent)"
                 if isinstance(budget, (int, float)) and math.isfinite(spent) else
                 "(the run ended there: train.duration_s, or no client available again)")
        notes.append(f"{who}: metrics end at round {last} of {planned} " + (
            ended if finished else "(interrupted or still running)") + ".")
    return notes


def cut_short(runs: list[Run]) -> dict[tuple[str, str], str]:
    """(run, label) -> why, for every series of a run whose run.json says it did not finish
    (interrupted, or still running) that ends before the planned rounds without diverging:
    its numbers are those of a partial run ("interrupted at round 12 of 400, run folder X")."""
    out = {}
    for r in runs:
        m = read_manifest(r.path)
        planned = ((r.summary or {}).get("scenario") or {}).get("train", {}).get("rounds")
        if m is None or m.get("finished") or not isinstance(planned, int):
            continue
        for s in r.series:
            last = int(s.rows[-1]["round"]) if s.rows else 0
            if last < planned and s.diverged_at is None:
                out[(s.run, s.label)] = (f"interrupted at round {last} of {planned} (or still "
                                         f"running): run folder {r.path}")
    return out


def _failure_notes(groups: list[Group], runs: list[Run]) -> list[str]:
    planned = {r.name: ((r.summary or {}).get("scenario") or {}).get("train", {}).get("rounds")
               for r in runs}
    finished = {r.name: bool((read_manifest(r.path) or {}).get("finished")) for r in runs}
    entries = recorded_entries(runs)

    def budget(s: Series) -> Any:
        priv = (entries.get((s.run, s.label)) or {}).get("privacy")
        return priv.get("target_epsilon") if isinstance(priv, dict) else None
    return [n for g in groups for s in g.members
            for n in _series_notes(s, s.label if g.n == 1 else f"{s.label} (seed {s.seed})",
                                   planned.get(s.run), finished.get(s.run, False), budget(s))]


def _intro(groups: list[Group], runs: list[Run], tgt: float, given: bool) -> list[str]:
    what = target_text([s for g in groups for s in g.members], given).format(num(tgt))
    intro = [f"Algorithms: {', '.join(g.label for g in groups)}. {what}"]
    if len(runs) > 1:
        intro.append("Runs: " + ", ".join(f"{r.name} ({r.path}, seed "
                                          f"{'?' if r.seed is None else r.seed})" for r in runs)
                     + ".")
    return intro


def _facts(runs: list[Run]) -> list[tuple[str, str]]:
    if len(runs) == 1:
        return summary_rows(runs[0].summary)
    return [(f"run {r.name}", "; ".join(f"{k}: {v}" for k, v in summary_rows(r.summary)
                                        if k in ("scenario", "seed", "training")) or r.path)
            for r in runs]


def build(out: str, runs: list[Run], title: str, target: float | None, prefix: bool,
          timeline_round: int = 1) -> Report:
    """The report of `runs` (one run, or several on the same axes), figures written into OUT."""
    with keeping_layouts(), background_saves() as failed:   # clients.csv scanned once each;
        rep = _build(out, runs, title, target, prefix, timeline_round)   # figures saved aside
    for path, error in failed:          # (known once every figure has been saved)
        for s in rep.sections:
            s.figures = [f for f in s.figures if f.path != path]
        _remove_figure(path)
        notes = next(s for s in rep.sections if s.key == "notes").notes
        notes.append(f"The figure {os.path.basename(path)} could not be drawn: {error}")
    return rep


def _build(out: str, runs: list[Run], title: str, target: float | None, prefix: bool,
           timeline_round: int) -> Report:
    groups, notes = groups_of(runs, prefix)
    if not groups:
        raise FileNotFoundError("no <algorithm>/metrics.csv under " +
                                ", ".join(r.path for r in runs))
    all_series = [s for g in groups for s in g.members]
    check_options(all_series, target, timeline_round)
    # at city scale a round's timeline is ~10^5 events: read aside while the rest is drawn
    loading = _read_ahead(groups, timeline_round)
    add_totals(all_series)
    tgt = target_of(all_series, target)
    rep = Report(title, out, _intro(groups, runs, tgt, target is not None), sections(), tgt,
                 groups)
    sec = {s.key: s for s in rep.sections}
    sec["scenario"].facts = _facts(runs)
    sec["table"].head, sec["table"].rows, sec["table"].owners = table_rows(groups, tgt,
                                                                          cut_short(runs))
    sec["table"].text = " ".join(t for t in (bounds_text(groups, tgt), TABLE_NOTE) if t)
    colours = plots.palette(g.label for g in groups)
    p = lambda name: os.path.join(out, name)  # noqa: E731
    if len(runs) == 1 and runs[0].summary:
        _scenario(sec["scenario"], runs[0].summary, p, notes)
    personal = " (dashed: personalised models)" if any(
        math.isfinite(s.final_personal) for s in all_series) else ""
    _curves(sec["curves"], groups, colours, personal, p, notes)
    _stragglers(sec["stragglers"], groups, colours, runs, p, notes)
    _timelines(sec["timeline"], groups, timeline_round, p, notes, loading)
    add_breakdowns(sec, groups, runs, colours, p, notes, _safe)   # levels, classes, stability
    add_fairness(sec["fairness"], groups, colours, p, notes, _safe)   # per-client accuracy
    add_energy(sec, groups, colours, tgt, p, notes, _safe)        # when a run recorded energy
    add_privacy(sec["privacy"], groups, runs, colours, p, notes, _safe)   # a finite epsilon
    add_robustness(sec["robustness"], groups, runs, colours, _clients, p, notes, _safe)
    notes += _failure_notes(groups, runs)
    sec["notes"].notes, sec["notes"].empty = notes, NO_NOTES
    return rep
