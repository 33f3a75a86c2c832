"""Stragglers and gamma: the achieved gamma per client and round, steps done vs budget and vs
device speed, stragglers and clients not aggregated per round."""
from __future__ import annotations

import math

import numpy as np

from ...outputs.cells import decimals
from ...outputs.summary_columns import is_client
from ..stats import Group
from .curves import eng_log_axis, per_round_panels
from .style import H1, STYLE, W1, legend, plt, save
from .style import marker as marker_of
from .system_scale import mean_by_bins

MANY_POINTS = 2000      # above this many clients: means over speed bins, not one dot each


def gamma_figure(groups: list[Group], colours: dict[str, str],
                 clients: dict[str, dict[str, np.ndarray]], targets: dict[str, float],
                 path: str) -> str | None:
    """Distribution of the achieved gamma = ||grad h(w_end)|| / ||grad h(w_start)|| per client
    per round (box: quartiles, whiskers: 5-95 %, diamond: mean)."""
    data = []
    for g in groups:
        gam = clients.get(g.label, {}).get("gamma", np.zeros(0))
        gam = gam[np.isfinite(gam)]
        if len(gam):
            data.append((g, gam))
    if not data:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(W1 * 0.7, 1.1 * len(data) + 2), H1))
        bp = ax.boxplot([v for _, v in data], whis=(5, 95), showfliers=False, patch_artist=True,
                        showmeans=True, widths=0.55,
                        meanprops={"marker": "D", "markerfacecolor": "white",
                                   "markeredgecolor": "black", "markersize": 4})
        for patch, (g, _) in zip(bp["boxes"], data):
            patch.set_facecolor(colours[g.label])
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        ax.set_xticks(range(1, len(data) + 1), [g.label for g, _ in data],
                      rotation=20 if len(data) > 4 else 0,
                      ha="right" if len(data) > 4 else "center")
        for i, (g, _) in enumerate(data, 1):
            t = targets.get(g.key)
            if t is not None:
                ax.hlines(t, i - 0.35, i + 0.35, colors="crimson", linestyles="--", linewidth=1.2,
                          label="target γ" if i == 1 or "target γ" not in
                          ax.get_legend_handles_labels()[1] else None)
        ax.set_ylabel("achieved γ  (‖∇h(w_end)‖ / ‖∇h(w_start)‖)")
        ax.set_xlabel("algorithm (one value per client per round)")
        legend(ax, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
        return save(fig, path)


def _spread(c: dict[str, np.ndarray]) -> bool:
    """More than one distinct (budget, steps) point: a panel with one dot says nothing."""
    keep = np.isfinite(c["budget"]) & np.isfinite(c["steps"])
    b, s = c["budget"][keep], c["steps"][keep]
    return bool(len(b)) and bool((b != b[0]).any() or (s != s[0]).any())   # not all the first


def steps_figure(groups: list[Group], colours: dict[str, str],
                 clients: dict[str, dict[str, np.ndarray]], path: str) -> str | None:
    """Local steps done against the step budget, one panel per algorithm; marker area grows with
    the number of client-rounds at that point; stragglers drawn as crosses."""
    data = [(g, clients[g.label]) for g in groups if len(clients.get(g.label, {}).get(
        "budget", ())) and "steps" in clients[g.label] and _spread(clients[g.label])]
    if not data:                    # every client did its whole, equal budget: nothing to show
        return None
    n = len(data)
    cols = min(n, 4)
    rows_ = math.ceil(n / cols)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows_, cols, figsize=(2.9 * cols + 0.4, 2.7 * rows_ + 0.3),
                                 squeeze=False)
        top = max(float(np.nanmax(c["budget"])) for _, c in data)
        for ax, (g, c) in zip(axes.flat, data):
            strag_col = c.get("straggler", np.zeros(len(c["budget"])))
            for strag, marker in ((False, "o"), (True, "x")):
                keep = (strag_col > 0.5) == strag
                keep &= np.isfinite(c["budget"]) & np.isfinite(c["steps"])
                if not keep.any():
                    continue
                pts, counts = np.unique(np.stack([c["budget"][keep], c["steps"][keep]], 1),
                                        axis=0, return_counts=True)
                sizes = 12 + 60 * np.sqrt(counts / counts.max())
                ax.scatter(pts[:, 0], pts[:, 1], s=sizes, marker=marker, color=colours[g.label],
                           alpha=0.7, linewidths=1.2,
                           label="straggler" if strag else "on time")
            ax.plot([0, top * 1.05], [0, top * 1.05], color="grey", linewidth=0.8,
                    linestyle="--")
            ax.set_xlim(0, top * 1.08 + 1)
            ax.set_ylim(0, top * 1.08 + 1)
            ax.set_title(g.label, fontsize=10)
            ax.set_xlabel("step budget")
            ax.set_ylabel("local steps done")
            legend(ax, loc="upper left", fontsize=7.5)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        return save(fig, path)


