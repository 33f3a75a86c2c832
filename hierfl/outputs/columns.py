"""The columns of a run's CSV files (metrics.csv, clients.csv, trace.csv), and the fast
clients.csv writer that must agree byte for byte with the generic CSV writer
(tests/test_fast_paths.py). The trace is written by the engine's Trace (hierfl/sim/trace.py)."""
from __future__ import annotations

from itertools import repeat
from math import copysign
from operator import attrgetter

from ..sim.trace import Trace

METRIC_COLUMNS = ["round", "sim_time_s", "bytes_up", "bytes_down", "bytes_client_edge",
                  "bytes_edge_cloud", "bytes_wasted", "train_loss", "test_acc",
                  "personal_test_acc", "personal_sparsity", "selected", "reported", "failed",
                  "stragglers", "mean_gamma", "dissimilarity_B", "grad_variance",
                  "bytes_up_client_edge", "bytes_down_client_edge", "bytes_up_edge_cloud",
                  "bytes_down_edge_cloud", "diverged", "test_mse", "personal_test_mse",
                  "unstable", "energy_j", "energy_total_j", "round_loss", "epsilon"]
# how accuracy is spread over the clients with test rows (issue 44, outputs/fairness.py):
# client_acc_{mean,std,min,p10,p50,p90,worst10,jain,wmean} of the global model and
# personal_client_acc_* of personal models; empty where not evaluated, for regression, and
# (personal_*) for an algorithm without personal models
METRIC_COLUMNS += [f"{p}client_acc_{s}" for p in ("", "personal_")
                   for s in ("mean", "std", "min", "p10", "p50", "p90", "worst10", "jain",
                             "wmean")]
# epsilon: privacy spent so far for the entry's privacy.delta (docs/privacy.md); empty without
# round_loss: the training loss of the global model every round, the instability rule's input
# (outputs/stability.py): train_loss where the round is evaluated, else the loss on a fixed
# sample of the training rows (learn/evaluate.sample_loss)
# energy (sim/energy.py, docs/energy.md): energy_j the round's client joules, energy_total_j
# their running total (cumulative, like the byte columns)
# classification scores test_acc / personal_test_acc (higher is better); regression (the linear
# model) scores test_mse / personal_test_mse (lower is better) and leaves the acc columns empty
SCORES = {"classification": ("test_acc", "personal_test_acc"),
          "regression": ("test_mse", "personal_test_mse")}
CLIENT_COLUMNS = ["round", "edge_round", "client", "steps", "budget", "compute_s", "upload_s",
                  "dropped", "straggler", "gamma", "up_bytes", "encoding", "failed",
                  "device_class", "link_class", "download_s", "tx_s", "idle_s", "energy_j",
                  "staleness", "cluster", "compress", "edge", "attacker"]
# attacker: 1 for a Byzantine client of the entry's attack (docs/robustness.md), 0 for an
# honest one; empty without an attack
# cluster: the cluster a client chose that round (IFCA), empty for other algorithms
# edge: with mobility (sim/mobility.py), the edge the client uploaded to; empty without

TRACE_COLUMNS = Trace.HEADER            # time_s, node, kind, peer, value


def level_columns(levels: list[str] | dict[str, str]) -> list[str]:
    """bytes_up_<level>, bytes_down_<level> of every link level (bottom up) that is not one of
    the legacy columns already (on a client -> edge -> cloud tree the levels are the legacy
    client_edge and edge_cloud)."""
    return [c for lv in levels for c in (f"bytes_up_{lv}", f"bytes_down_{lv}")
            if c not in METRIC_COLUMNS]


def metric_columns(levels: list[str] | dict[str, str] = ()) -> list[str]:
    """metrics.csv's columns for a topology with these link levels (appended at the end)."""
    return METRIC_COLUMNS + level_columns(levels)


def _floats(col: tuple) -> list[str]:
    """A float column's cells: repr, NaN as an empty cell. A column of one value (a round's
    download seconds, upload bytes, energy; NaN gammas) is formatted once: a float's repr
    costs about a microsecond (issue 19). Equal floats share their repr, except 0.0 and -0.0
    (equal, signs apart: only positive zeros count as one value) and NaN (never equal)."""
    n = len(col)
    if n > 1 and set(map(type, col)) == _FLOAT:
        first = col[0]
        if first != first:
            if not any(map(float.__eq__, col, col)):            # NaN == NaN is False
                return [""] * n
        elif col.count(first) == n and (first != 0 or sum(map(copysign, repeat(1.0, n),
                                                               col)) == n):
            return [repr(first)] * n
    return [repr(v) if v == v else "" for v in col]


_FLOAT = {float}


def _cell(s: str) -> str:
    """A text cell as csv.writer's minimal quoting writes it."""
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\r\n') else s


def class_cells(devices: tuple[str, ...], links: tuple[str, ...]) -> list[str]:
    """Per client id, its device- and link-class cells for `client_lines` (",phone,lte"):
    each pair of class names formatted once (a few classes over 10^5-10^6 clients)."""
    cells: dict[tuple[str, str], str] = {}
    out = []
    for pair in zip(devices, links):
        cell = cells.get(pair)
        if cell is None:
            cell = cells[pair] = f",{_cell(pair[0])},{_cell(pair[1])}"
        out.append(cell)
    return out


_FIELDS = attrgetter("round", "edge_round", "client", "steps", "budget", "compute_s", "upload_s",
                     "dropped", "straggler", "gamma", "up_bytes", "encoding", "failed",
                     "download_s", "tx_s", "idle_s", "energy_j", "staleness", "cluster",
                     "compress", "edge", "attacker")


def client_lines(recs: list, classes: list[str] | None = None) -> str:
    """clients.csv rows of ClientRecords, byte for byte what CsvLog.rows writes for
    CLIENT_COLUMNS (tests/test_fast_paths.py checks), without a dict and a type test per
    value: at 1,000 clients a round this was a tenth of W5's time. Formatted a column at a
    time (one map per column, the rows joined once): a row's f-string of 23 cells cost W2 a
    fifth more. `classes`: per client id, the cells of its device and link class
    (",phone,lte"; ",," when none), pre-formatted."""
    if not recs:
        return ""
    (rnd, er, client, steps, budget, comp, upl, drop, strag, gam, upb, enc, fail, dl, tx, idle,
     en, stale, clus, cmp, edge, att) = zip(*map(_FIELDS, recs))
    n = len(classes) if classes else 0
    cls = [classes[k][1:] if k < n else "," for k in client]      # two cells, one comma
    cols = (map(str, rnd), map(str, er), map(str, client), map(str, steps), map(str, budget),
            _floats(comp), _floats(upl), map(str, map(int, drop)), map(str, map(int, strag)),
            _floats(gam), _floats(upb), map(str, enc), map(str, map(int, fail)), cls,
            _floats(dl), _floats(tx), _floats(idle), _floats(en), _floats(stale),
            [str(c) if c >= 0 else "" for c in clus], map(str, cmp),
            [_cell(e) if e else e for e in edge],
            [str(a) if a >= 0 else "" for a in att])
    return "\r\n".join(map(",".join, zip(*cols))) + "\r\n"
