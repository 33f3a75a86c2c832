"""Figures of a report (matplotlib, Agg), saved as PNG and SVG at publication quality: labelled
axes with units, readable fonts, one colour per curve (algorithm) across every figure.

Every function takes the data it draws and a path, and returns the PNG path (the SVG sits next to
it), or None when there is nothing to draw. Curves of several seeds are drawn as the mean with a
+-1 std band. By subject: style (look, colours, saving), curves, stragglers, timeline, system,
protection (accuracy under attack)."""
from .curves import accuracy_figure, band, dissimilarity_figure, loss_figure, tier_bytes_figure, \
    tier_figure
from .protection import attack_figure
from .stragglers import gamma_figure, stragglers_figure, steps_figure, steps_speed_figure
from .style import STYLE, colour, palette, plt, save
from .system import data_figure, devices_figure, topology_figure
from .timeline import timeline_figure

__all__ = ["accuracy_figure", "attack_figure", "band", "dissimilarity_figure", "loss_figure",
           "tier_bytes_figure", "tier_figure", "gamma_figure", "stragglers_figure", "steps_figure",
           "steps_speed_figure", "STYLE", "colour", "palette", "plt", "save", "data_figure",
           "devices_figure", "topology_figure", "timeline_figure"]
