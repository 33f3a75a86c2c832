"""The report of a run (or of several runs): report.md and the self-contained report.html, the
figures (PNG + SVG), the time/bytes-to-accuracy table (table.csv too) and metrics_all.csv.

`write_report(OUT)` regenerates everything from the files a run wrote, without rerunning;
`compare_runs([OUT_A, OUT_B, ...], DIR)` puts several runs on the same axes and pools runs that
differ only by their seed (mean +- sample std over seeds)."""
from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..io_util import atomic_text, fmt
from . import plots
from . import timeline as tline
from .records import Group, Run, Series, add_totals, concat_clients, groups_of, load_run, \
    mean_std, read_clients, write_metrics_all


# ------------------------------------------------------------------------------ formatting
def _f(v: float | None, spec: str = ".3f") -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, spec)


def _bytes(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(v) < 1000:
            return f"{v:.1f} {unit}" if unit != "B" else f"{v:.0f} B"
        v /= 1000
    return f"{v:.1f} PB"


def _pm(values: list[float], show, n_total: int | None = None) -> str:
    """'mean ± std' of the finite values (sample std), with '(k/n)' when some are missing."""
    mu, sd, k = mean_std(values)
    if k == 0:
        return "—"
    s = show(mu) if k == 1 else f"{show(mu)} ± {show(sd)}"
    n = n_total if n_total is not None else len(values)
    return s + (f" ({k}/{n})" if k < n else "")


def target_of(series: list[Series], target: float | None) -> float:
    if target is not None:
        return target
    finals = [s.final_acc for s in series if math.isfinite(s.final_acc)]
    return 0.9 * max(finals) if finals else math.nan


# ------------------------------------------------------------------------------ the table
TABLE_HEAD = ["algorithm", "final acc", "personal acc", "sim time (s)", "bytes client-edge",
              "bytes edge-cloud", "time to target (s)", "bytes to target", "rounds to target",
              "note"]


def group_numbers(g: Group, target: float) -> dict[str, list[float]]:
    """Per member: the numbers of the table (nan where not reached / not measured)."""
    out: dict[str, list[float]] = {k: [] for k in (
        "final_acc", "final_personal_acc", "sim_time_s", "bytes_client_edge", "bytes_edge_cloud",
        "time_to_target_s", "bytes_to_target", "rounds_to_target")}
    for s in g.members:
        hit = s.first_reaching(target) if math.isfinite(target) else None
        out["final_acc"].append(s.final_acc)
        out["final_personal_acc"].append(s.final_personal)
        out["sim_time_s"].append(s.last("sim_time_s"))
        out["bytes_client_edge"].append(s.last("bytes_client_edge"))
        out["bytes_edge_cloud"].append(s.last("bytes_edge_cloud"))
        out["time_to_target_s"].append(hit["sim_time_s"] if hit else math.nan)
        out["bytes_to_target"].append(hit["bytes_up"] + hit["bytes_down"] if hit else math.nan)
        out["rounds_to_target"].append(hit["round"] if hit else math.nan)
    return out


def table_rows(groups: list[Group], target: float) -> tuple[list[str], list[list[str]]]:
    multi = any(g.n > 1 for g in groups)
    head = TABLE_HEAD + (["seeds"] if multi else [])
    rows = []
    for g in groups:
        v = group_numbers(g, target)
        reached = sum(math.isfinite(x) for x in v["time_to_target_s"])

        def hit(key: str, show) -> str:
            return "not reached" if reached == 0 else _pm(v[key], show)
        notes = [f"diverged at round {t}" + (f" (seed {s.seed})" if g.n > 1 else "")
                 for s, t in g.diverged]
        row = [g.label, _pm(v["final_acc"], _f), _pm(v["final_personal_acc"], _f),
               _pm(v["sim_time_s"], lambda x: _f(x, ".1f")),
               _pm(v["bytes_client_edge"], _bytes), _pm(v["bytes_edge_cloud"], _bytes),
               hit("time_to_target_s", lambda x: _f(x, ".1f")), hit("bytes_to_target", _bytes),
               hit("rounds_to_target", lambda x: _f(x, ".0f") if g.n == 1 else _f(x, ".1f")),
               "; ".join(notes)]
        if multi:
            row.append(", ".join("?" if s is None else str(s) for s in g.seeds))
        rows.append(row)
    return head, rows


def table_csv(groups: list[Group], target: float) -> str:
    """group, n, metric, mean, std, count (std: sample std, ddof=1; count: finite values)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["algorithm", "n", "metric", "mean", "std", "count"])
    for g in groups:
        for k, vals in group_numbers(g, target).items():
            mu, sd, c = mean_std(vals)
            w.writerow([g.label, g.n, k, fmt(mu), fmt(sd), c])
    w.writerow(["*", "", "target_accuracy", fmt(target), "", ""])
    return buf.getvalue()


def md_table(head: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in r] for r in [head, *rows]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def table(series: list[Series], target: float) -> str:
    """The markdown table of single-seed series (kept for callers of the first version)."""
    head, rows = table_rows([Group(s.label, [s], s.label) for s in series], target)
    return md_table(head, rows)


# ------------------------------------------------------------------------------ the model
@dataclass
class Figure:
    section: str
    path: str
    caption: str


@dataclass
class Report:
    title: str
    out: str
    intro: list[str]
    summary: list[tuple[str, str]]
    target: float
    target_given: bool
    head: list[str]
    rows: list[list[str]]
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


SECTIONS = [("scenario", "Scenario"), ("table", "Time and bytes to accuracy"),
            ("curves", "Accuracy and loss"), ("stragglers", "Stragglers and γ"),
            ("timeline", "Timeline of one round"), ("notes", "Divergence and failures")]


def _compact(d: dict) -> str:
    parts = []
    for k, v in d.items():
        if isinstance(v, dict):
            v = "{" + _compact(v) + "}"
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def summary_rows(summary: dict | None) -> list[tuple[str, str]]:
    if not summary:
        return []
    sc = summary.get("scenario") or {}
    rows: list[tuple[str, str]] = []
    rows.append(("scenario", f"{sc.get('name', '?')}" + (f" ({sc['file']})" if sc.get("file")
                                                         else "")))
    rows.append(("seed", str(sc.get("seed", "?"))))
    nodes = (summary.get("topology") or {}).get("nodes")
    if nodes:
        roles = nodes["role"]
        aggs = sorted({d for d, r in zip(nodes["depth"], roles) if r != "client"})
        per = [sum(1 for d, r in zip(nodes["depth"], roles) if r != "client" and d == t)
               for t in aggs]
        flops = sorted(f for f, r in zip(nodes["flops"], roles) if r == "client")
        rows.append(("topology", f"1 cloud, {' + '.join(map(str, per))} aggregators in "
                     f"{len(aggs)} tier(s), {len(flops)} clients; client speed "
                     f"{flops[0] / 1e9:.3g}–{flops[-1] / 1e9:.3g} GFLOP/s (median "
                     f"{flops[len(flops) // 2] / 1e9:.3g})"))
    data = summary.get("data") or {}
    d = sc.get("data") or {}
    if data.get("train_counts"):
        tc = data["train_counts"]
        rows.append(("data", f"{d.get('name', '?')}: {sum(tc)} training samples over "
                     f"{len(tc)} clients ({min(tc)}–{max(tc)} each), "
                     f"{sum(data.get('test_counts') or [])} test samples, dim {data.get('dim')}"
                     + (f", {data['classes']} classes" if data.get("classes") else "")))
    elif d:
        rows.append(("data", str(d.get("name", "?"))))
    m = summary.get("model") or {}
    ms = sc.get("model") or {}
    if m or ms:
        rows.append(("model", f"{m.get('name') or ms.get('name', '?')}"
                     + (f", {m['n_params']} parameters" if m.get("n_params") else "")))
    tr = sc.get("train") or {}
    if tr:
        loc = tr.get("local") or {}
        work = (f"{loc['steps']} steps" if loc.get("steps") else
                f"{loc['epochs']} epochs" if loc.get("epochs") else "1 epoch")
        rows.append(("training", f"{tr.get('rounds')} cloud rounds, {tr.get('clients_per_round')}"
                     f" clients per round; local: {work}, batch {loc.get('batch_size')}, "
                     f"lr {loc.get('lr')}" + (f", γ target {loc['gamma']}" if loc.get("gamma")
                                              is not None else "")))
        rp = tr.get("round") or {}
        if rp and rp.get("policy") not in (None, "wait_all"):
            rows.append(("round policy", _compact({k: v for k, v in rp.items() if v is not None})))
    st = sc.get("stragglers") or {}
    if st and st.get("fraction"):
        rows.append(("stragglers", _compact(st)))
    for a in sc.get("algorithms") or []:
        if isinstance(a, dict):
            params = a.get("params") if isinstance(a.get("params"), dict) else {
                k: v for k, v in a.items() if k not in ("name", "label")}
            params = {k: v for k, v in params.items() if v is not None}
            rows.append((f"algorithm {a.get('label') or a.get('name')}",
                         f"{a.get('name')}" + (f" ({_compact(params)})" if params else "")))
    return rows


def _gamma_targets(runs: list[Run]) -> dict[str, float]:
    out = {}
    for r in runs:
        for a in ((r.summary or {}).get("scenario") or {}).get("algorithms") or []:
            if isinstance(a, dict) and isinstance(a.get("local"), dict) and \
                    a["local"].get("gamma") is not None:
                out[a.get("label") or a.get("name")] = float(a["local"]["gamma"])
    return out


def _safe(notes: list[str], what: str, fn, *args):
    """Optional figures: a failure becomes a note in the report instead of no report."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        notes.append(f"The {what} figure could not be drawn: {type(exc).__name__}: {exc}")
        return None


def build(out: str, runs: list[Run], title: str, target: float | None, prefix: bool,
          timeline_round: int = 1) -> Report:
    groups, pool_notes = groups_of(runs, prefix)
    if not groups:
        raise FileNotFoundError("no <algorithm>/metrics.csv under " +
                                ", ".join(r.path for r in runs))
    all_series = [s for g in groups for s in g.members]
    add_totals(all_series)
    tgt = target_of(all_series, target)
    head, rows = table_rows(groups, tgt)
    colours = plots.palette(g.label for g in groups)
    single = len(runs) == 1
    intro = [f"Algorithms: {', '.join(g.label for g in groups)}. Target accuracy for the table: "
             f"{_f(tgt)} ({'given' if target is not None else '0.9 × best final accuracy'})."]
    if not single:
        intro.append("Runs: " + ", ".join(f"{r.name} ({r.path}, seed "
                                          f"{'?' if r.seed is None else r.seed})" for r in runs)
                     + ".")
    rep = Report(title, out, intro, summary_rows(runs[0].summary) if single else
                 [(f"run {r.name}", "; ".join(f"{k}: {v}" for k, v in summary_rows(r.summary)
                                             if k in ("scenario", "seed", "training")) or r.path)
                  for r in runs], tgt, target is not None, head, rows)
    rep.notes += pool_notes
    rep.groups = groups
    notes = rep.notes
    fig = rep.figures.append
    p = lambda name: os.path.join(out, name)  # noqa: E731
    # ---- scenario
    if single and runs[0].summary:
        s = runs[0].summary
        for key, fn, cap in (("topology", plots.topology_figure, "The simulated system"),
                             ("devices", plots.devices_figure,
                              "Device speeds and links, as drawn from the seed"),
                             ("data_split", plots.data_figure, "Data split over the clients")):
            path = _safe(notes, key, fn, s, p(f"{key}.png"))
            if path:
                fig(Figure("scenario", path, cap))
    # ---- curves
    personal = " (dashed: personalised models)" if any(
        math.isfinite(s.final_personal) for s in all_series) else ""
    fig(Figure("curves", plots.accuracy_figure(groups, colours, "sim_time_s",
                                               "simulated time (s)", p("accuracy_vs_time.png")),
               "Test accuracy vs simulated wall-clock time" + personal))
    fig(Figure("curves", plots.accuracy_figure(groups, colours, "bytes_total",
                                               "bytes sent, all links, both directions (B, log)",
                                               p("accuracy_vs_bytes.png"), logx=True),
               "Test accuracy vs total bytes sent" + personal))
    fig(Figure("curves", plots.tier_figure(groups, colours, p("accuracy_vs_bytes_tier.png")),
               "Test accuracy vs bytes per tier"))
    fig(Figure("curves", plots.loss_figure(groups, colours, p("loss_vs_round.png")),
               "Training loss vs round"))
    path = _safe(notes, "bytes per tier", plots.tier_bytes_figure, groups, colours,
                 p("bytes_per_tier.png"))
    if path:
        fig(Figure("curves", path, "Bytes over the run, per tier and direction"))
    path = _safe(notes, "dissimilarity", plots.dissimilarity_figure, groups, colours,
                 p("dissimilarity.png"))
    if path:
        fig(Figure("curves", path, "Gradient dissimilarity of the global model "
                   "(FedProx's B(w), left; variance of client gradients, right)"))
    # ---- stragglers and gamma
    clients = {g.label: concat_clients([read_clients(s.folder) for s in g.members])
               for g in groups}
    for key, fn, args, cap in (
            ("gamma", plots.gamma_figure, (groups, colours, clients, _gamma_targets(runs)),
             "Achieved γ per client and round (box: quartiles, whiskers: 5–95 %, ◇: mean; "
             "dashed: target)"),
            ("steps_vs_budget", plots.steps_figure, (groups, colours, clients),
             "Local steps done vs step budget (area: number of client-rounds; ×: stragglers)"),
            ("steps_vs_speed", plots.steps_speed_figure,
             (groups, colours, clients, runs[0].summary if single else None),
             "Local steps done per round vs device speed (one point per client)"),
            ("stragglers", plots.stragglers_figure, (groups, colours),
             "Stragglers and clients not aggregated, per cloud round")):
        path = _safe(notes, key, fn, *args, p(f"{key}.png"))
        if path:
            fig(Figure("stragglers", path, cap))
    # ---- timeline
    for g in groups:
        s = g.members[0]
        tl = _safe(notes, f"timeline ({g.label})", tline.load, s.folder, timeline_round)
        if tl is None or not tl.bars:
            if os.path.isfile(os.path.join(s.folder, "trace.csv")):
                notes.append(f"{g.label}: trace.csv has no events of cloud round "
                             f"{timeline_round}; no timeline drawn.")
            continue
        name = "timeline_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in g.label)
        path = _safe(notes, f"timeline ({g.label})", plots.timeline_figure, tl, g.label,
                     p(name + ".png"))
        if path:
            seed = f", seed {s.seed}" if g.n > 1 else ""
            fig(Figure("timeline", path, f"{g.label}{seed}: cloud round {timeline_round}, "
                       f"{tl.end - tl.start:.3g} s"))
            if tl.in_flight:
                notes.append(f"{g.label}: {tl.in_flight} transfer(s) of round {timeline_round} "
                             "were still on the wire when the round closed (drawn to its end).")
    # ---- divergence and failures
    rounds_planned = {r.name: ((r.summary or {}).get("scenario") or {}).get("train", {}).get(
        "rounds") for r in runs}
    for g in groups:
        for s in g.members:
            who = s.label if g.n == 1 else f"{s.label} (seed {s.seed})"
            if s.diverged_at is not None:
                notes.append(f"{who}: non-finite or exploding parameters at round "
                             f"{s.diverged_at}; this algorithm's run was stopped there (the "
                             "others continued).")
            failed = [r.get("failed", 0) for r in s.rows if math.isfinite(r.get("failed", 0))]
            if sum(failed) > 0:
                notes.append(f"{who}: {int(sum(failed))} selected client-rounds were not "
                             f"aggregated (dropped, late or failed) in {sum(f > 0 for f in failed)}"
                             f" of {len(failed) - 1} rounds.")
            strag = [r.get("stragglers", 0) for r in s.rows if math.isfinite(r.get("stragglers",
                                                                                  0))]
            if sum(strag) > 0:
                notes.append(f"{who}: {int(sum(strag))} straggler client-rounds.")
            c = read_clients(s.folder)
            if "dropped" in c and "compute_s" in c:
                lost = float(np.nansum(c["compute_s"][c["dropped"] > 0.5]))
                if lost > 0:
                    notes.append(f"{who}: {lost:.3g} s of client compute did not reach an "
                                 "aggregator (wasted compute, summed over clients).")
            wasted = s.last("bytes_wasted")
            if math.isfinite(wasted) and wasted > 0:
                notes.append(f"{who}: {_bytes(wasted)} were sent but not used by any "
                             "aggregator.")
            planned = rounds_planned.get(s.run)
            last = int(s.rows[-1]["round"]) if s.rows else 0
            if isinstance(planned, int) and last < planned and s.diverged_at is None:
                notes.append(f"{who}: metrics end at round {last} of {planned} (interrupted "
                             "or still running).")
    return rep


# ------------------------------------------------------------------------------ markdown
def render_md(rep: Report) -> str:
    parts = [f"# hierfl report{': ' + rep.title if rep.title else ''}", "", *rep.intro, "",
             "Self-contained version with every figure: [report.html](report.html). "
             "Long-format metrics for pandas: [metrics_all.csv](metrics_all.csv).", ""]
    by = {k: [f for f in rep.figures if f.section == k] for k, _ in SECTIONS}
    for key, name in SECTIONS:
        if key == "scenario":
            if not rep.summary and not by[key]:
                continue
            parts += [f"## {name}", ""]
            if rep.summary:
                parts += [md_table(["", ""], [[k, v] for k, v in rep.summary]), ""]
        elif key == "table":
            parts += [f"## {name}", "", md_table(rep.head, rep.rows), "",
                      "Bytes count every link a message crosses (a client's upload relayed "
                      "through its edge counts on both tiers). With several seeds: mean ± "
                      "sample standard deviation (ddof=1); (k/n): only k of n seeds reached "
                      "the target.", ""]
            continue
        elif key == "notes":
            parts += [f"## {name}", ""]
            parts += [f"- {n}" for n in rep.notes] or ["None: every algorithm ran to the end "
                                                       "with all selected clients aggregated."]
            parts.append("")
            continue
        elif by[key]:
            parts += [f"## {name}", ""]
        for f in by[key]:
            parts += [f"### {f.caption}", "", f"![{f.caption}]({os.path.basename(f.path)})", ""]
    return "\n".join(parts) + "\n"


def _write(rep: Report, runs_series: list[Series], with_run: bool) -> str:
    from .html import render_html

    os.makedirs(rep.out, exist_ok=True)
    write_metrics_all(os.path.join(rep.out, "metrics_all.csv"), runs_series, with_run)
    md = os.path.join(rep.out, "report.md")
    atomic_text(md, render_md(rep))
    atomic_text(os.path.join(rep.out, "report.html"), render_html(rep))
    return md


def _table_csv_of(rep_groups: list[Group], target: float, out: str) -> None:
    atomic_text(os.path.join(out, "table.csv"), table_csv(rep_groups, target))


def write_report(out: str, title: str = "", target: float | None = None,
                 series: list[Series] | None = None, timeline_round: int = 1) -> str:
    """OUT/report.md, OUT/report.html, figures, table.csv and metrics_all.csv from OUT's files.
    Returns the path of report.md."""
    run = load_run(out)
    name = ((run.summary or {}).get("scenario") or {}).get("name")
    if name and title != name:
        title = f"{name} ({title})" if title else name
    if series is not None:
        run.series = series
    if not run.series:
        raise FileNotFoundError(f"no <algorithm>/metrics.csv under {out}")
    rep = build(out, [run], title, target, prefix=False, timeline_round=timeline_round)
    _table_csv_of(rep.groups, rep.target, out)
    return _write(rep, run.series, with_run=False)


def run_names(paths: list[str]) -> list[str]:
    """Folder names, made unique with parent folders where two runs share a name."""
    names = [os.path.basename(os.path.normpath(p)) for p in paths]
    if len(set(names)) == len(names):
        return names
    return [os.path.normpath(p).replace(os.sep, "/").strip("/") for p in paths]


def compare_runs(paths: list[str], out: str, target: float | None = None,
                 title: str = "", timeline_round: int = 1) -> str:
    """Several runs on the same axes in OUT (labels prefixed by run name); runs differing only by
    seed pooled into mean +- std. Returns the path of report.md."""
    runs = [load_run(p, n) for p, n in zip(paths, run_names(paths))]
    empty = [r.path for r in runs if not r.series]
    if empty:
        raise FileNotFoundError(f"no <algorithm>/metrics.csv under {', '.join(empty)}")
    rep = build(out, runs, title or "compare " + ", ".join(r.name for r in runs), target,
                prefix=True, timeline_round=timeline_round)
    _table_csv_of(rep.groups, rep.target, out)
    return _write(rep, [s for r in runs for s in r.series], with_run=True)
