"""`Queue.read_arrow` and `Queue.to_pandas`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

import litemq

#: read_arrow's columns without ``columns=`` (``codec`` and ``raw_len`` come with raw=True).
DEFAULT_COLUMNS = [
    "seq",
    "timestamp",
    "key",
    "headers",
    "payload",
    "topic",
    "queue_id",
    "tags",
    "priority",
    "expires_at",
]


@pytest.fixture
def mixed(queue: litemq.Queue) -> litemq.Queue:
    app = queue.appender()
    app.append(b"plain")
    app.append(b"keyed", key="k-text")
    app.append(b"", key=b"\x00bin", headers={"a": "1", "b": b"\xff"})
    app.append_batch([f"b{i}".encode() for i in range(97)])
    app.flush()
    return queue


def test_schema_and_values(mixed: litemq.Queue) -> None:
    batch = mixed.read_arrow()
    batch.validate(full=True)
    assert batch.schema.names == DEFAULT_COLUMNS
    assert batch.schema.field("seq").type == pa.int64()
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.schema.field("key").type == pa.binary()
    assert batch.schema.field("headers").type == pa.map_(pa.string(), pa.binary())
    assert batch.schema.field("payload").type == pa.binary()
    assert batch.schema.field("topic").type == pa.string()
    assert batch.schema.field("queue_id").type == pa.int32()
    assert batch.schema.field("tags").type == pa.list_(pa.string())
    assert batch.schema.field("priority").type == pa.uint8()
    assert batch.schema.field("expires_at").type == pa.timestamp("us", tz="UTC")
    assert batch.num_rows == 100
    rows = batch.to_pylist()
    assert [r["seq"] for r in rows] == list(range(100))
    assert rows[0]["key"] is None
    assert rows[0]["headers"] is None
    assert rows[1]["key"] == b"k-text"
    assert rows[2]["key"] == b"\x00bin"
    assert rows[2]["payload"] == b""
    assert dict(rows[2]["headers"]) == {"a": b"1", "b": b"\xff"}
    assert rows[99]["payload"] == b"b96"
    for r in rows:
        msg = mixed.get(r["seq"])
        assert r["payload"] == msg.payload
        assert r["timestamp"] == msg.datetime
        assert r["timestamp"].tzinfo is not None


def test_batch_outlives_the_queue(qpath: Path) -> None:
    # The data columns are handed to pyarrow without a copy: the batch must
    # own them, not borrow from the queue or its files.
    import gc

    with litemq.Queue(qpath, file_size=64 * 1024) as q:
        app = q.appender()
        app.append_batch([bytes([i % 256]) * (i % 50) for i in range(500)])
        app.append(b"v", key="k", headers={"h": b"x"})
        app.flush()
        batch = q.read_arrow()
    del q, app
    gc.collect()
    shutil.rmtree(qpath)
    payloads = batch.column("payload").to_pylist()
    assert payloads[:500] == [bytes([i % 256]) * (i % 50) for i in range(500)]
    assert batch.column("key").to_pylist()[-1] == b"k"
    assert batch.column("headers").to_pylist()[-1] == [("h", b"x")]
    batch.validate(full=True)


def test_ranges_and_limits(mixed: litemq.Queue) -> None:
    assert mixed.read_arrow(10, 20).column("seq").to_pylist() == list(range(10, 20))
    assert mixed.read_arrow(start=95).column("seq").to_pylist() == list(range(95, 100))
    assert mixed.read_arrow(max_rows=3).column("seq").to_pylist() == [0, 1, 2]
    assert mixed.read_arrow(50, 10).num_rows == 0
    assert mixed.read_arrow(500).num_rows == 0
    empty = mixed.read_arrow(max_rows=0)
    assert empty.num_rows == 0
    assert empty.schema == mixed.read_arrow().schema


def test_empty_queue(queue: litemq.Queue) -> None:
    batch = queue.read_arrow()
    assert batch.num_rows == 0
    assert batch.schema.names == DEFAULT_COLUMNS


def test_to_pandas(mixed: litemq.Queue) -> None:
    df = mixed.to_pandas(0, 5)
    assert df.columns.tolist() == DEFAULT_COLUMNS
    assert df["seq"].tolist() == [0, 1, 2, 3, 4]
    assert df["payload"].iloc[1] == b"keyed"
    assert df["timestamp"].iloc[0].to_pydatetime() == mixed.get(0).datetime
    assert df["timestamp"].iloc[0].to_pydatetime() <= datetime.now(UTC)


def test_bad_arguments(mixed: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="start"):
        mixed.read_arrow(start=-1)
    with pytest.raises(TypeError, match="max_rows"):
        mixed.read_arrow(max_rows="3")  # type: ignore[arg-type]


def _sealed_queue(qpath: Path, n: int = 2000) -> list[Path]:
    """A closed queue of 100-byte messages over several 64 KiB files; returns
    its data files, sealed (trimmed, with a footer) ones first."""
    with litemq.Queue(qpath, file_size=64 * 1024) as q:
        q.appender().append_batch([i.to_bytes(4, "little") * 25 for i in range(n)])
        q.appender().flush()
    files = sorted(qpath.rglob("*.data"))
    assert len(files) >= 3
    # Sealed files end with a footer (full ones are not shorter).
    assert all(f.read_bytes()[-128:].startswith(b"LMQFOOT") for f in files[:-1])
    return files


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


def test_sealed_files_read_in_bulk(qpath: Path) -> None:
    # Sealed files are verified by their footer's CRC and then parsed without
    # a CRC per frame; the active (last) file frame by frame. Same rows.
    _sealed_queue(qpath)
    with litemq.Queue(qpath, read_only=True) as q:
        batch = q.read_arrow()
        batch.validate(full=True)
        assert batch.num_rows == 2000
        assert batch.column("seq").to_pylist() == list(range(2000))
        assert batch.column("payload").to_pylist() == [
            i.to_bytes(4, "little") * 25 for i in range(2000)
        ]
        # Twice in one process (the file is then known verified), and in pieces.
        assert q.read_arrow().equals(batch)
        parts = [q.read_arrow(s, s + 300) for s in range(0, 2000, 300)]
        assert pa.Table.from_batches(parts).combine_chunks().to_batches()[0].equals(batch)


def test_damaged_sealed_file_is_reported_by_read_arrow(qpath: Path) -> None:
    # A byte no frame's own CRC covers (the padding after the first frame:
    # 4 + 9 + 100 + 8 = 121 bytes, padded to 128) is covered by the footer's
    # CRC of the whole frame area: a bulk read of the file checks it.
    files = _sealed_queue(qpath)
    _flip(files[1], 4096 + 124)
    with litemq.Queue(qpath, read_only=True) as q:
        with pytest.raises(litemq.CorruptedError) as info:
            q.read_arrow()
        assert info.value.file is not None
        assert Path(info.value.file).name == files[1].name
        assert "footer" in info.value.reason
        # The first file is intact and read up to the damaged one.
        first = q.read_arrow(0, 100)
        assert first.column("seq").to_pylist() == list(range(100))


def test_damaged_frame_in_a_sealed_file_is_reported(qpath: Path) -> None:
    files = _sealed_queue(qpath)
    _flip(files[0], 4096 + 128 * 40 + 50)  # inside the 41st frame's payload
    with litemq.Queue(qpath, read_only=True) as q:
        with pytest.raises(litemq.CorruptedError) as info:
            q.read_arrow()
        assert Path(info.value.file).name == files[0].name
        # A read too short to verify the whole file checks frame by frame.
        assert q.read_arrow(0, 40).num_rows == 40
        with pytest.raises(litemq.CorruptedError):
            q.read_arrow(35, 45)


def test_damaged_frame_in_the_active_file_is_reported(qpath: Path) -> None:
    # The last file is not sealed (no footer): every frame is checked by its own CRC.
    files = _sealed_queue(qpath)
    active = files[-1]
    # Not sealed: no footer at its end (format 11: it is as long as its writer grew it).
    assert active.stat().st_size <= 64 * 1024
    assert active.read_bytes()[-128:-120] != b"LMQFOOT\0"
    _flip(active, 4096 + 128 * 2 + 50)
    with litemq.Queue(qpath, read_only=True) as q:
        with pytest.raises(litemq.CorruptedError) as info:
            q.read_arrow()
        assert Path(info.value.file).name == active.name
        assert info.value.seq is not None


def test_columns_picks_and_orders(mixed: litemq.Queue) -> None:
    full = mixed.read_arrow()
    some = mixed.read_arrow(columns=["payload", "seq"])
    assert some.schema.names == ["payload", "seq"]
    assert some.column("payload").equals(full.column("payload"))
    assert some.column("seq").equals(full.column("seq"))
    keyed = mixed.read_arrow(1, 3, columns=["key", "headers"])
    assert keyed.column("key").to_pylist() == [b"k-text", b"\x00bin"]
    assert keyed.column("headers").to_pylist() == [None, [("a", b"1"), ("b", b"\xff")]]
    keyed.validate(full=True)
    assert mixed.read_arrow(5, 5, columns=["timestamp"]).schema.names == ["timestamp"]
    assert mixed.to_pandas(0, 2, columns=["seq"]).columns.tolist() == ["seq"]


def test_columns_bad_names(mixed: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="unknown column 'value'"):
        mixed.read_arrow(columns=["seq", "value"])
    with pytest.raises(ValueError, match="twice"):
        mixed.read_arrow(columns=["seq", "seq"])
    with pytest.raises(TypeError, match="list of column names"):
        mixed.read_arrow(columns="seq")


@pytest.mark.parametrize(("mib", "kept"), [("0", False), ("1", False), ("64", True)])
def test_kept_memory_follows_its_environment_variable(qpath: Path, mib: str, kept: bool) -> None:
    # LITEMQ_KEPT_MEMORY_MIB bounds the memory kept between reads (read once
    # per process: a fresh one per case); a 1.5 MB column passes 0 and 1 MiB.
    script = f"""
