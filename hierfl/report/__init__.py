"""The report of a run, regenerated from its saved files.

    write_report(OUT)            -- report.md, report.html, figures, table.csv, metrics_all.csv
    compare_runs([A, B], DIR)    -- several runs on the same axes; seeds pooled (mean +- std)
    write_run_summary(sc, world) -- OUT/scenario.yaml + OUT/summary.json (what `hierfl run` records)

Modules: records (reading, seed groups, tidy export), summary (set-up record), plots (figures),
timeline (one round's Gantt bars from trace.csv), markdown (the report model and report.md),
html (the self-contained report.html)."""
