"""A list of strings that says how it was made (`StringColumn`): summary.json's long name columns,
written by the topology (topology/build.py, outputs/summary.py) and stored as a table and codes
by outputs/summary_columns.py. Its own module, so that reading a summary imports nothing of the
topology (networkx)."""
from __future__ import annotations

import numpy as np


class StringColumn(list):
    """A column of strings (a list: what summary.json holds) that also says how it was made:
    `table[codes[i]]` is item i (`codes` None: every item is its own entry), so that
    summary_columns.npz stores it without hashing 10^6 strings."""

    def __init__(self, items: list, table: list | None = None, codes: np.ndarray | None = None):
        super().__init__(items)
        self.table, self.codes = (items, None) if table is None else (table, codes)
