"""The look shared by every figure: the matplotlib style (Agg), one colour per curve label, PNG +
SVG saving, and small axis helpers."""
from __future__ import annotations

import math
import os
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from ..stats import Group  # noqa: E402
from . import background  # noqa: E402

STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8.5,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "lines.linewidth": 1.7, "svg.fonttype": "none",
    "savefig.dpi": 150, "figure.dpi": 150,     # one dpi: the layout's text metrics serve the PNG
    "savefig.pad_inches": 0.05, "legend.frameon": False,
    "svg.hashsalt": "hierfl",        # SVG ids from the content, not a random salt: same bytes
}
# one colour per curve from tab10 (ten hues no two alike); past ten labels the colours come
# round again, each round with its own marker (and hatch for bars), so no two curves of a report
# look the same up to len(COLOURS) * len(MARKERS) labels (Dark2 after tab10 repeated its greens)
COLOURS = list(plt.get_cmap("tab10").colors)
MARKERS = ("", "o", "s", "^", "D", "v", "P", "X")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
LEGEND_INSIDE = 8            # a legend of more entries goes outside the axes, at the right
KIND_COLOURS = {"download": "#4C72B0", "compute": "#55A868", "upload": "#DD8452",
                "idle": "#E8E8E8"}
W1, H1 = 6.4, 4.0            # one-panel figure, inches
PNG_LEVEL = 3                # zlib level: ~2/3 of the encoding time of PIL's 6; files 5-15 % larger
MAX_BARS = 400               # per-client bar charts above this many clients become areas


def colour(i: int) -> str:
    return matplotlib.colors.to_hex(COLOURS[i % len(COLOURS)])


def palette(labels: Iterable[str]) -> dict[str, str]:
    """A fixed colour per label, in order of first appearance."""
    out: dict[str, str] = {}
    for lab in labels:
        if lab not in out:
            out[lab] = colour(len(out))
    return out


def _round(colours: dict[str, str], label: str) -> int:
    """How many times the colours came round before `label` (0 for the first ten labels)."""
    i = list(colours).index(label) if label in colours else 0
    return i // len(COLOURS)


def marker(colours: dict[str, str], label: str) -> str | None:
    """The marker that tells `label`'s curve from an earlier one of the same colour (None for
    the first ten labels: plain lines)."""
    return MARKERS[_round(colours, label) % len(MARKERS)] or None


def hatch(colours: dict[str, str], label: str) -> str | None:
    """The hatch that tells `label`'s bars from an earlier label's of the same colour."""
    return HATCHES[_round(colours, label) % len(HATCHES)] or None


def save(fig: plt.Figure, path: str, rect: tuple[float, float, float, float] | None = None,
         svg: bool = True) -> str:
    """PNG and (`svg`) SVG of `fig` (laid out tightly within `rect`, figure coordinates); in a
    forked child inside `background.background_saves` (a report), else here."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def write() -> None:
        fig.tight_layout(rect=rect)  # figure.dpi = savefig.dpi: the PNG reuses its renderer
        fig.savefig(path, metadata={"Software": None}, pil_kwargs={"compress_level": PNG_LEVEL})
        if svg:
            fig.savefig(os.path.splitext(path)[0] + ".svg", metadata={"Date": None})
    try:
        if not background.submit(path, write):
            write()
    finally:
        plt.close(fig)
    return path


def bars(ax: plt.Axes, x: np.ndarray, height: np.ndarray, width: float | np.ndarray,
         bottom: float | np.ndarray = 0.0, align: str = "center", **kw) -> PolyCollection:
    """Vertical bars as one PolyCollection without edges (`ax.bar` makes and draws one Rectangle
    per bar: the report's histograms and per-client bars were hundreds of artists, each drawn
    three times). The axis floor sticks to the lowest bottom, as with `ax.bar`; `kw` (color,
    alpha, label, ...) go to the collection, which a legend shows as a patch."""
    x, h = np.asarray(x, float), np.asarray(height, float)
    w = np.broadcast_to(np.asarray(width, float), x.shape)
    b = np.broadcast_to(np.asarray(bottom, float), x.shape)
    left = x - w / 2 if align == "center" else x
    verts = np.stack([np.stack(c, 1) for c in ((left, b), (left + w, b), (left + w, b + h),
                                                (left, b + h))], 1)
    pc = PolyCollection(verts, edgecolors="none", linewidths=0, **kw)
    if len(b):
        pc.sticky_edges.y.append(float(b.min()))
    ax.add_collection(pc)
    ax.autoscale_view()
    return pc


def finite(xs: list[float], ys: list[float], *more: list[float]) -> list[np.ndarray]:
    cols = [np.asarray(c, float) for c in (xs, ys, *more)]
    ok = np.isfinite(cols[0]) & np.isfinite(cols[1])
    return [c[ok] for c in cols]


def legend(ax: plt.Axes, handles: list | None = None, labels: list[str] | None = None,
           **kw) -> None:
    """The axes' legend where `kw` puts it; one of more than LEGEND_INSIDE entries (it would
    cover the curves and run off the top) outside the axes at the right, in columns of at
    most 20 entries, the figure widened by the legend's width so the axes keep their size.
    `handles` and `labels`: those to show (default: the axes' own)."""
    if handles is None or labels is None:
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) <= LEGEND_INSIDE:
            if handles:
                ax.legend(**kw)
            return
    if not handles:
        return
    if len(handles) <= LEGEND_INSIDE:
        ax.legend(handles, labels, **kw)
        return
    kw = {k: v for k, v in kw.items() if k not in ("loc", "bbox_to_anchor", "ncol")}
    ncol = math.ceil(len(handles) / 20)
    leg = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), ncol=ncol,
                    borderaxespad=0.0, fontsize=min(plt.rcParams["legend.fontsize"], 8), **kw)
    fig = ax.figure
    width = leg.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi
    w, h = fig.get_size_inches()
    fig.set_size_inches(w + width + 0.2, h)


def has(groups: list[Group], key: str) -> bool:
    return any(math.isfinite(v) for g in groups for s in g.members for v in s.col(key))


def has_positive(groups: list[Group], key: str) -> bool:
    return any(v > 0 for g in groups for s in g.members for v in s.col(key) if math.isfinite(v))
