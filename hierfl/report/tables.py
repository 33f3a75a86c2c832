"""The numbers of the tables and how they are shown: per-series numbers (final accuracy, time,
bytes and rounds to a target), "mean ± std" cells with (k/n) when some values are missing, the
time/bytes-to-accuracy table of a report, table.csv and the tidy metrics_all.csv. The sweep's
summary uses the same numbers and cells."""
from __future__ import annotations

import csv
import io
import math
from typing import Callable

from ..outputs import Series, atomic_text, fmt
from .stats import Group, mean_std


# ------------------------------------------------------------------------------ cells
def num(v: float | None, spec: str = ".3f") -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, spec)


def size(v: float | None) -> str:
    """Bytes in decimal units: 950 B, 1.9 kB, 3.2 MB."""
    if v is None or not math.isfinite(v):
        return "—"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(v) < 1000:
            return f"{v:.1f} {unit}" if unit != "B" else f"{v:.0f} B"
        v /= 1000
    return f"{v:.1f} PB"


def pm(values: list[float], show: Callable[[float], str], n_total: int | None = None) -> str:
    """'mean ± std' of the finite values (sample std; the mean alone for one value), with '(k/n)'
    when only k of the n values are finite."""
    mu, sd, k = mean_std(values)
    if k == 0:
        return "—"
    s = show(mu) if k == 1 else f"{show(mu)} ± {show(sd)}"
    n = n_total if n_total is not None else len(values)
    return s + (f" ({k}/{n})" if k < n else "")


def local_overrides(entry_local: dict | None, train_local: dict | None) -> dict:
    """The keys of an algorithm's resolved `local:` that differ from the scenario's train.local
    (its per-algorithm overrides), in the entry's key order."""
    base = train_local or {}
    return {k: v for k, v in (entry_local or {}).items() if base.get(k) != v}


# ------------------------------------------------------------------------------ numbers
def _hit(s: Series, target: float, key: str, prefix: str = "") -> dict[str, float]:
    """Time, bytes and round of the first evaluated row reaching `target` on `key`, and the round
    of the evaluation before it (`*_after_round`: the target was crossed after that round; NaN
    when it was reached at the first evaluation)."""
    hit = s.first_reaching(target, key) if math.isfinite(target) else None
    prev = s.evaluated_before(hit, key) if hit else None
    return {prefix + "time_to_target_s": hit["sim_time_s"] if hit else math.nan,
            prefix + "bytes_to_target": hit["bytes_up"] + hit["bytes_down"] if hit else math.nan,
            prefix + "rounds_to_target": hit["round"] if hit else math.nan,
            prefix + "target_after_round": prev["round"] if prev else math.nan}


def numbers(s: Series, target: float) -> dict[str, float]:
    """The table numbers of one series (nan where not reached / not measured). final_acc is the
    score of the global model: accuracy, or the test MSE for regression (s.score_key). The
    personal_* numbers judge the personalised models on the same target. A diverged series has
    no final score (its last evaluation came before it diverged: round 0's, with a rare
    eval_every, which was shown and pooled as the final one)."""
    last = s.rows[-1] if s.rows else {}
    gone = s.diverged_at is not None
    return {"final_acc": math.nan if gone else s.final_acc,
            "final_personal_acc": math.nan if gone else s.final_personal,
            "rounds": last.get("round", math.nan), "sim_time_s": s.last("sim_time_s"),
            "bytes_total": last.get("bytes_up", math.nan) + last.get("bytes_down", math.nan),
            "bytes_client_edge": s.last("bytes_client_edge"),
            "bytes_edge_cloud": s.last("bytes_edge_cloud"),
            **_hit(s, target, s.score_key), **_hit(s, target, s.personal_key, "personal_"),
            **energy_columns(s, target)}


def energy_columns(s: Series, target: float) -> dict[str, float]:
    """The clients' energy (metrics.csv's energy_total_j, joules: the sum of energy_j over the
    rounds) at the end and at the first evaluation reaching the target; NaN where the run
    recorded none (its topology gives no powers) or the target was not reached."""
    total = s.last("energy_total_j")
    if not total > 0:
        return {"energy_total_j": math.nan, "energy_to_target_j": math.nan}
    hit = s.first_reaching(target) if math.isfinite(target) else None
    return {"energy_total_j": total,
            "energy_to_target_j": hit.get("energy_total_j", math.nan) if hit else math.nan}


TABLE_METRICS = ("final_acc", "final_personal_acc", "sim_time_s", "bytes_client_edge",
                 "bytes_edge_cloud", "time_to_target_s", "bytes_to_target", "rounds_to_target",
                 "target_after_round", "personal_time_to_target_s", "personal_bytes_to_target",
                 "personal_rounds_to_target", "personal_target_after_round",
                 "energy_total_j", "energy_to_target_j")
TABLE_HEAD = ["algorithm", "final acc", "personal acc", "sim time (s)", "bytes client-edge",
              "bytes edge-cloud", "time to target (s)", "bytes to target", "rounds to target",
              "note"]
TABLE_NOTE = ("Bytes count every link a message crosses (a client's upload relayed through its "
              "edge counts on both tiers). With several seeds: mean ± sample standard deviation "
              "(ddof=1); (k/n): only k of n seeds reached the target. Time, bytes and rounds to "
              "target are those of the first evaluation at or past the target (not "
              "interpolated); ≤ marks an upper bound: the model is evaluated every eval_every "
              "rounds and the target was crossed after the previous evaluation. A "
              "personalised algorithm has a second row judged on its personalised models.")


def task_of(groups: list[Group]) -> str:
    """regression when every curve scores an MSE, else classification."""
    tasks = {g.mean().task for g in groups}
    return "regression" if tasks == {"regression"} else "classification"


