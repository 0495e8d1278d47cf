"""The live engines' close rule: which windows the watermark lets them close.

Both live engines (:class:`~sparktrail.engines.online.OnlinePipeline` and
:class:`~sparktrail.engines.spark_live.SparkLivePipeline`) follow it:

* The *watermark* is the latest event time seen minus the lateness: a row
  may still arrive up to ``lateness_ns`` behind the latest event.
* Fixed windows are ``[k * w, (k + 1) * w)`` since the Unix epoch (the
  pag's :func:`~sparktrail.pag.windows.window_floor` with origin 0); the
  first open window starts at the window of the first event, or where the
  last close ended.
* A poll closes every window that ends at or before the watermark; a final
  poll closes every window up to the one holding the last event.
* Micro-batch windows (polars engine only) end at the traced triggers'
  boundaries: a poll closes up to the last boundary the watermark passed,
  a final poll up to just past the last event (as
  :func:`~sparktrail.engines.batch.micro_batch_bounds` ends the last one).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparktrail.pag.windows import window_ceil, window_floor

__all__ = ["batch_close_until", "close_until", "open_from", "watermark"]


def watermark(last_ns: int | None, lateness_ns: int) -> int | None:
    """The latest event time seen minus the lateness (``None``: no row yet).

    >>> watermark(25, 4), watermark(None, 4)
    (21, None)
    """
    return None if last_ns is None else last_ns - lateness_ns


def open_from(closed_until: int | None, first_ns: int, window_ns: int | None) -> int:
    """Start of the first window not closed yet.

    ``window_ns`` ``None``: micro-batch windows, whose first starts at the
    first event.

    >>> open_from(None, 25, 10), open_from(40, 25, 10), open_from(None, 25, None)
    (20, 40, 25)
    """
    if closed_until is not None:
        return closed_until
    return first_ns if window_ns is None else window_floor(first_ns, window_ns)


def close_until(last_ns: int, lateness_ns: int, window_ns: int, *, final: bool) -> int:
    """End of the fixed windows a poll may close (none when it is not past
    :func:`open_from`).

    >>> close_until(25, 4, 10, final=False), close_until(25, 4, 10, final=True)
    (20, 30)
    """
    if final:
        return window_ceil(last_ns, window_ns)
    return window_floor(last_ns - lateness_ns, window_ns)


def batch_close_until(
    last_ns: int, lateness_ns: int, boundaries: Sequence[int], *, final: bool
) -> int | None:
    """End of the micro-batch windows a poll may close (``None``: no
    boundary the watermark passed yet); ``boundaries`` in time order.

    >>> batch_close_until(25, 4, [10, 20, 30], final=False)
    20
    >>> batch_close_until(25, 4, [30], final=False) is None
    True
    >>> batch_close_until(25, 4, [30], final=True)
    26
    """
    if final:
        return last_ns + 1
    passed = [t for t in boundaries if t <= last_ns - lateness_ns]
    return passed[-1] if passed else None
