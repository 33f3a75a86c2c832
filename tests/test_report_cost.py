"""The report's fixed cost (issue 19) without a change of content: bars drawn as one collection
are the rectangles `ax.bar` and `ax.hist` draw, on the same axis limits; a whole report parses
no mathtext (five log-axis labels cost their figure tenths of a CPU second); the figures are
laid out and drawn at one dpi."""
from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest

from hierfl.cli import main
from hierfl.report.plots import STYLE, plt
from hierfl.report.plots.style import bars
from hierfl.report.plots.system import _hist
from test_report import SCENARIO


def corners(pc) -> np.ndarray:
    """(n, 4) x0, y0, x1, y1 of each polygon of a collection."""
    return np.array([[*p.vertices.min(0), *p.vertices.max(0)] for p in pc.get_paths()])


def rects(patches) -> np.ndarray:
    out = []
    for r in patches:
        x0, y0 = r.get_xy()
        out.append([min(x0, x0 + r.get_width()), min(y0, y0 + r.get_height()),
                    max(x0, x0 + r.get_width()), max(y0, y0 + r.get_height())])
    return np.array(out)


@pytest.mark.parametrize("align", ["center", "edge"])
def test_bars_are_the_rectangles_of_ax_bar(align):
    rng = np.random.default_rng(3)
    x = np.arange(12.0)
    h, below = rng.uniform(0, 9, 12), rng.uniform(0, 4, 12)
    with plt.rc_context(STYLE):
        fig, (a, b) = plt.subplots(1, 2)
        ref = [a.bar(x, below, width=0.85, align=align, linewidth=0),
               a.bar(x, h, width=0.85, bottom=below, align=align, linewidth=0)]
        ours = [bars(b, x, below, 0.85, align=align, color="C0", label="low"),
                bars(b, x, h, 0.85, bottom=below, align=align, color="C1", label="high")]
        for r, o in zip(ref, ours):
            np.testing.assert_allclose(corners(o), rects(r.patches), atol=1e-12)
        assert a.get_xlim() == pytest.approx(b.get_xlim())
        assert a.get_ylim() == pytest.approx(b.get_ylim()) and b.get_ylim()[0] == 0.0
        assert b.get_legend_handles_labels()[1] == ["low", "high"]     # shown in a legend
        plt.close(fig)


@pytest.mark.parametrize("log", [False, True])
def test_histogram_bars_are_those_of_ax_hist(log):
    rng = np.random.default_rng(5)
    sets = [(rng.lognormal(0, 1, 40), "a", "#4C72B0"), (rng.lognormal(1, 0.5, 7), "b", "#C44E52")]
    with plt.rc_context(STYLE):
        fig, (a, b) = plt.subplots(1, 2)
        _hist(b, sets, log, "x")
        ours = [c for c in b.collections]
        assert len(ours) == 2 and b.get_legend_handles_labels()[1] == ["a (n=40)", "b (n=7)"]
        edges = np.unique(np.concatenate([corners(c)[:, [0, 2]].ravel() for c in ours]))
        for (v, _, _), o in zip(sets, ours):
            _, _, patches = a.hist(v, bins=edges)
            np.testing.assert_allclose(corners(o), rects(patches), rtol=1e-12)
        if log:
            assert b.get_xscale() == "log"
        plt.close(fig)


def test_a_report_parses_no_mathtext_and_draws_every_figure(tmp_path, monkeypatch):
    """Default log-axis labels (2×10⁹) are mathtext; the report labels its log axes in plain
    engineering units, so a whole report never builds the mathtext parser. Device speeds that
    span less than a decade are the case the default formatter labels with mathtext."""
    scen = tmp_path / "s.yaml"
    # test_report's tiny system, on devices that span less than a decade of speed
    scen.write_text(SCENARIO.replace("low: 5.0e+6, high: 2.0e+7", "low: 4.0e+8, high: 3.0e+9"))
    out = tmp_path / "out"
    assert main(["run", str(scen), "--out", str(out), "--quiet", "--no-report"]) == 0
    import matplotlib.mathtext

    monkeypatch.setenv("HIERFL_REPORT_WORKERS", "0")      # drawn here, where parse is watched
    parsed: list[str] = []
    real = matplotlib.mathtext.MathTextParser.parse
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse",
                        lambda self, s, *a, **k: parsed.append(s) or real(self, s, *a, **k))
    assert main(["report", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "could not be drawn" not in md
    assert (out / "steps_vs_speed.png").is_file() and (out / "devices.png").is_file()
    assert parsed == []
    svg = (out / "steps_vs_speed.svg").read_text()
    assert "GFLOP/s" in svg                       # the speed axis in engineering units


def test_figures_are_laid_out_at_the_dpi_they_are_saved_at():
    """tight_layout's renderer is the PNG's (same canvas size and dpi): the text sizes measured
    for the layout are reused when the PNG is drawn instead of measured again."""
    assert STYLE["figure.dpi"] == STYLE["savefig.dpi"]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        ax.set_xlabel("x")
        fig.tight_layout()
        first = fig.canvas.get_renderer()
        fig.savefig(io.BytesIO(), format="png")
        assert fig.canvas.get_renderer() is first
        plt.close(fig)
