"""sparktrail in a notebook: what held *this block* back, and profiles that
render themselves.

* :func:`watch` traces a block of code on a running ``SparkSession`` live
  (the listener bridge of :mod:`sparktrail.tracer.listener`) and, when the
  block ends, profiles just that block: ``with sparktrail.watch(spark) as
  w: ...`` then ``w.profile``; the verdict is printed unless ``show=False``.
* ``%load_ext sparktrail.notebook`` adds the ``%%sparktrail`` cell magic,
  which runs its cell inside :func:`watch` on the active session.
* A :class:`~sparktrail.engines.profiler.Profile` shown in IPython renders
  as HTML (its header, verdict and hints: :func:`profile_html`) once this
  module or :func:`sparktrail.profile` has run in that kernel.

Assumptions
-----------
* The block's profile covers the rows of the trace that end after the
  block began, and the run is the block: its start and end are the
  block's, so what ran before it (the session's start-up, earlier cells)
  is no part of the verdict.
* A block that ran no Spark job has no profile (``w.profile`` is ``None``):
  the verdict says so, nothing to profile.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError

if TYPE_CHECKING:
    from sparktrail.engines.profiler import Profile

__all__ = ["NO_JOB", "Watch", "load_ipython_extension", "profile_html", "watch"]

#: What a block that ran no Spark job gets instead of a verdict.
NO_JOB = "No Spark job ran in this block: nothing to profile."


def profile_html(profile: Profile) -> str:
    """The HTML a notebook shows for ``profile``: what ran, the verdict and
    the shown hints (:func:`sparktrail.dashboard.report.notebook_html`)."""
    from sparktrail.dashboard.report import notebook_html

    return notebook_html(profile)


def register_display() -> None:
    """Render every :class:`~sparktrail.engines.profiler.Profile` as HTML in
    the running IPython kernel (nothing outside IPython)."""
    ipython_module = sys.modules.get("IPython")
    if ipython_module is None:
        return
    shell = ipython_module.get_ipython()
    if shell is None:
        return
    from sparktrail.engines.profiler import Profile

    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type(Profile, profile_html)


class Watch:
    """A block of code on ``spark``, traced live and then profiled.

    Use :func:`watch`. After the block, :attr:`profile` is the block's
    :class:`~sparktrail.engines.profiler.Profile` (``None`` when it ran no
    Spark job) and :attr:`trace_dir` holds its trace.
    """

    def __init__(
        self,
        spark: Any,
        out_dir: str | Path | None = None,
        window_ns: int | str = 1_000_000_000,
        show: bool = True,
    ) -> None:
        if getattr(spark, "sparkContext", None) is None:
            raise InputError(
                f"watch needs a running SparkSession, not {type(spark).__name__}"
            )
        self.spark = spark
        self.trace_dir = Path(
            out_dir if out_dir is not None else tempfile.mkdtemp(prefix="sparktrail-")
        )
        self.window_ns = window_ns
        self.show = show
        self.profile: Profile | None = None
        self._handle: Any = None
        self._began_ns = 0

    def __enter__(self) -> Watch:
        from sparktrail.tracer.listener import attach

        if self.spark.sparkContext._jsc is None:
            raise InputError("watch: the SparkSession is stopped; start one first")
        self._handle = attach(self.spark, self.trace_dir, flush_seconds=0.5)
        # From here: attaching (compiling and loading the listener) is not
        # the block's time.
        self._began_ns = time.time_ns()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ended = time.time_ns()
        self._handle.detach()
        self.profile = self._block_profile(ended)
        if self.show:
            print(self.verdict)

    @property
    def verdict(self) -> str:
        """The block's verdict, or :data:`NO_JOB`."""
        if self.profile is None:
            return NO_JOB
        from sparktrail.dashboard.verdict import verdict

        return verdict(self.profile.summaries)

    def _block_profile(self, ended_ns: int) -> Profile | None:
        import polars as pl

        from sparktrail.engines.profiler import profile
        from sparktrail.pag.trace import Trace
        from sparktrail.sources import open_trace

        if not any(self.trace_dir.glob("*.arrow")):
            return None
        trace, _ = open_trace(self.trace_dir)

        began = self._began_ns
        rows = _block_rows(trace.frame, began, ended_ns)
        if rows.filter(pl.col("task_id").is_not_null()).is_empty():
            return None
        # The block is the run: what came before it is no part of it, and
        # its end is the block's (the application goes on: no end is due).
        log = trace.context.log
        context = dataclasses.replace(
            trace.context,
            start_ns=began,
            end_ns=max(ended_ns, int(rows["end_ns"].max())),  # type: ignore[arg-type]
            log=None if log is None else dataclasses.replace(log, app_end=True),
        )
        register_display()
        return profile(Trace(rows, context), self.window_ns, name="this block")


