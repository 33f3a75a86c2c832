"""Moved to hierfl.outputs (readers) and hierfl.report.stats (seed groups); this name stays only
for hierfl/run.py (`from .report.records import read_metrics`) until run imports it from
hierfl.outputs. Delete it then."""
from ..outputs import read_metrics

__all__ = ["read_metrics"]
