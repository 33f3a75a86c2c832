"""How accuracy is spread over clients (issue 44): metrics.csv's client_acc_* columns and the
per-client file clients_eval.csv, from each client's count of correct test rows.

Over the clients with test rows, unweighted (each client counts once): mean, std (ddof 0), min,
p10 / p50 / p90 (numpy's default linear interpolation), worst10 (the mean of the lowest
ceil(10% of n) accuracies), Jain's index (sum x)^2 / (n sum x^2) (empty where every accuracy is
0: 0/0); and wmean, weighted by test rows (sum correct / sum rows), which is test_acc itself
where the test set is the union of the clients' test rows. Classification only: a regression
model's columns stay empty and it writes no clients_eval.csv rows."""
from __future__ import annotations

import math
import os

import numpy as np

STATS = ("mean", "std", "min", "p10", "p50", "p90", "worst10", "jain", "wmean")
GLOBAL = [f"client_acc_{s}" for s in STATS]
PERSONAL = [f"personal_client_acc_{s}" for s in STATS]
FAIRNESS_COLUMNS = GLOBAL + PERSONAL
CLIENTS_EVAL_COLUMNS = ["round", "client", "test_rows", "test_acc", "personal_test_acc"]


def spread(acc: np.ndarray, correct: np.ndarray | None = None,
           rows: np.ndarray | None = None) -> dict[str, float]:
    """The statistics of STATS (names without prefix) of per-client accuracies `acc` (clients
    with test rows only); wmean from `correct` / `rows` (the same clients' counts) when given."""
    acc = np.asarray(acc, dtype=np.float64)
    n = len(acc)
    if n == 0:
        return {s: math.nan for s in STATS}
    p10, p50, p90 = np.percentile(acc, [10, 50, 90])
    sq = float(np.sum(acc * acc))
    worst = np.sort(acc)[:math.ceil(0.1 * n)]
    out = {"mean": float(np.mean(acc)), "std": float(np.std(acc)), "min": float(acc.min()),
           "p10": float(p10), "p50": float(p50), "p90": float(p90),
           "worst10": float(np.mean(worst)),
           "jain": float(np.sum(acc)) ** 2 / (n * sq) if sq > 0 else math.nan,
           "wmean": math.nan}
    if correct is not None and rows is not None:
        out["wmean"] = float(np.sum(correct)) / float(np.sum(rows))
    return out


def fairness_cells(counts: np.ndarray, correct: np.ndarray | None,
                   p_correct: np.ndarray | None) -> dict[str, float]:
    """metrics.csv's fairness cells of one evaluation: `correct` / `p_correct` the global
    model's / personal models' correct test rows per client ((N,); None: not evaluated, or not
    personalised), `counts` each client's test rows."""
    has = counts > 0
    out: dict[str, float] = {}
    for prefix, c in (("client_acc_", correct), ("personal_client_acc_", p_correct)):
        if c is None or not has.any():
            continue
        stats = spread(c[has] / counts[has], c[has], counts[has])
        out.update({prefix + k: v for k, v in stats.items()})
    return out


def eval_lines(t: int, counts: np.ndarray, correct: np.ndarray | None,
               p_correct: np.ndarray | None) -> str:
    """clients_eval.csv's rows of the evaluation of round t: a row per client with test rows
    (its accuracy under the global model, and under its personal model where there is one).
    Column by column, the rows joined once (a city's 10^5 clients: ~0.1 s, not a row loop's
    0.25 s); an accuracy is numpy's correctly rounded division, the same double as c / n."""
    if correct is None and p_correct is None:
        return ""
    ks = np.flatnonzero(counts > 0)
    if len(ks) == 0:
        return ""
    n = counts[ks]
    empty = [""] * len(ks)

    def acc(c: np.ndarray | None) -> list[str]:
        return empty if c is None else list(map(repr, (c[ks] / n).tolist()))
    cols = ([str(t)] * len(ks), list(map(str, ks.tolist())), list(map(str, n.tolist())),
            acc(correct), acc(p_correct))
    return "\r\n".join(map(",".join, zip(*cols))) + "\r\n"


def read_last_eval(path: str, block: int = 1 << 16) -> tuple[int, np.ndarray, np.ndarray]:
    """(round, global accuracies, personal accuracies) of the last evaluation in
    clients_eval.csv, read from the file's end only (the report's CDF: a long run's file holds
    every evaluation); (-1, empty, empty) where it has no rows. Empty cells are NaN."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        end = fh.tell()
        at, tail = end, b""
        while True:
            at = max(0, at - block)
            fh.seek(at)
            tail = fh.read(end - at)
            lines = tail.split(b"\r\n")
            if at > 0:
                lines = lines[1:]                 # the first may be cut
            body = [ln for ln in lines if ln and not ln.startswith(b"round,")]
            if not body:
                if at == 0:
                    return -1, np.empty(0), np.empty(0)
                block *= 4
                continue
            last = body[-1].split(b",", 1)[0]
            if at == 0 or any(ln.split(b",", 1)[0] != last for ln in body):
                break
            block *= 4
    rows = [ln.split(b",") for ln in body if ln.split(b",", 1)[0] == last]

    def col(j: int) -> np.ndarray:
        return np.array([float(r[j]) if r[j] else math.nan for r in rows])
    return int(last), col(3), col(4)