def _block_rows(frame: Any, began: int, ended: int) -> Any:
    """The trace rows of a block that ran from ``began`` to ``ended``: a
    driver row that crosses either is cut there (a task runs on as it ran);
    the wait before the block's first job is the block's own driver code,
    not the application's start-up.

    >>> import polars as pl
    >>> f = pl.DataFrame({"start_ns": [0, 5, 12, 20], "end_ns": [4, 15, 20, 30],
    ...     "activity": ["startup", "startup", "processing", "driver"],
    ...     "task_id": [None, None, 1, None]})
    >>> _block_rows(f, 10, 25).rows()
    [(10, 15, 'driver', None), (12, 20, 'processing', 1), (20, 25, 'driver', None)]
    """
    import polars as pl

    driver = pl.col("task_id").is_null()
    keep = (pl.col("end_ns") > began) & ~(driver & (pl.col("start_ns") >= ended))
    crossing = pl.col("start_ns") < began
    return frame.filter(keep).with_columns(
        pl.when(crossing)
        .then(pl.lit(began))
        .otherwise(pl.col("start_ns"))
        .cast(frame.schema["start_ns"])
        .alias("start_ns"),
        pl.when(driver & (pl.col("end_ns") > ended))
        .then(pl.lit(ended))
        .otherwise(pl.col("end_ns"))
        .cast(frame.schema["end_ns"])
        .alias("end_ns"),
        pl.when(pl.col("activity") == "startup")
        .then(pl.lit("driver"))
        .otherwise(pl.col("activity"))
        .alias("activity"),
    )


def watch(
    spark: Any,
    out_dir: str | Path | None = None,
    window_ns: int | str = 1_000_000_000,
    show: bool = True,
) -> Watch:
    """Trace a block of code on ``spark`` live and profile just that block.

    Parameters
    ----------
    spark
        A running ``SparkSession``.
    out_dir
        Where the block's trace goes (default: a new temporary folder).
    window_ns
        The profile's window length (ns, default 1 s) or ``"batch"``.
    show
        Print the block's verdict when it ends.

    Returns
    -------
    Watch
        A context manager; after the block, ``.profile`` and ``.verdict``.

    Raises
    ------
    InputError
        If ``spark`` is not a running SparkSession.

    Examples
    --------
    >>> watch(object())
    Traceback (most recent call last):
    ...
    sparktrail.errors.InputError: watch needs a running SparkSession, not object
    """
    return Watch(spark, out_dir, window_ns, show)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext sparktrail.notebook``: the ``%%sparktrail`` cell magic
    (its cell runs inside :func:`watch` on the active SparkSession, and the
    block's profile is displayed) and HTML rendering of profiles."""
    from IPython.core.magic import register_cell_magic

    register_display()

    @register_cell_magic("sparktrail")  # type: ignore[misc,arg-type]
    def sparktrail_magic(line: str, cell: str) -> Any:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise InputError("%%sparktrail: no active SparkSession in this kernel")
        with watch(spark, show=False) as block:
            ipython.run_cell(cell)
        if block.profile is None:
            print(NO_JOB)
            return None
        return block.profile
