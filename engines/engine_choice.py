"""Which engine runs: ``--engine polars|spark`` mapped to the engine, once.

``sparktrail profile`` (through :func:`~sparktrail.engines.profiler.profile`)
and ``sparktrail live`` (and ``serve``'s live loader) pick their engine with
:func:`engine_for`: it checks the name against :data:`ENGINES` and the window
against what the engine runs (micro-batch windows on polars only), and the
:class:`Engine` it returns runs a saved trace (:meth:`Engine.summarize`) or
follows a trace directory (:meth:`Engine.live`). The engines are
imported only when asked for (pyspark is an optional extra), so that the
command line's parsers read :data:`ENGINES` and :data:`MICRO_BATCHES`
without loading polars.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError

if TYPE_CHECKING:
    from sparktrail.pag.trace import TraceLike
    from sparktrail.summaries import HintOptions, Summaries

    from .batch import Progress
    from .online import OnlinePipeline
    from .spark_live import SparkLivePipeline

__all__ = ["ENGINES", "MICRO_BATCHES", "Engine", "engine_for"]

#: The engines ``--engine`` names.
ENGINES = ("polars", "spark")
#: The window length that asks for a window per streaming micro-batch
#: (``--window batch``), wherever a window length is taken.
MICRO_BATCHES = "batch"


def _spark_unavailable(err: ImportError) -> InputError:
    return InputError(f"the spark engine is not available: {err}")


@dataclass(frozen=True)
class Engine:
    """An engine checked for a window (made by :func:`engine_for`)."""

    name: str
    window_ns: int | str

    def summarize(
        self,
        trace: TraceLike,
        progress: Progress | None = None,
        options: HintOptions | None = None,
    ) -> Summaries:
        """The summaries of a saved trace (``progress(done, batches)``
        follows the polars engine's window batches; ``options`` are the
        hint thresholds, default :class:`HintOptions`)."""
        from .batch import summarize, summarize_micro_batches

        if self.window_ns == MICRO_BATCHES:
            return summarize_micro_batches(trace, options, progress=progress)
        assert isinstance(self.window_ns, int)
        if self.name == "polars":
            return summarize(trace, self.window_ns, options=options, progress=progress)
        try:
            from .spark import summarize_spark
        except ImportError as err:  # pyspark (and pandas) are an optional extra
            raise _spark_unavailable(err) from err
        return summarize_spark(trace, self.window_ns, options=options)

    def live(
        self, trace_dir: str | Path, lateness_ns: int, **options: Any
    ) -> OnlinePipeline | SparkLivePipeline:
        """The live pipeline following ``trace_dir`` (``options`` go to it)."""
        from .online import OnlinePipeline

        if self.name == "polars":
            return OnlinePipeline(trace_dir, self.window_ns, lateness_ns, **options)
        assert isinstance(self.window_ns, int)
        try:
            from .spark_live import SparkLivePipeline
        except ImportError as err:
            raise _spark_unavailable(err) from err
        return SparkLivePipeline(trace_dir, self.window_ns, lateness_ns, **options)


def engine_for(name: str, window_ns: int | str) -> Engine:
    """The engine ``name`` (one of :data:`ENGINES`) for windows of ``window_ns``.

    ``window_ns`` is a window length, or
    :data:`MICRO_BATCHES` for one window per
    streaming micro-batch (polars only).

    Raises
    ------
    InputError
        If the engine is unknown, the window is neither, or the spark
        engine is asked for micro-batch windows.

    >>> engine_for("polars", "batch")
    Engine(name='polars', window_ns='batch')
    >>> engine_for("spark", "batch")
    Traceback (most recent call last):
    ...
    sparktrail.errors.InputError: --window batch runs on the polars engine only
    """
    if name not in ENGINES:
        raise InputError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
    if not isinstance(window_ns, int):
        if window_ns != MICRO_BATCHES:
            expected = f"a length in ns or {MICRO_BATCHES!r}"
            raise InputError(f"window {window_ns!r}: expected {expected}")
        if name == "spark":
            raise InputError(f"--window {MICRO_BATCHES} runs on the polars engine only")
    return Engine(name, window_ns)
