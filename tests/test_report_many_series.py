"""Issue 42 item 6: a report of many algorithms stays readable (its legend outside the axes,
no two curves drawn alike), and says when its time/bytes-to-target cells are mostly bounds."""
from __future__ import annotations

import itertools

import matplotlib
import pytest

from hierfl.outputs import Series
from hierfl.report.plots import style
from hierfl.report.plots.curves import accuracy_axes
from hierfl.report.stats import Group


def _groups(n: int) -> list[Group]:
    out = []
    for i in range(n):
        rows = [{"round": float(t), "sim_time_s": float(t), "test_acc": 0.1 + 0.8 * t / 10 -
                 0.01 * i} for t in range(11)]
        out.append(Group(f"algo_{i:02d}", [Series(f"algo_{i:02d}", rows)]))
    return out


@pytest.mark.parametrize("n", [3, 20])
def test_many_curves_are_told_apart_and_their_legend_is_outside(n):
    groups = _groups(n)
    colours = style.palette(g.label for g in groups)
    with matplotlib.pyplot.rc_context(style.STYLE):
        fig, ax = matplotlib.pyplot.subplots(figsize=(style.W1, style.H1))
        accuracy_axes(ax, groups, colours, "sim_time_s", False)
        w0 = fig.get_size_inches()[0]
        style.legend(ax, loc="lower right")
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        leg, box = ax.get_legend().get_window_extent(r), ax.get_window_extent(r)
        looks = [(matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle(),
                  ln.get_marker()) for ln in ax.get_lines()]
        matplotlib.pyplot.close(fig)
    assert len(set(looks)) == len(looks) == n          # no two curves drawn alike
    if n > style.LEGEND_INSIDE:        # outside the axes, within a widened figure
        assert leg.x0 >= box.x1 and fig.get_size_inches()[0] > w0
    else:
        assert box.contains(leg.x0 + 1, leg.y0 + 1)
    # curves that share a style differ clearly in colour (tab10 then Dark2 gave two greens)
    rgb = {c: matplotlib.colors.to_rgb(c) for c, _, _ in looks}
    for (c1, s1, m1), (c2, s2, m2) in itertools.combinations(looks, 2):
        if (s1, m1) == (s2, m2):
            assert sum((a - b) ** 2 for a, b in zip(rgb[c1], rgb[c2])) ** 0.5 > 0.25


def _evaluated_every(k: int, label: str, slope: float) -> Series:
    nan = float("nan")
    return Series(label, [{"round": float(t), "sim_time_s": float(t), "bytes_up": 10.0 * t,
                           "bytes_down": 10.0 * t,
                           "test_acc": min(0.95, 0.1 + slope * t) if t % k == 0 else nan}
                          for t in range(13)])


def test_the_report_says_when_most_to_target_cells_are_bounds(tmp_path):
    from hierfl.report.build import build
    from hierfl.report.markdown import render_md
    from hierfl.outputs import Run

    def text(k: int) -> str:
        run = Run("r", str(tmp_path), [_evaluated_every(k, f"a{i}", 0.1 + 0.05 * i)
                                       for i in range(4)])
        return render_md(build(str(tmp_path / f"rep{k}"), [run], "t", 0.6, prefix=False))
    assert "Most time/bytes-to-target cells are upper bounds (4 of 4 runs" in text(3)
    assert "Most time/bytes-to-target cells" not in text(1)
