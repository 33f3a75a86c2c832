"""Moved to hierfl.outputs.files; this name stays only for hierfl/run.py (`from .io_util import
Background, CsvLog, atomic_npz`) until run imports them from hierfl.outputs. Delete it then."""
from .outputs.files import Background, CsvLog, atomic_npz, atomic_text, atomic_write, fmt

__all__ = ["Background", "CsvLog", "atomic_npz", "atomic_text", "atomic_write", "fmt"]