def table_head(task: str, multi: bool) -> list[str]:
    head = list(TABLE_HEAD)
    if task == "regression":
        head[1:3] = ["final test MSE", "personal test MSE"]
    return head + (["seeds"] if multi else [])


def group_numbers(g: Group, target: float) -> dict[str, list[float]]:
    """Per member: the numbers of the table."""
    per = [numbers(s, target) for s in g.members]
    return {k: [p[k] for p in per] for k in TABLE_METRICS}


def _to_target(v: dict[str, list[float]], n: int, pre: str = "") -> list[str]:
    """The time, bytes and rounds to target cells; ≤ when some member's first hit came after a
    gap between evaluations (an upper bound at eval_every resolution)."""
    times, rounds = v[pre + "time_to_target_s"], v[pre + "rounds_to_target"]
    if not any(math.isfinite(x) for x in times):
        return ["not reached"] * 3
    bound = any(math.isfinite(r) and math.isfinite(a) and r - a > 1
                for r, a in zip(rounds, v[pre + "target_after_round"]))
    le = "≤ " if bound else ""
    return [le + pm(times, lambda x: num(x, ".1f")), le + pm(v[pre + "bytes_to_target"], size),
            le + pm(rounds, lambda x: num(x, ".0f") if n == 1 else num(x, ".1f"))]


def bounds_text(groups: list[Group], target: float) -> str:
    """A sentence when most of the table's time/bytes-to-target cells say little: a bound (the
    target crossed between two evaluations) or reached at the first evaluation after round 0
    (how much earlier is unknown); '' otherwise. Counted per algorithm and seed."""
    reached = weak = 0
    for g in groups:
        v = group_numbers(g, target)
        for r, a in zip(v["rounds_to_target"], v["target_after_round"]):
            if not (math.isfinite(r) and math.isfinite(a)):
                continue
            reached += 1
            weak += r - a > 1 or a == 0
    if reached < 2 or 2 * weak <= reached:
        return ""
    return (f"Most time/bytes-to-target cells are upper bounds ({weak} of {reached} runs that "
            f"reached the target {num(target)} crossed it between two evaluations or at the "
            "first one): they do not tell the algorithms apart. Evaluate more often "
            "(train.eval_every) or choose a higher target (report.target_accuracy, or "
            "--target).")


def table_rows(groups: list[Group], target: float,
               cut: dict[tuple[str, str], str] | None = None
               ) -> tuple[list[str], list[list[str]], list[Group]]:
    """The time/bytes-to-accuracy table: head, rows of cells (a second row for the
    personalised models of a personalised algorithm) and each row's group. `cut`: (run,
    label) -> why, for series of runs that did not finish: the row's algorithm cell says
    "(interrupted)" and its note why, naming the run folder."""
    multi = any(g.n > 1 for g in groups)
    rows, owners = [], []
    for g in groups:
        v = group_numbers(g, target)
        notes = [f"diverged at round {t}" + (f" (seed {s.seed})" if g.n > 1 else "")
                 for s, t in g.diverged]
        short = [(s, (cut or {}).get((s.run, s.label))) for s in g.members]
        notes += [why + (f" (seed {s.seed})" if g.n > 1 else "") for s, why in short if why]
        label = g.label + (" (interrupted)" if any(why for _, why in short) else "")
        common = [pm(v["sim_time_s"], lambda x: num(x, ".1f")), pm(v["bytes_client_edge"], size),
                  pm(v["bytes_edge_cloud"], size)]
        seeds = [", ".join("?" if s is None else str(s) for s in g.seeds)] if multi else []
        rows.append([label, pm(v["final_acc"], num), pm(v["final_personal_acc"], num),
                     *common, *_to_target(v, g.n), "; ".join(notes), *seeds])
        owners.append(g)
        if any(math.isfinite(x) for x in v["final_personal_acc"]):
            rows.append([f"{label} (personalised)", "—", pm(v["final_personal_acc"], num),
                         *common, *_to_target(v, g.n, "personal_"),
                         "judged on each client's personalised model", *seeds])
            owners.append(g)
    return table_head(task_of(groups), multi), rows, owners


# ------------------------------------------------------------------------------ csv files
def table_csv(groups: list[Group], target: float) -> str:
    """group, n, metric, mean, std, count (std: sample std, ddof=1, empty for one value; count:
    finite values)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["algorithm", "n", "metric", "mean", "std", "count"])
    for g in groups:
        for k, vals in group_numbers(g, target).items():
            mu, sd, c = mean_std(vals)
            w.writerow([g.label, g.n, k, fmt(mu), fmt(sd), c])
    w.writerow(["*", "", "target_accuracy", fmt(target), "", ""])
    return buf.getvalue()


TIDY_HEADER = ["algorithm", "seed", "round", "metric", "value"]


def tidy_rows(series: list[Series], with_run: bool = False) -> list[list[str]]:
    """(run,) algorithm, seed, round, metric, value: one row per finite metric value."""
    out = []
    for s in series:
        seed = "" if s.seed is None else str(s.seed)
        for r in s.rows:
            t = str(int(r["round"]))
            for k, v in r.items():
                if k in ("round", "bytes_total") or not math.isfinite(v):
                    continue
                row = [s.label, seed, t, k, fmt(v)]
                out.append([s.run, *row] if with_run else row)
    return out


def write_metrics_all(path: str, series: list[Series], with_run: bool = False) -> str:
    """metrics_all.csv: every metric in tidy long format (for pandas)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((["run"] if with_run else []) + TIDY_HEADER)
    w.writerows(tidy_rows(series, with_run))
    atomic_text(path, buf.getvalue())
    return path