def client_speeds(names: list, flops: list, roles: list) -> np.ndarray | None:
    """FLOP/s by client number (nan where no node "client<number>" has the role "client"), from
    the summary's node columns; None when there is none. Vectorised: 10^6 nodes at city scale."""
    n = min(len(names), len(flops), len(roles))
    if not n:
        return None
    ok, ids = client_numbers(names[:n])
    ok &= is_client(roles[:n])
    if not ok.any():
        return None
    ids = ids[ok]
    by_id = np.full(int(ids.max()) + 1, math.nan)
    by_id[ids] = np.asarray(flops[:n], dtype=float)[ok]
    return by_id


def client_numbers(names: list) -> tuple[np.ndarray, np.ndarray]:
    """(whether each name is "client" then decimal digits, the number) for a list of names.
    ASCII names are read as a matrix of bytes (10^6 names in ~0.1 s), others by numpy's
    string functions (str.isdecimal's digits, as int() reads them)."""
    prefix = b"client"
    longest = len(prefix) + 18                      # (more digits than int64 holds: not one)
    size = np.fromiter(map(len, names), np.int64, len(names))
    if len(size) and size.max() > longest:          # one long name would widen every row
        short = np.flatnonzero(size <= longest)
        ok, value = np.zeros(len(size), bool), np.zeros(len(size), np.int64)
        ok[short], value[short] = client_numbers([names[i] for i in short.tolist()])
        return ok, value
    try:
        raw = np.array(names, dtype="S")            # ASCII only (else UnicodeEncodeError)
    except (UnicodeEncodeError, ValueError):
        raw = None
    if raw is not None and raw.dtype.itemsize > len(prefix) and len(raw):
        b = raw.view(np.uint8).reshape(len(raw), raw.dtype.itemsize)
        ok, value = decimals(b[:, len(prefix):])
        ok &= (b[:, :len(prefix)] == np.frombuffer(prefix, np.uint8)).all(axis=1)
        return ok, np.where(ok, value, 0)
    name = np.array(names, dtype=str)
    if not len(name):
        return np.zeros(0, bool), np.zeros(0, np.int64)
    rest = np.strings.slice(name, len("client"), None)
    ok = np.strings.startswith(name, "client") & np.strings.isdecimal(rest) \
        & (np.strings.str_len(rest) <= 18)                                     # (false for "")
    value = np.zeros(len(name), np.int64)
    value[ok] = rest[ok].astype(np.int64)
    return ok, value


def steps_speed_figure(groups: list[Group], colours: dict[str, str],
                       clients: dict[str, dict[str, np.ndarray]], summary: dict | None,
                       path: str) -> str | None:
    """Mean local steps done per client-round against the client's device speed."""
    nodes = ((summary or {}).get("topology") or {}).get("nodes") or {}
    names, flops = nodes.get("name"), nodes.get("flops")
    if names is None or flops is None or not len(names) or not len(flops):
        return None
    by_id = client_speeds(names, flops, nodes.get("role", []))
    data = [(g, clients[g.label]) for g in groups
            if "client" in clients.get(g.label, {}) and "steps" in clients[g.label]]
    if not data or by_id is None:
        return None
    many = int(np.count_nonzero(~np.isnan(by_id))) > MANY_POINTS
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(W1, H1))
        drawn = 0
        for g, c in data:
            ks, st = c["client"], c["steps"]
            ok = np.isfinite(ks) & np.isfinite(st) & (ks >= 0) & (ks < len(by_id))
            ks, st = ks[ok].astype(np.int64), st[ok]
            n = np.bincount(ks, minlength=len(by_id))
            uniq = np.flatnonzero(n)
            mean_steps = np.bincount(ks, weights=st, minlength=len(by_id))[uniq] / n[uniq]
            sp = by_id[uniq]
            ok = np.isfinite(sp)
            drawn += int(ok.sum())
            if many:            # one dot per client would be too many: speed-bin means
                cx, cy = mean_by_bins(sp[ok], mean_steps[ok])
                ax.plot(cx, cy, marker=marker_of(colours, g.label) or "o", markersize=3.5,
                        color=colours[g.label], label=g.label)
            else:
                ax.scatter(sp[ok], mean_steps[ok], s=14, color=colours[g.label], alpha=0.75,
                           label=g.label, marker=marker_of(colours, g.label) or "o")
        if not drawn:          # no client ever trained (nobody available): no figure, not a
            plt.close(fig)     # log axis over nothing (a ValueError in the report)
            return None
        ax.set_xscale("log")
        eng_log_axis(ax, "FLOP/s")
        ax.set_xlabel("client device speed (FLOP/s, log)")
        ax.set_ylabel("local steps done per round (mean" +
                      (" over the clients of a speed bin)" if many else ")"))
        legend(ax, loc="best")
        return save(fig, path)


def stragglers_figure(groups: list[Group], colours: dict[str, str], path: str) -> str | None:
    """Stragglers and failed (selected but not aggregated) clients per cloud round."""
    return per_round_panels(groups, colours, (("stragglers", "stragglers per round"),
                                              ("failed", "clients not aggregated per round")),
                            path, counts=True)
