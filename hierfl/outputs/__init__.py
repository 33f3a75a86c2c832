"""Every file a run writes, in one place: the columns, writers and readers of metrics.csv,
clients.csv, trace.csv, summary.json (with the scenario and topology copies), and the crash-safe
file writing they share. The report reads runs through this package only.

    columns  -- METRIC_COLUMNS, CLIENT_COLUMNS, TRACE_COLUMNS, the fast clients.csv rows
    files    -- atomic writes (temp + rename), CsvLog (appended, flushed), Background writer
    metrics  -- read_metrics -> Series, load_run -> Run, read_clients
    trace    -- read_round, read_round_columns: one cloud round of trace.csv
    summary  -- write_run_summary / read_summary (summary.json, scenario.yaml, topology.yaml)
    manifest -- run.json: scenario hash, labels in order, versions, start / end, finished
    lock     -- output_lock: one writer per output folder (OUT/.hierfl-lock, names the holder)"""
from .columns import CLIENT_COLUMNS, METRIC_COLUMNS, TRACE_COLUMNS, client_lines
from .files import Background, CsvLog, atomic_npz, atomic_text, atomic_write, fmt
from .metrics import CLIENT_FIELDS, Run, Series, concat_clients, load_run, read_clients, \
    read_metrics, read_run
from .summary import SCENARIO_COPY, SUMMARY, TOPOLOGY_COPY, comparable, read_summary, \
    write_run_summary
from .trace import Event, RoundColumns, read_round, read_round_columns

__all__ = ["CLIENT_COLUMNS", "METRIC_COLUMNS", "TRACE_COLUMNS", "client_lines", "Background",
           "CsvLog", "atomic_npz", "atomic_text", "atomic_write", "fmt", "CLIENT_FIELDS", "Run",
           "Series", "concat_clients", "load_run", "read_clients", "read_metrics", "read_run",
           "SCENARIO_COPY", "SUMMARY", "TOPOLOGY_COPY", "comparable", "read_summary",
           "write_run_summary", "Event", "RoundColumns", "read_round", "read_round_columns"]
