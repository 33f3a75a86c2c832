"""Moved to hierfl.outputs.summary; this name stays only for hierfl/run.py (`from .report.summary
import write_run_summary`) until run imports it from hierfl.outputs. Delete it then."""
from ..outputs import write_run_summary

__all__ = ["write_run_summary"]
