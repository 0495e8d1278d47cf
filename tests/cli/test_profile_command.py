"""The ``sparktrail profile`` subcommand: report, summaries, JSON, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sparktrail import summarize
from sparktrail.cli import main, profile
from sparktrail.cli.profile import hints_json
from sparktrail.dashboard.report import SECTIONS, SUMMARY_FRAMES, TABLES
from sparktrail.pag.context import AppContext
from sparktrail.pag.trace import write_trace
from sparktrail.summaries import Summaries
from sparktrail.tracer import import_trace
from tests.paths import KAFKA_STREAMING_LOG, SHARED_LOG

LOG = SHARED_LOG
S = 1_000_000_000

pytestmark = pytest.mark.skipif(not LOG.exists(), reason=f"{LOG} is missing")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT_DIR of one ``profile`` run over the shared event log."""
    out = tmp_path_factory.mktemp("profile") / "out"
    assert main(["profile", str(LOG), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace file of one stage whose task 0 runs 10x the others (YARN)."""
    workers = [f"exec-1/{i}" for i in range(4)]
    frame = pl.DataFrame(
        {
            "src_worker": workers,
            "dst_worker": workers,
            "start_ns": [0] * 4,
            "end_ns": [s * S for s in (10, 1, 1, 1)],
            "activity": ["processing"] * 4,
            "task_id": [0, 1, 2, 3],
            "stage_id": [0] * 4,
            "partition": [0, 1, 2, 3],
            "records": [100] * 4,
        }
    )
    path = tmp_path_factory.mktemp("straggler") / "app.arrow"
    return write_trace(frame, path, AppContext(master="yarn"))


@pytest.fixture(scope="module")
def expected() -> object:
    return summarize(import_trace(LOG), S)


def same(left: pl.DataFrame, right: pl.DataFrame) -> None:
    # Sums over polars group-bys may differ in the last bit between runs
    # (summation order), so floats are compared to 1e-9.
    assert_frame_equal(left, right, check_exact=False, rel_tol=1e-9, abs_tol=1e-15)


def read_summaries(out: Path) -> dict[str, pl.DataFrame]:
    return {
        name: pl.read_parquet(out / "summaries" / f"{name}.parquet")
        for name in SUMMARY_FRAMES
    }


def test_report_is_self_contained_with_every_section(profiled: Path) -> None:
    # GIVEN a profile of the shared event log
    page = (profiled / "report.html").read_text(encoding="utf-8")
    # THEN plotly.js is inlined (its banner once) and nothing loads from
    # the net; one plot per section but the overview, the hints and (one
    # executor: local mode) the communication
    assert page.count("* plotly.js v") == 1
    assert 'src="http' not in page and "src='http" not in page
    # (and no streaming query: no streaming section, no word of it)
    assert page.count("Plotly.newPlot") == len(SECTIONS) - 4 - len(TABLES)
    # AND every section is there but the streaming one, the header names the
    # input and window
    for section in SECTIONS:
        assert (f'id="{section}"' in page) == (section != "streaming")
    assert "Structured Streaming" not in page and "micro-batch" not in page
    assert "local-1532512550423" in page
    assert "1 s" in page
    assert "17 (17 with a critical path)" in page
    # AND no hint: start-up holds the run, and nothing else saves 2%
    assert "No rebalancing hint" in page
    # AND the communication section carries the shuffle-attribution note
    assert "split over source executors" in page


def test_report_lists_hints_as_a_plain_table(straggler: Path, tmp_path: Path) -> None:
    # GIVEN a profile of a trace with a straggler task
    assert main(["profile", str(straggler), "-o", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    # THEN the hints are a plain HTML table, readable without JavaScript,
    # with the predicted saving of each
    assert '<table class="hints">' in page
    assert "straggler_task" in page and "predicted saving" in page
    assert "6 s (60% of the run)" in page  # 10 s -> (3 + 1) x 1 s


def test_parquet_summaries_equal_the_summaries(profiled: Path, expected) -> None:
    # GIVEN the profile's parquet files WHEN read back THEN they equal the
    # frames of summarize() on the imported log
    frames = read_summaries(profiled)
    assert set(frames) == set(SUMMARY_FRAMES)
    for name, frame in frames.items():
        same(frame, getattr(expected, name))


def test_terminal_summary_names_stages_workers_and_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", str(LOG), "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "73 trace rows, 17 windows of 1 s" in out
    stages = out.split("Top critical operators")[1].split("Top workers")[0]
    # the log's two RDD jobs run one operator, named by its call site
    assert "collect at <console>:25 (2 stages)" in stages
    # AND the time outside any stage is named by its parts, the largest first
    # (the shell starts for 12 s before its first job)
    outside = next(line for line in stages.splitlines() if "(no stage:" in line)
    assert "(no stage: start-up 75%, driver code between jobs" in outside
    workers = out.split("Top workers")[1].split("Hints")[0].strip().splitlines()
    assert workers[1].split()[-1] == "driver"
    assert "Hints (0):" in out and "none:" in out
    assert str(tmp_path / "report.html") in out


def test_terminal_summary_gives_each_hints_saving(
    straggler: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", str(straggler), "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[high] straggler_task, saves 6 s (60% of the run): task 0 ran" in out


def test_a_dstream_falling_behind_reads_as_its_share_of_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the planted DStream whose batches take 1.6 s for a 1 s interval
    log = Path(__file__).parents[2] / "bench/advice/planted/dstream_behind-base.zstd"
    assert main(["profile", str(log), "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # THEN its backlog is named with the share of the input that falls
    # behind, not as a time "saved", and with the batch interval
    line = next(x for x in out.splitlines() if "stream_backlog" in x)
    assert "[high] stream_backlog, " in line and "of the input falls behind" in line
    assert "saves" not in line.split(":")[0]
    assert "for a 1 s batch interval" in line


def test_json_prints_only_the_hints_on_stdout(
    straggler: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # WHEN profile runs with --json
    assert main(["profile", str(straggler), "-o", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    # THEN stdout parses as JSON and equals the hints frame (evidence decoded)
    expected = summarize(straggler, S)
    hints = json.loads(captured.out)
    assert hints == hints_json(expected.hints)
    assert [h["kind"] for h in hints] == ["straggler_task", "idle_capacity"]
    assert isinstance(hints[0]["evidence"], dict)
    assert hints[0]["predicted_saving_ns"] == pytest.approx(6 * S)
    # AND the terminal summary went to stderr
    assert "Top critical operators" in captured.err


def test_trace_directory_gives_the_same_summaries(
    tmp_path: Path, profiled: Path
) -> None:
    # GIVEN the imported log written as a trace directory, with its context
    write_trace(import_trace(LOG), tmp_path / "trace" / "app.arrow")
    # WHEN it is profiled THEN every summary equals the event log's
    assert main(["profile", str(tmp_path / "trace"), "-o", str(tmp_path / "out")]) == 0
    from_trace = read_summaries(tmp_path / "out")
    from_log = read_summaries(profiled)
    for name in SUMMARY_FRAMES:
        same(from_trace[name], from_log[name])


def test_window_option_changes_the_windows(tmp_path: Path) -> None:
    assert main(["profile", str(LOG), "-o", str(tmp_path), "--window", "250ms"]) == 0
    windows = pl.read_parquet(tmp_path / "summaries" / "windows.parquet")
    assert (
        windows["window_end_ns"] - windows["window_start_ns"]
    ).unique().to_list() == [250_000_000]


def bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "random.bin").write_bytes(os.urandom(4096))
    (tmp_path / "table.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "other-dir").mkdir()
    (tmp_path / "other-dir" / "notes.txt").write_text("hello\n")
    (tmp_path / "broken.arrow").write_bytes(b"not arrow at all")
    return {
        "missing": (tmp_path / "missing", "no such file or directory"),
        "empty directory": (tmp_path / "empty-dir", "empty directory"),
        "empty file": (tmp_path / "empty.log", "empty file"),
        "random bytes": (tmp_path / "random.bin", "neither a trace"),
        "csv": (tmp_path / "table.csv", "neither a trace"),
        "unrelated directory": (tmp_path / "other-dir", "neither a trace"),
        "broken arrow": (tmp_path / "broken.arrow", "not an Arrow IPC trace file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "empty directory",
        "empty file",
        "random bytes",
        "csv",
        "unrelated directory",
        "broken arrow",
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an INPUT that is not a trace or an event log
    path, reason = bad_inputs(tmp_path)[case]
    # WHEN profile runs on it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. one per skipped CSV line
        code = main(["profile", str(path), "-o", str(tmp_path / "out")])
    # THEN exit code 2 and one line naming the path and what is wrong
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert str(path) in lines[0] and reason in lines[0]
    assert "Traceback" not in captured.err
    assert not (tmp_path / "out" / "report.html").exists()


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ("0s", "must be positive"),
        ("5", "is not a duration"),
        ("-1s", "is not a duration"),
    ],
)
def test_bad_window_is_a_usage_error(
    window: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["profile", str(LOG), "-o", str(tmp_path), f"--window={window}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage:") and message in err


def test_spark_engine_missing_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN no importable spark engine (whether or not it exists yet)
    monkeypatch.setitem(sys.modules, "sparktrail.engines.spark", None)
    code = main(["profile", str(LOG), "-o", str(tmp_path), "--engine", "spark"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "the spark engine is not available:" in err


def test_subprocess_reports_bad_input_without_traceback(tmp_path: Path) -> None:
    # GIVEN a real process running the CLI on random bytes
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(2048))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparktrail",
            "profile",
            str(junk),
            "-o",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # THEN exit 2, one line on stderr, no traceback
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(junk) in done.stderr


def test_progress_bar_on_a_terminal_keeps_stdout_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN stderr is a terminal, so the progress bar is drawn there
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    # WHEN profile runs with --json
    assert main(["profile", str(LOG), "-o", str(tmp_path), "--json"]) == 0
    # THEN stdout still holds nothing but the JSON hints
    assert isinstance(json.loads(capsys.readouterr().out), list)


def test_the_summary_step_shows_its_window_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a progress bar that records every description it is given
    descriptions: list[str] = []

    class Bar:
        def add_task(self, description: str, total: int) -> int:
            return 0

        def update(self, task: int, **fields: Any) -> None:
            if "description" in fields:
                descriptions.append(fields["description"])

    @contextmanager
    def recording(show: bool) -> Iterator[profile._Steps]:
        yield profile._Steps(Bar())

    monkeypatch.setattr(profile, "_progress", recording)
    # WHEN profile runs on the polars engine
    assert main(["profile", str(LOG), "-o", str(tmp_path)]) == 0
    # THEN the summary step counted its window batches, then moved on
    batches = [d for d in descriptions if "batch" in d]
    assert batches and batches[-1].startswith("summaries and hints: batch 1/")
    assert descriptions.index(batches[-1]) < len(descriptions) - 1


def test_terminal_summary_starts_with_the_header_and_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the shared log (Spark 2.3.0 shell, local[*], start-up 3/4 of it)
    assert main(["profile", str(LOG), "-o", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # THEN the first line says what ran, the second the verdict
    assert lines[0] == (
        "Spark shell (local-1532512550423) · Spark 2.3.0 · local[*] (client mode) "
        "· 16 s wall time · local, 4 cores · 2 jobs, 2 stages, 8 tasks"
    )
    assert lines[1].startswith("Verdict: Start-up took 75% of the run; the 2 jobs ran")
    assert lines[1].endswith("with no bottleneck worth acting on.")
    # AND the context travels with the summaries for `serve --report`
    back = AppContext.from_json((tmp_path / "summaries" / "context.json").read_text())
    assert back.app_id == "local-1532512550423"


def test_window_batch_cuts_a_streaming_log_at_its_micro_batches(tmp_path: Path) -> None:
    from sparktrail.dashboard.live_view import load_report

    log = KAFKA_STREAMING_LOG
    if not log.exists():
        pytest.skip(f"{log} is missing")
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["profile", str(log), "--window", "batch", "-o", str(out)]) == 0
    summaries = Summaries.load(out / "summaries")
    windows = summaries.windows
    lengths = (windows["window_end_ns"] - windows["window_start_ns"]).unique()
    # THEN windows of several lengths, starting at the batches' triggers
    assert len(lengths) > 3
    starts = set(windows["window_start_ns"].to_list())
    triggers = {b.timestamp_ns for b in summaries.context.batches}
    assert triggers - {min(triggers)} <= starts | {None}
    # AND the report and a served report say what the windows are
    assert (
        "micro-batches and the waits between them" in (out / "report.html").read_text()
    )
    assert "micro-batches" in load_report(out).status


def test_window_batch_without_micro_batches_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["profile", str(LOG), "--window", "batch", "-o", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("sparktrail: error: --window batch needs")


def test_json_without_an_output_writes_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an empty working directory
    monkeypatch.chdir(tmp_path)
    # WHEN profile prints JSON without -o
    assert main(["profile", str(LOG), "--json"]) == 0
    # THEN the hints are on stdout, the summary on stderr, and no folder
    # was written (the summary names no report)
    out, err = capsys.readouterr()
    assert isinstance(json.loads(out), list)
    assert "Verdict:" in err and "Report:" not in err
    assert list(tmp_path.iterdir()) == []
    # AND with -o the profile folder is written as before
    assert main(["profile", str(LOG), "--json", "-o", "p"]) == 0
    assert (tmp_path / "p" / "report.html").is_file()
