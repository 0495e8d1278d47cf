"""Where a column's values live: in a file mapping or in the heap."""

from __future__ import annotations

import numpy as np
import polars as pl


def file_backed(series: pl.Series) -> bool:
    """Whether every chunk of ``series``' values lies in a shared file
    mapping of this process (a page of a file, not of the heap)."""
    return all(array_file_backed(chunk.to_numpy()) for chunk in series.get_chunks())


def array_file_backed(array: np.ndarray) -> bool:
    """Whether ``array``'s values lie in a shared file mapping of this
    process."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            # Shared, file-backed: a path (here an unlinked one) and "s".
            if len(fields) >= 6 and fields[1].endswith("s"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= address < hi:
                    return True
    return False
