"""Log layouts besides one file: compacted rolling logs, Spark 1.x and
Databricks directories, attempts of one application, folders of logs."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from sparktrail.tracer import (
    EventLogError,
    EventLogWarning,
    ImportStats,
    import_eventlog,
    trace_name,
)
from sparktrail.tracer.eventlog import SeveralLogsError, codec_of, resolve
from tests.paths import SHARED_LOG
from tests.tracer.test_codecs import ENCODERS, zstd_frames

LOG = SHARED_LOG
APP = "local-1532512550423"

pytestmark = pytest.mark.skipif(not LOG.exists(), reason=f"{LOG} is missing")


@pytest.fixture(scope="module")
def plain() -> pl.DataFrame:
    """The trace of the shared log, read as one plain file."""
    return import_eventlog(LOG)


def lines() -> list[bytes]:
    return LOG.read_bytes().splitlines(keepends=True)


def quietly(path: Path, stats: ImportStats | None = None) -> pl.DataFrame:
    """Import, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return import_eventlog(path, stats=stats)


# --- rolling logs compacted by Spark ---------------------------------------


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        (f"events_3_{APP}.zstd.compact", "zstd"),
        (f"events_3_{APP}.lz4.compact.inprogress", "lz4"),
        (f"events_3_{APP}.compact", None),
        (f"{APP}.gz", "gzip"),
    ],
)
def test_codec_is_named_before_compact(name: str, codec: str | None) -> None:
    assert codec_of(Path(name)) == codec


def test_rolling_log_is_read_from_its_last_compacted_file(
    tmp_path: Path, plain: pl.DataFrame
) -> None:
    # GIVEN a rolling log whose files 1-2 were compacted into events_2 ...compact
    # (a stale events_1 and the original events_2 are still there)
    every = lines()
    root = tmp_path / f"eventlog_v2_{APP}"
    root.mkdir()
    (root / f"events_1_{APP}.zstd").write_bytes(zstd_frames(b"garbage\n"))
    (root / f"events_2_{APP}.zstd").write_bytes(zstd_frames(b"garbage\n"))
    compact = root / f"events_2_{APP}.zstd.compact"
    compact.write_bytes(zstd_frames(b"".join(every[:20])))
    (root / f"events_3_{APP}.zstd").write_bytes(zstd_frames(b"".join(every[20:])))
    (root / f"appstatus_{APP}").touch()
    # WHEN it is imported
    with pytest.warns(EventLogWarning, match="compacted by Spark") as caught:
        trace = import_eventlog(root)
    # THEN the compacted file (zstd, not plain) and the file after it are read
    assert [p.name for p in resolve(root).files] == [
        compact.name,
        f"events_3_{APP}.zstd",
    ]
    assert str(compact) in str(caught[0].message)
    assert trace.equals(plain)


# --- attempts of one application ---------------------------------------------


def with_attempt(target: Path, attempt: str) -> Path:
    """The shared log as attempt ``attempt`` of its application."""
    out = []
    for line in lines():
        event = orjson.loads(line)
        if event["Event"] == "SparkListenerApplicationStart":
            event["App Attempt ID"] = attempt
        out.append(orjson.dumps(event) + b"\n")
    target.write_bytes(b"".join(out))
    return target


def test_trace_name_keeps_attempts_apart(tmp_path: Path) -> None:
    assert trace_name("x", "application_1_0006", "2") == "application_1_0006_2"
    assert trace_name("x", "application_1_0006", None) == "application_1_0006"
    # without an app id in the log: the file names it
    assert trace_name(tmp_path / f"{APP}.lz4.inprogress", None) == APP


def test_attempts_import_to_their_own_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparktrail.cli import main

    # GIVEN two attempts of one application
    first = with_attempt(tmp_path / f"{APP}_1", "1")
    second = with_attempt(tmp_path / f"{APP}_2", "2")
    out = tmp_path / "traces"
    # WHEN both are imported into one folder
    assert main(["import", str(first), "-o", str(out)]) == 0
    assert main(["import", str(second), "-o", str(out)]) == 0
    # THEN neither overwrites the other
    assert sorted(p.name for p in out.iterdir()) == [f"{APP}_1.arrow", f"{APP}_2.arrow"]
    assert f"{APP}_2.arrow" in capsys.readouterr().out


# --- Spark 1.x log directories ----------------------------------------------


def legacy_dir(
    tmp_path: Path, codec: str | None = None, complete: bool = True, name: str = APP
) -> Path:
    """The shared log as Spark 1.2 wrote it: a directory of marker files."""
    root = tmp_path / name
    root.mkdir(parents=True)
    data = b"".join(line for line in lines() if b"SparkListenerLogStart" not in line)
    if codec is not None:
        suffix = codec.lower().removeprefix("org.apache.spark.io.")
        suffix = suffix.removesuffix("compressioncodec")
        data = ENCODERS[f".{suffix}"](data)
        (root / f"COMPRESSION_CODEC_{codec}").touch()
    (root / "EVENT_LOG_1").write_bytes(data)
    (root / "SPARK_VERSION_1.2.0").touch()
    if complete:
        (root / "APPLICATION_COMPLETE").touch()
    return root


@pytest.mark.parametrize(
    "codec",
    [
        None,
        "lzf",
        "snappy",
        "lz4",
        "org.apache.spark.io.LZFCompressionCodec",
        "org.apache.spark.io.SnappyCompressionCodec",
        "org.apache.spark.io.LZ4CompressionCodec",
    ],
)
def test_spark_1_log_directory(
    tmp_path: Path, plain: pl.DataFrame, codec: str | None
) -> None:
    # GIVEN a Spark 1.x log directory, compressed with `codec`
    root = legacy_dir(tmp_path, codec)
    # WHEN it is imported
    stats = ImportStats()
    trace = quietly(root, stats)
    # THEN it gives the plain log's trace, the version the directory names
    assert trace.equals(plain)
    assert stats.spark_version == "1.2.0"
    assert stats.app_id == APP


