"""Keeping freed memory in the process, for large traces, or giving it back.

Large inputs allocate arrays of hundreds of MB. glibc returns such blocks to
the kernel on free (they come from ``mmap``), so the next computation pays
for page faults again; on virtual machines a first touch costs 1-8 ms per MB
(measured here), more than the CP kernel itself. :func:`retain_freed_memory`
tells glibc to serve big blocks from its heap and keep freed ones, so
repeated windows and repeated runs reuse warm pages.

It changes a process-wide allocator setting, so the library never calls it
on its own: the ``sparktrail`` command line and the benchmarks do, and so
may any application that owns its process. :func:`trim_heap` does the
opposite once, between the steps of a one-shot profile (DESIGN §10).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["retain_freed_memory", "trim_heap"]

# mallopt parameters from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


def retain_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse; return whether it applied.

    A no-op (returning False) outside Linux/glibc.

    >>> isinstance(retain_freed_memory(), bool)
    True
    """
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)  # None: no glibc at hand
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # 0 mmap'ed blocks: big arrays come from the heap; a trim threshold of
    # 2**31-1 bytes keeps up to 2 GiB of freed heap instead of returning it.
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's
    ``malloc_trim``; nothing where the C library has none).

    numpy's and numba's arrays come from the C heap, and glibc keeps what
    is freed there: after the chunk loop of a 10^7-row trace ~150 MiB of
    it stayed resident through the finish (DESIGN §10).

    >>> trim_heap()
    """
    trim = getattr(_libc(), "malloc_trim", None)  # None: not glibc (musl)
    if trim is None:
        return
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library on Linux (None elsewhere, or where it cannot be loaded)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None
