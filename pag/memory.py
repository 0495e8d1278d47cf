"""Keeping freed memory in the process, for large traces.

Large inputs allocate arrays of hundreds of MB. glibc returns such blocks to
the kernel on free (they come from ``mmap``), so the next computation pays
for page faults again; on virtual machines a first touch costs 1-8 ms per MB
(measured here), more than the CP kernel itself. :func:`retain_freed_memory`
tells glibc to serve big blocks from its heap and keep freed ones, so
repeated windows and repeated runs reuse warm pages.

It changes a process-wide allocator setting, so the library never calls it
on its own: the ``sparktrail`` command line and the benchmarks do, and so
may any application that owns its process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["retain_freed_memory"]

# mallopt parameters from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


def retain_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse; return whether it applied.

    A no-op (returning False) outside Linux/glibc.

    >>> isinstance(retain_freed_memory(), bool)
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # 0 mmap'ed blocks: big arrays come from the heap; a trim threshold of
    # 2**31-1 bytes keeps up to 2 GiB of freed heap instead of returning it.
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
