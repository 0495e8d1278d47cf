"""Every codec Spark writes decodes to the same trace as the plain log."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import cramjam
import lz4.block
import polars as pl
import pytest
import zstandard

from sparktrail.tracer import import_eventlog
from sparktrail.tracer.eventlog import lzf_decompress
from tests.paths import SHARED_LOG

LOG = SHARED_LOG


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def lz4_block_stream(data: bytes) -> bytes:
    """lz4-java LZ4BlockOutputStream: compressed blocks, one raw, an end mark."""
    out = bytearray()
    for k, block in enumerate(chunks(data, 8192)):
        if k == 1:
            out += b"LZ4Block" + struct.pack("<Biii", 0x10, len(block), len(block), 0)
            out += block
            continue
        packed = lz4.block.compress(block, store_size=False)
        out += b"LZ4Block" + struct.pack("<Biii", 0x20 | 1, len(packed), len(block), 0)
        out += packed
    out += b"LZ4Block" + struct.pack("<Biii", 0x10, 0, 0, 0)
    return bytes(out)


def snappy_stream(data: bytes) -> bytes:
    """snappy-java SnappyOutputStream: header, then [int32 BE length][raw] blocks."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for block in chunks(data, 10_000):
        packed = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(packed)) + packed
    return bytes(out)


def zstd_frames(data: bytes) -> bytes:
    """Several zstd frames one after another (as a flushed, rolled stream)."""
    compressor = zstandard.ZstdCompressor(level=3)
    return b"".join(compressor.compress(part) for part in chunks(data, 20_000))


def lzf_compress(data: bytes) -> bytes:
    """A small greedy liblzf-format compressor (literal runs and back references)."""
    out, literal, table, i = bytearray(), bytearray(), {}, 0

    def flush() -> None:
        for run in chunks(bytes(literal), 32):
            out.append(len(run) - 1)
            out.extend(run)
        literal.clear()

    while i < len(data):
        key = data[i : i + 3]
        ref = table.get(key)
        table[key] = i
        if ref is not None and len(key) == 3 and 0 < i - ref <= 8192:
            length = 3
            while (
                i + length < len(data)
                and length < 264
                and data[ref + length] == data[i + length]
            ):
                length += 1
            flush()
            off, n = i - ref - 1, length - 2
            if n < 7:
                out += bytes([(n << 5) | (off >> 8), off & 0xFF])
            else:
                out += bytes([(7 << 5) | (off >> 8), n - 7, off & 0xFF])
            i += length
        else:
            literal.append(data[i])
            i += 1
    flush()
    return bytes(out)


def lzf_stream(data: bytes) -> bytes:
    """compress-lzf LZFOutputStream chunks: one stored, the rest compressed."""
    out = bytearray()
    for k, block in enumerate(chunks(data, 0xFFFF)):
        packed = lzf_compress(block)
        if k == 0 and len(data) > 0xFFFF:
            out += b"ZV\x00" + struct.pack(">H", len(block)) + block
        else:
            out += b"ZV\x01" + struct.pack(">HH", len(packed), len(block)) + packed
    return bytes(out)


def test_lzf_round_trip() -> None:
    data = LOG.read_bytes()[:30_000]
    assert lzf_decompress(lzf_compress(data), len(data)) == data


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    ".lz4": lz4_block_stream,
    ".snappy": snappy_stream,
    ".zstd": zstd_frames,
    ".lzf": lzf_stream,
}


@pytest.mark.parametrize("suffix", sorted(ENCODERS))
def test_codec_gives_plain_trace(tmp_path: Path, suffix: str) -> None:
    plain = import_eventlog(LOG)
    target = tmp_path / f"local-1532512550423{suffix}"
    target.write_bytes(ENCODERS[suffix](LOG.read_bytes()))
    assert import_eventlog(target).equals(plain)


def test_rolling_directory_of_zstd_files(tmp_path: Path) -> None:
    lines = LOG.read_bytes().splitlines(keepends=True)
    app = "local-1532512550423"
    root = tmp_path / f"eventlog_v2_{app}"
    root.mkdir()
    for n, part in enumerate((lines[:10], lines[10:20], lines[20:]), start=1):
        (root / f"events_{n}_{app}.zstd").write_bytes(zstd_frames(b"".join(part)))
    (root / f"appstatus_{app}").touch()
    trace = import_eventlog(root)
    assert trace.equals(import_eventlog(LOG))
    # file order is by number, not by name: events_10 comes after events_9
    assert not trace.is_empty()


def test_inprogress_suffix_and_truncated_zstd(tmp_path: Path) -> None:
    data = LOG.read_bytes()
    target = tmp_path / "local-1532512550423.zstd.inprogress"
    full = zstd_frames(data)
    target.write_bytes(full)
    assert import_eventlog(target).equals(import_eventlog(LOG))
    target.write_bytes(full[: len(full) - 200])  # a frame cut in the middle
    with pytest.warns(UserWarning, match="cut short|truncated|skipped"):
        cut = import_eventlog(target)
    assert 0 < cut.height <= import_eventlog(LOG).height
    assert isinstance(cut, pl.DataFrame)
