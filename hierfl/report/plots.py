"""Figures of a run (matplotlib, Agg): one colour per algorithm across every figure."""
from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .records import Series  # noqa: E402

COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


def _finite(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    pts = [(x, y) for x, y in zip(xs, ys) if math.isfinite(x) and math.isfinite(y)]
    return [p[0] for p in pts], [p[1] for p in pts]


def line_figure(series: list[Series], x: str, ys: list[tuple[str, str]], xlabel: str,
                ylabel: str, path: str, logx: bool = False, title: str = "") -> str:
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for i, s in enumerate(series):
        for key, style in ys:
            xs, vs = _finite(s.col(x), s.col(key))
            if logx:
                xs, vs = zip(*[(a, b) for a, b in zip(xs, vs) if a > 0]) if any(
                    a > 0 for a in xs) else ([], [])
            if not xs:
                continue
            name = s.label if key in ("test_acc", "train_loss") else f"{s.label} ({key})"
            ax.plot(xs, vs, style, color=colour(i), label=name, linewidth=1.6)
            d = s.diverged_at
            if d is not None:
                ax.axvline(xs[-1], color=colour(i), linestyle=":", linewidth=1)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    fig.savefig(os.path.splitext(path)[0] + ".svg")
    plt.close(fig)
    return path


def standard_figures(series: list[Series], out: str) -> dict[str, str]:
    """accuracy vs simulated time, accuracy vs bytes (log), loss vs round."""
    acc = [("test_acc", "-")]
    if any(math.isfinite(v) for s in series for v in s.col("personal_test_acc")):
        acc.append(("personal_test_acc", "--"))
    for s in series:
        for r in s.rows:
            r["bytes_total"] = r.get("bytes_up", math.nan) + r.get("bytes_down", math.nan)
    return {
        "acc_time": line_figure(series, "sim_time_s", acc, "simulated time (s)",
                                "test accuracy", os.path.join(out, "accuracy_vs_time.png")),
        "acc_bytes": line_figure(series, "bytes_total", acc, "bytes sent, all links (B, log)",
                                 "test accuracy", os.path.join(out, "accuracy_vs_bytes.png"),
                                 logx=True),
        "loss_round": line_figure(series, "round", [("train_loss", "-")], "cloud round",
                                  "training loss (global model)",
                                  os.path.join(out, "loss_vs_round.png")),
    }