def test_spark_1_log_is_complete_only_with_its_marker(tmp_path: Path) -> None:
    assert resolve(legacy_dir(tmp_path / "a")).complete
    assert not resolve(legacy_dir(tmp_path / "b", complete=False)).complete


def test_spark_1_unknown_codec_names_the_file(tmp_path: Path) -> None:
    root = legacy_dir(tmp_path)
    (root / "COMPRESSION_CODEC_brotli").touch()
    with pytest.raises(
        EventLogError, match=rf"{root}: unknown compression codec 'brotli'"
    ):
        import_eventlog(root)


# --- Databricks' gzip-rolled logs -------------------------------------------


def databricks_dir(tmp_path: Path) -> Path:
    """The shared log as Databricks delivers it: rolled gz parts, then eventlog."""
    every = lines()
    root = tmp_path / "eventlog" / "0725-090000-abc" / "1234567890"
    root.mkdir(parents=True)
    # "--10" sorts after "--09": name order is time order
    part_2 = gzip.compress(b"".join(every[10:15])) + gzip.compress(
        b"".join(every[15:20])
    )
    (root / "eventlog-2018-07-25--10-00.gz").write_bytes(part_2)  # two gzip members
    (root / "eventlog-2018-07-25--09-00.gz").write_bytes(
        gzip.compress(b"".join(every[:10]))
    )
    (root / "eventlog").write_bytes(b"".join(every[20:]))
    return root


def test_databricks_rolled_log_reads_in_time_order(
    tmp_path: Path, plain: pl.DataFrame
) -> None:
    root = databricks_dir(tmp_path)
    assert [p.name for p in resolve(root).files] == [
        "eventlog-2018-07-25--09-00.gz",
        "eventlog-2018-07-25--10-00.gz",
        "eventlog",
    ]
    stats = ImportStats()
    assert quietly(root, stats).equals(plain)
    assert stats.files == 3 and stats.app_id == APP


def test_gzip_file_and_a_cut_one(tmp_path: Path, plain: pl.DataFrame) -> None:
    target = tmp_path / f"{APP}.gz"
    full = gzip.compress(LOG.read_bytes())
    target.write_bytes(full)
    assert quietly(target).equals(plain)
    target.write_bytes(full[: len(full) // 2])
    with pytest.warns(EventLogWarning, match="cut short"):
        cut = import_eventlog(target)
    assert 0 < cut.height < plain.height


def test_corrupt_gzip_is_reported_with_its_file(tmp_path: Path) -> None:
    target = tmp_path / f"{APP}.gz"
    target.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    with (
        pytest.warns(EventLogWarning, match=rf"{target}:0: bad gzip data"),
        pytest.raises(EventLogError, match="no Spark listener events"),
    ):
        import_eventlog(target)


# --- folders of several logs ------------------------------------------------


def test_folder_of_logs_lists_them(tmp_path: Path) -> None:
    with_attempt(tmp_path / f"{APP}_1", "1")
    with_attempt(tmp_path / f"{APP}_2.inprogress", "2")
    legacy_dir(tmp_path, name="old")
    (tmp_path / "notes.txt").write_text("not a log\n")
    with pytest.raises(SeveralLogsError) as caught:
        resolve(tmp_path)
    assert [p.name for p in caught.value.logs] == [
        f"{APP}_1",
        f"{APP}_2.inprogress",
        "old",
    ]
    assert f"{tmp_path}: a folder holding 3 event logs" in str(caught.value)


def test_folder_of_one_log_names_it(tmp_path: Path) -> None:
    with_attempt(tmp_path / f"{APP}_1", "1")
    with pytest.raises(
        SeveralLogsError, match=f"one event log; give its path: {APP}_1$"
    ):
        resolve(tmp_path)


def test_folder_without_logs_says_what_was_expected(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a log\n")
    with pytest.raises(EventLogError, match="no event log in this directory") as caught:
        resolve(tmp_path)
    assert not isinstance(caught.value, SeveralLogsError)


@pytest.mark.integration
@pytest.mark.parametrize("codec", ["lz4", "lzf", "snappy"])
def test_spark_1_directory_compressed_by_spark_itself(
    spark: Any, tmp_path: Path, plain: pl.DataFrame, codec: str
) -> None:
    """Spark's own codec classes (snappy-java, lz4-java and compress-lzf
    streams, as Spark 1.x wrote them too) decode to the plain log's trace."""
    # GIVEN a Spark 1.x directory whose EVENT_LOG_1 Spark's codec wrote
    root = legacy_dir(tmp_path)
    sc = spark.sparkContext
    jvm = sc._jvm
    writer = jvm.org.apache.spark.io.CompressionCodec.createCodec(
        sc._conf._jconf, codec
    )
    stream = writer.compressedOutputStream(
        jvm.java.io.FileOutputStream(str(root / "EVENT_LOG_1"))
    )
    data = b"".join(line for line in lines() if b"SparkListenerLogStart" not in line)
    for start in range(0, len(data), 7000):  # flushed pieces, as the logger does
        stream.write(bytearray(data[start : start + 7000]))
        stream.flush()
    stream.close()
    (root / f"COMPRESSION_CODEC_{codec}").touch()
    # WHEN it is imported THEN it is the plain log's trace
    assert quietly(root).equals(plain)