import litemq
with litemq.Queue({str(qpath)!r}, file_size=1 << 20) as q:
    q.appender().append_batch([bytes(100)] * 15_000)
    q.appender().flush()
    batch = q.read_arrow()
    del batch
    print(litemq.release_memory())
"""
    env = {**os.environ, "LITEMQ_KEPT_MEMORY_MIB": mib}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert (int(out.stdout) >= 1_500_000) is kept, out.stdout


def test_memory_of_dropped_results_is_reused_not_shared(qpath: Path) -> None:
    # A large column pyarrow lets go of is kept for the next read to fill
    # (litemq.release_memory() frees what is kept). A result still held is
    # never written to, and a result filled into reused memory holds its own
    # rows only: the same bytes as from fresh memory.
    n = 20_000
    with litemq.Queue(qpath, file_size=1 << 20) as q:
        q.appender().append_batch([i.to_bytes(4, "little") * 25 for i in range(n)])
        q.appender().flush()
        want = [i.to_bytes(4, "little") * 25 for i in range(n)]
        litemq.release_memory()
        held = q.read_arrow()
        big = q.read_arrow(0, 15_000)  # 1.5 MB of payload: large enough to keep
        del big
        kept = litemq.release_memory()
        assert kept >= 1_500_000
        assert litemq.release_memory() == 0

        big = q.read_arrow(0, 15_000)
        del big
        # Fewer rows, others: the kept payload column (and its stale bytes
        # past the new rows' end) is reused.
        part = q.read_arrow(3_000, 14_000)
        assert litemq.release_memory() < kept  # taken from the shelf
        part.validate(full=True)
        assert part.column("seq").to_pylist() == list(range(3_000, 14_000))
        assert part.column("payload").to_pylist() == want[3_000:14_000]
        del part
        assert litemq.release_memory() > 0
        held.validate(full=True)
        assert held.column("payload").to_pylist() == want
        assert held.column("seq").to_pylist() == list(range(n))
