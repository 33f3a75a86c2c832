"""The report of a run, regenerated from its saved files (read through hierfl.outputs only).

    write_report(OUT)            -- report.md, report.html, figures, table.csv, metrics_all.csv
    compare_runs([A, B], DIR)    -- several runs on the same axes; seeds pooled (mean +- std)

Modules: stats (mean and sample std, seed groups), tables (numbers, cells, table.csv,
metrics_all.csv), model (the report as sections, figures and notes), build (the model from the
runs), markdown and html (two renderers of the model, independent of each other), plots/ (the
figures by subject), timeline (one round's Gantt bars from trace.csv), write (the entry points)."""
from .write import compare_runs, write_report

__all__ = ["compare_runs", "write_report"]
