"""A trace is validated once per ``summarize``, however many stages read it."""

from __future__ import annotations

import sys
import warnings

import pytest

import sparktrail.pag.trace as trace_module
from sparktrail.engines import OnlinePipeline, summarize
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.trace import load_trace, write_trace
from sparktrail.synthetic import profile_trace, span_ns
from tests.summaries.builders import MS, shuffle_join


@pytest.fixture
def validations(monkeypatch):
    """Count calls of ``validate_trace``, wherever a module imported it from."""
    original = trace_module.validate_trace
    calls: list[int] = []

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("sparktrail") and (
            getattr(module, "validate_trace", None) is original
        ):
            monkeypatch.setattr(module, "validate_trace", counting)
    return calls


def test_summarize_validates_a_frame_exactly_once(validations):
    # GIVEN a trace frame of several windows, stages, shuffles and tasks,
    # taken in several batches
    frame = profile_trace(600)
    # WHEN it is summarized
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        s = summarize(frame, span_ns(frame) // 6, chunk_rows=100)
    # THEN the frame was validated once, not once per stage or batch
    assert len(s.windows) > 1 and not s.operator.is_empty()
    assert len(validations) == 1


def test_a_trace_is_not_validated_again(validations):
    # GIVEN a trace validated once on the way in
    trace = load_trace(shuffle_join())
    assert len(validations) == 1
    # WHEN it is summarized
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        s = summarize(trace, 2 * MS)
    # THEN nothing validates it again
    assert not s.communication.is_empty()
    assert len(validations) == 1


def test_closing_a_window_online_validates_nothing(validations, tmp_path):
    # GIVEN a trace file in a live directory, read (and validated) once
    frame = profile_trace(600)
    write_trace(frame, tmp_path / "t.arrow")
    validations.clear()
    pipeline = OnlinePipeline(tmp_path, span_ns(frame) // 6, 0)
    # WHEN the pipeline reads it and closes every window
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        closed = pipeline.poll(final=True)
    # THEN only reading the file validated it
    assert len(closed) > 1
    assert len(validations) == 1
