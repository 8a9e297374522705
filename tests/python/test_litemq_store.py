"""LiteMQ broker stores: records byte for byte, the liberal reader, the CLI, import and export.

Stores are written by our StoreWriter from LiteMQ's storage document (seed 000) and checked
against an encoder written here, independently, from the document's table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import litemq
from conftest import cli
from litemq.interop.litemq_store import (
    CONSUME_QUEUE_ENTRY_SIZE,
    MAGIC,
    HeaderError,
    LiteMQRecord,
    LiteMQStore,
    LiteMQStoreError,
    MessageStatus,
    MessageType,
    RecordDecodeError,
    RecordEncodeError,
    RecordNotFoundError,
    StoreExistsError,
    StoreNotFoundError,
    StoreWriter,
    WriterPoisonedError,
    decode_record,
    export_queue,
    import_store,
    record_from_message,
    record_to_message,
    tag_hash,
)

FILE_SIZE = 160 * 1024  # holds one 100 KiB body and then some: the fixture spans files
CQ_FILE_SIZE = 5 * CONSUME_QUEUE_ENTRY_SIZE
BIG = bytes(range(256)) * 400  # 100 KiB


def seed_encode(r: LiteMQRecord) -> bytes:
    """The record as LiteMQ's storage document lays it out, field by field (big-endian)."""

    def s(text: str) -> bytes:
        raw = text.encode("utf-8", "surrogateescape")
        return struct.pack(">H", len(raw)) + raw

    out = struct.pack(">I", 0x4C4D5101) + s(r.message_id) + s(r.topic)
    out += struct.pack(">I", len(r.tags)) + b"".join(s(t) for t in r.tags)
    out += struct.pack(">I", len(r.keys)) + b"".join(s(k) for k in r.keys)
    out += struct.pack(">I", len(r.properties)) + b"".join(s(k) + s(v) for k, v in r.properties)
    out += struct.pack(">I", len(r.body)) + r.body
    out += struct.pack(">BBB", r.message_type, r.priority, r.reliability)
    out += struct.pack(">q", r.delay_time) + s(r.transaction_id)
    out += struct.pack(">B", r.status) + s(r.sharding_key) + struct.pack(">B", r.broadcast)
    out += struct.pack(">q", r.born_timestamp) + s(r.born_host) + s(r.store_host)
    out += struct.pack(">I", r.queue_id)
    out += struct.pack(">qqI", r.queue_offset, r.commit_log_offset, r.store_size)
    out += struct.pack(">qqqI", r.store_timestamp, r.consume_start_time, r.consume_end_time, 0)
    out = out[:-4] + struct.pack(">I", r.consume_count)
    return out + r.trailing


T0 = 1766547877259  # ms


def fixture_records() -> list[LiteMQRecord]:
    """Several topics and queue ids, every message type, empty and 100 KiB bodies, unicode."""
    base = {
        "born_host": "10.0.0.7:51234",
        "store_host": "10.0.0.1:10911",
        "priority": 3,
        "reliability": 1,
    }
    out = [
        LiteMQRecord(
            message_id="1766547877259022000-0",
            topic="orders",
            tags=("paid", "eu"),
            keys=("order-1", "customer-9"),
            properties=(("region", "eu-west"), ("retry", "0")),
            body=b'{"order": 1}',
            born_timestamp=T0,
            store_timestamp=T0 + 1,
            **base,
        ),
        LiteMQRecord(
            message_id="delay-1",
            topic="orders",
            queue_id=1,
            message_type=MessageType.DELAY,
            delay_time=T0 + 5000,
            body=b"",
            born_timestamp=T0 + 2,
            store_timestamp=T0 + 2,
            **base,
        ),
        LiteMQRecord(
            message_id="tx-1",
            topic="payments",
            message_type=MessageType.TRANSACTION,
            transaction_id="tx-42",
            status=MessageStatus.PREPARED,
            body=BIG,
            tags=("card",),
            born_timestamp=T0 + 3,
            store_timestamp=T0 + 3,
            **base,
        ),
        LiteMQRecord(
            message_id="bc-1",
            topic="notices",
            queue_id=3,
            message_type=MessageType.BROADCAST,
            broadcast=1,
            body="维护通知 🛠".encode(),
            tags=("全体",),
            keys=("ключ",),
            properties=(("语言", "中文"), ("emoji", "🙂")),
            born_timestamp=T0 + 4,
            store_timestamp=T0 + 4,
            trailing=bytes(6),  # what LiteMQ's own encoder leaves
            **base,
        ),
        LiteMQRecord(
            message_id="ord-1",
            topic="orders",
            message_type=MessageType.ORDER,
            sharding_key="customer-9",
            body=b"second order of customer 9",
            consume_start_time=T0 + 10,
            consume_end_time=T0 + 11,
            consume_count=2,
            born_timestamp=T0 + 5,
            store_timestamp=T0 + 5,
            **base,
        ),
        LiteMQRecord(
            message_id="tx-1-commit",
            topic="payments",
            message_type=MessageType.TRANSACTION,
            transaction_id="tx-42",
            status=MessageStatus.COMMIT,
            body=BIG[::-1],
            born_timestamp=T0 + 6,
            store_timestamp=T0 + 6,
            **base,
        ),
        LiteMQRecord(message_id="big", topic="payments", queue_id=1, body=BIG),
        LiteMQRecord(message_id="", topic="orders", body=b"bare: every other field empty"),
    ]
    return out


def write_store(path: Path, records: list[LiteMQRecord], **options: object) -> list[LiteMQRecord]:
    """Writes with append_new; returns the records as stored (store fields filled)."""
    opts: dict[str, object] = {"file_size": FILE_SIZE, "consume_queue_file_size": CQ_FILE_SIZE}
    opts.update(options)
    with StoreWriter(path, **opts) as w:  # type: ignore[arg-type]
        offsets = [w.append_new(r) for r in records]
    counts: dict[tuple[str, int], int] = {}
    stored = []
    for r, at in zip(records, offsets, strict=True):
        n = counts.get((r.topic, r.queue_id), 0)
        counts[(r.topic, r.queue_id)] = n + 1
        size = 4 + len(r.encode())
        stored.append(
            dataclasses.replace(
                r, commit_log_offset=at, store_size=size, queue_offset=n * CONSUME_QUEUE_ENTRY_SIZE
            )
        )
    return stored


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[LiteMQRecord]]:
    path = tmp_path / "broker"
    return path, write_store(path, fixture_records())


# --- records, byte for byte -------------------------------------------------------------


def test_records_encode_as_the_seed_lays_them_out() -> None:
    for r in fixture_records():
        assert r.encode() == seed_encode(r)
        assert decode_record(seed_encode(r)) == r
    assert MAGIC.to_bytes(4, "big") == b"LMQ\x01"


_text = st.text(max_size=12)


@given(
    record=st.builds(
        LiteMQRecord,
        message_id=_text,
        topic=_text,
        tags=st.lists(_text, max_size=3).map(tuple),
        keys=st.lists(_text, max_size=3).map(tuple),
        properties=st.lists(st.tuples(_text, _text), max_size=3).map(tuple),
        body=st.binary(max_size=64),
        message_type=st.integers(0, 255),
        priority=st.integers(0, 255),
        reliability=st.integers(0, 255),
        delay_time=st.integers(-(2**63), 2**63 - 1),
        transaction_id=_text,
        status=st.integers(0, 255),
        sharding_key=_text,
        broadcast=st.integers(0, 255),
        born_timestamp=st.integers(-(2**63), 2**63 - 1),
        born_host=_text,
        store_host=_text,
        queue_id=st.integers(0, 2**32 - 1),
        queue_offset=st.integers(-(2**63), 2**63 - 1),
        commit_log_offset=st.integers(-(2**63), 2**63 - 1),
        store_size=st.integers(0, 2**32 - 1),
        store_timestamp=st.integers(-(2**63), 2**63 - 1),
        consume_count=st.integers(0, 2**32 - 1),
        trailing=st.binary(max_size=8),
    )
)
def test_any_record_encodes_as_the_seed_says_and_decodes_back(record: LiteMQRecord) -> None:
    data = record.encode()
    assert data == seed_encode(record)
    assert decode_record(data) == record
    assert record_from_message(record_to_message(record)) == record


def test_strings_that_are_not_utf8_come_back_as_the_same_bytes() -> None:
    raw = b"id-\xff\xfe"
    data = bytearray(seed_encode(LiteMQRecord(message_id="id-xx", topic="t")))
    data[6 : 6 + 5] = raw  # same length, bytes a Go producer may well send
    r = decode_record(bytes(data))
    assert r.message_id.encode("utf-8", "surrogateescape") == raw
    assert r.encode() == bytes(data)


def test_the_tag_hash_is_fnv1a_over_each_tag_and_a_zero_byte() -> None:
    assert tag_hash([]) == 0  # no tags: 0, as LiteMQ writes
    assert tag_hash([""]) == 0x050C5D1F  # FNV-1a 32 of b"\0"
    fnv_a = 0xE40C292C  # FNV-1a 32 of b"a"
    assert tag_hash(["a"]) == (fnv_a * 0x01000193) & 0xFFFFFFFF
    assert tag_hash(["a", "b"]) != tag_hash(["ab"])  # the separator keeps tags apart


def test_decode_reports_the_field_that_runs_past_the_end() -> None:
    data = seed_encode(LiteMQRecord(message_id="m", topic="orders", body=b"xyz"))
    with pytest.raises(RecordDecodeError, match="topic"):
        decode_record(data[:10])
    with pytest.raises(RecordDecodeError, match="magic"):
        decode_record(b"\x00" + data[1:])
    with pytest.raises(RecordDecodeError, match="tags count"):
        decode_record(data[:13] + b"\xff\xff\xff\xff" + data[17:])


def test_values_the_format_cannot_hold_are_refused() -> None:
    with pytest.raises(RecordEncodeError, match="65,535") as e:
        LiteMQRecord(topic="x" * 70_000).encode()
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, litemq.LiteMQError)
    with pytest.raises(RecordEncodeError):
        LiteMQRecord(priority=256).encode()
    with pytest.raises(RecordEncodeError):
        LiteMQRecord(queue_id=-1).encode()


# --- the store: commit log, consume queues, offsets -------------------------------------


def test_every_record_reads_back_with_every_field_across_files(store) -> None:
    path, written = store
    files = sorted(os.listdir(path / "commitlog"))
    assert files == [f"{i:020d}" for i in range(len(files))]
    assert len(files) >= 3
    # Preallocated, as LiteMQ's are: every file is file_size bytes, zero-filled at the end.
    assert {os.path.getsize(path / "commitlog" / f) for f in files} == {FILE_SIZE}
    with LiteMQStore(path) as s:
        got = list(s.records())
        assert [g.record for g in got] == written
        assert [g.offset for g in got] == [r.commit_log_offset for r in written]
        assert all(g.size == 4 + len(g.record.encode()) for g in got)
        assert all(g.offset == int(Path(g.file).name) * FILE_SIZE + g.file_offset for g in got)
        assert s.skipped == []
        assert s.naming == "index"


def test_records_from_an_offset(store) -> None:
    path, written = store
    with LiteMQStore(path) as s:
        third = written[3].commit_log_offset
        assert [g.record for g in s.records(third)] == written[3:]
        assert [g.record for g in s.records(third - 1)] == written[3:]


def test_get_by_commit_log_offset(store) -> None:
    path, written = store
    with LiteMQStore(path) as s:
        for r in written:
            assert s.get(r.commit_log_offset).record == r
        with pytest.raises(RecordNotFoundError, match="no record at offset"):
            s.get(written[0].commit_log_offset + 1)
        with pytest.raises(RecordNotFoundError, match="zero length"):
            s.get(FILE_SIZE - 8)  # the zero-filled tail of the first file
        with pytest.raises(RecordNotFoundError, match="no commit-log file"):
            s.get(100 * FILE_SIZE)


def test_consume_queues_per_topic_and_queue_id(store) -> None:
    path, written = store
    with LiteMQStore(path) as s:
        assert s.topics() == {"notices": [3], "orders": [0, 1], "payments": [0, 1]}
        for topic, ids in s.topics().items():
            for qid in ids:
                want = [r for r in written if (r.topic, r.queue_id) == (topic, qid)]
                assert [m.record for m in s.messages(topic, qid)] == want
                entries = list(s.consume_queue(topic, qid))
                assert [e.index for e in entries] == list(range(len(want)))
                for e, r in zip(entries, want, strict=True):
                    assert (e.offset, e.size) == (r.commit_log_offset, r.store_size)
                    assert (e.tag_hash, e.timestamp) == (tag_hash(r.tags), r.store_timestamp)
        # orders/0 has 4 entries: its files roll at 5 entries; CQ files are 20-digit names.
        assert os.listdir(path / "consumequeue" / "orders" / "0") == [f"{0:020d}"]
        with pytest.raises(RecordNotFoundError, match="orders/0"):
            list(s.messages("nope"))
        with pytest.raises(RecordNotFoundError):
            s.consume_queue("..")
        assert s.skipped == []


def test_consume_queues_roll_across_files(tmp_path: Path) -> None:
    records = [LiteMQRecord(message_id=str(i), topic="t", body=b"x" * i) for i in range(12)]
    written = write_store(tmp_path / "b", records)
    assert sorted(os.listdir(tmp_path / "b" / "consumequeue" / "t" / "0")) == [
        f"{i:020d}" for i in range(3)
    ]
    with LiteMQStore(tmp_path / "b") as s:
        assert [m.record for m in s.messages("t")] == written
        assert [e.index for e in s.consume_queue("t")] == list(range(12))


def test_files_named_by_offset_read_the_same(tmp_path: Path) -> None:
    written = write_store(tmp_path / "b", fixture_records(), naming="offset", preallocate=False)
    names = sorted(os.listdir(tmp_path / "b" / "commitlog"))
    assert [int(n) for n in names] == [i * FILE_SIZE for i in range(len(names))]
    with LiteMQStore(tmp_path / "b") as s:
        assert s.naming == "offset"
        assert [g.record for g in s.records()] == written
        assert [m.record for m in s.messages("payments")] == [
            r for r in written if (r.topic, r.queue_id) == ("payments", 0)
        ]
        assert s.skipped == []


def test_index_named_files_with_the_first_deleted_keep_their_offsets(store) -> None:
    path, written = store
    (path / "commitlog" / f"{0:020d}").unlink()
    with LiteMQStore(path) as s:
        assert s.naming == "index"
        later = [r for r in written if r.commit_log_offset >= FILE_SIZE]
        assert [g.record for g in s.records()] == later
        assert [g.offset for g in s.records()] == [r.commit_log_offset for r in later]
        with pytest.raises(RecordNotFoundError, match="no commit-log file holds"):
            s.get(0)


def test_a_commitlog_directory_alone_is_a_store(store) -> None:
    path, written = store
    with LiteMQStore(path / "commitlog") as s:
        assert [g.record for g in s.records()] == written
        assert s.topics() == {}


def test_a_missing_store_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError) as e:
        LiteMQStore(tmp_path / "nope")
    assert isinstance(e.value, FileNotFoundError)
    assert isinstance(e.value, LiteMQStoreError)
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFoundError, match="not a LiteMQ store"):
        LiteMQStore(tmp_path / "empty")


def test_the_writer_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    with StoreWriter(tmp_path / "b", file_size=4096) as w:
        with pytest.raises(RecordEncodeError, match="more than a file"):
            w.append(LiteMQRecord(topic="t", body=bytes(5000)))
        with pytest.raises(RecordEncodeError, match="consume queue directory"):
            w.append(LiteMQRecord(topic="../escape"))
        w.append(LiteMQRecord(topic="t"))
    assert not (tmp_path / "escape").exists()
    with pytest.raises(StoreExistsError):
        StoreWriter(tmp_path / "b")
    # Without consume queues, any topic goes into the commit log.
    with StoreWriter(tmp_path / "c", file_size=4096, consume_queues=False) as w:
        w.append(LiteMQRecord(topic="a/b"))
    assert [g.record.topic for g in LiteMQStore(tmp_path / "c").records()] == ["a/b"]


# --- damaged stores: read what can be read, report the rest -----------------------------


def small_store(path: Path, n: int = 4, **options: object) -> list[LiteMQRecord]:
    records = [
        LiteMQRecord(message_id=f"m{i}", topic="t", tags=("x",), body=f"body {i}".encode() * 3)
        for i in range(n)
    ]
    opts: dict[str, object] = {"file_size": 4096}
    opts.update(options)
    return write_store(path, records, **opts)


def log_file(path: Path) -> Path:
    return path / "commitlog" / f"{0:020d}"


def test_a_zero_tail_is_the_end_not_damage(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    assert os.path.getsize(log_file(tmp_path / "b")) == 4096
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == written
        assert s.skipped == []


def test_a_partly_written_last_record_is_skipped_and_reported(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b", preallocate=False)
    f = log_file(tmp_path / "b")
    data = f.read_bytes()
    f.write_bytes(data[:-10])  # the crash cut the last record
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == written[:-1]
        [skip] = s.skipped
        last = written[-1].commit_log_offset
        # Up to the last non-zero byte (zeros at the end may as well be a zero tail).
        kept = len(data[:-10].rstrip(b"\x00"))
        assert (skip.file, skip.offset, skip.length) == (str(f), last, kept - last)
        assert "runs past the end of the file" in skip.reason


def test_a_garbage_length_before_a_zero_tail_skips_no_zeros(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    last = written[-1].commit_log_offset
    data[last : last + 4] = struct.pack(">I", 1 << 30)  # past the end of the file
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == written[:-1]
        [skip] = s.skipped
        # The skip ends at the last non-zero byte: the preallocated tail is not damage.
        nonzero_end = len(bytes(data).rstrip(b"\x00"))
        assert (skip.offset, skip.length) == (last, nonzero_end - last)
        assert nonzero_end < 4096
        assert "runs past the end of the file" in skip.reason


def test_a_garbage_length_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    at = written[1].commit_log_offset
    data[at : at + 4] = struct.pack(">I", 0x7FFF_FFFF)
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == [written[0], *written[2:]]
        [skip] = s.skipped
        assert (skip.offset, skip.length) == (at, written[2].commit_log_offset - at)
        # The consume queue still points at the damaged record: passed over, reported.
        assert [m.record for m in s.messages("t")] == [written[0], *written[2:]]
        assert "entry 1 points at commit-log offset" in s.skipped[-1].reason


def test_a_length_too_short_for_its_record_is_skipped(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    at = written[2].commit_log_offset
    data[at : at + 4] = struct.pack(">I", 20)
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == [*written[:2], written[3]]
        [skip] = s.skipped
        assert skip.offset == at
        assert "runs past the record's end" in skip.reason


def test_bad_magic_is_skipped(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    data[4] ^= 0xFF  # the first record's magic
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == written[1:]
        assert "magic" in s.skipped[0].reason
        assert s.skipped[0].offset == 0


def test_trailing_bytes_inside_a_record_are_kept(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    # Grow the last record by 9 bytes that no field claims.
    at = written[-1].commit_log_offset
    (length,) = struct.unpack(">I", data[at : at + 4])
    data[at : at + 4] = struct.pack(">I", length + 9)
    data[at + 4 + length : at + 4 + length + 9] = b"trailing!"
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        got = list(s.records())
        assert got[-1].record == dataclasses.replace(written[-1], trailing=b"trailing!")
        assert got[-1].record.encode() == bytes(data[at + 4 : at + 4 + length + 9])
        assert s.skipped == []


def test_garbage_in_the_zero_tail_is_reported(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    data[3000:3004] = b"junk"
    f.write_bytes(bytes(data))
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record for g in s.records()] == written
        [skip] = s.skipped
        end = written[-1].commit_log_offset + written[-1].store_size
        assert skip.offset == end
        assert "non-zero bytes at offset 3000" in skip.reason


def test_a_damaged_consume_queue_is_reported(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    cq = tmp_path / "b" / "consumequeue" / "t" / "0" / f"{0:020d}"
    data = bytearray(cq.read_bytes())
    data[CONSUME_QUEUE_ENTRY_SIZE + 8 : CONSUME_QUEUE_ENTRY_SIZE + 12] = b"\0\0\0\0"  # size 0
    cq.write_bytes(bytes(data[: 3 * CONSUME_QUEUE_ENTRY_SIZE + 10]))  # and a partial entry
    with LiteMQStore(tmp_path / "b") as s:
        assert [m.record for m in s.messages("t")] == [written[0], written[2]]
        reasons = [r.reason for r in s.skipped]
        assert reasons == ["an entry of size 0", "a partial entry at the end"]


@given(
    cut=st.integers(min_value=0, max_value=900),
    flips=st.lists(st.tuples(st.integers(0, 900), st.integers(1, 255)), max_size=4),
)
def test_any_damage_never_crashes_and_spares_the_records_before_it(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flips: list[tuple[int, int]]
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "b"
    written = small_store(path, n=6, preallocate=False)
    f = log_file(path)
    data = bytearray(f.read_bytes())
    for at, x in flips:
        if at < len(data):
            data[at] ^= x
    del data[len(data) - cut if cut < len(data) else 0 :]
    f.write_bytes(bytes(data))
    first_damage = min([len(data), *(at for at, _ in flips if at < len(data))])
    with LiteMQStore(path) as s:
        got = [g.record for g in s.records()]
        list(s.messages("t"))
        for r in written:
            if r.commit_log_offset + r.store_size <= first_damage:
                assert r in got
        for skip in s.skipped:
            assert skip.length > 0
            assert skip.reason


# --- the CLI ----------------------------------------------------------------------------


def test_read_commitlog_prints_what_the_seed_tool_prints(tmp_path: Path) -> None:
    records = [
        LiteMQRecord(
            message_id="1766547877259022000-0",
            topic="test_topic",
            tags=("b", "a"),
            keys=("k1",),
            properties=(("z", "1"), ("a", "2")),
            body=b"Hello LiteMQ! Message #1",
            priority=3,
            reliability=1,
            born_timestamp=T0,
            born_host="127.0.0.1:5000",
            store_host="127.0.0.1:10911",
            store_timestamp=T0,
        ),
        LiteMQRecord(
            message_id="d",
            topic="test_topic",
            message_type=1,
            delay_time=T0 + 5000,
            transaction_id="tx",
            sharding_key="sk",
            broadcast=1,
        ),
    ]
    write_store(tmp_path / "b", records, file_size=1024)
    f = str(log_file(tmp_path / "b"))
    s1, s2 = (4 + len(seed_encode(r)) for r in records)
    proc = cli("read-commitlog", f)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "=== CommitLog File Reader ===\n"
        f"File: {f}\n"
        "Size: 1024 bytes\n\n"
        f"\n=== Message #1 (offset: 0, size: {s1} bytes) ===\n"
        "MessageID:     1766547877259022000-0\n"
        "Topic:         test_topic\n"
        "QueueID:       0\n"
        "QueueOffset:   0\n"
        "CommitLogOffset: 0\n"
        f"StoreSize:     {s1}\n"
        "Tags:          [b a]\n"
        "Keys:          [k1]\n"
        "Properties:    map[a:2 z:1]\n"
        "MessageType:   0\n"
        "Priority:      3\n"
        "Reliability:   1\n"
        "BornTimestamp: 1766547877259 (2025-12-24T03:44:37Z)\n"
        "BornHost:      127.0.0.1:5000\n"
        "StoreHost:     127.0.0.1:10911\n"
        "StoreTimestamp: 1766547877259 (2025-12-24T03:44:37Z)\n"
        "Body:          Hello LiteMQ! Message #1 (24 bytes)\n"
        f"\n=== Message #2 (offset: {s1}, size: {s2} bytes) ===\n"
        "MessageID:     d\n"
        "Topic:         test_topic\n"
        "QueueID:       0\n"
        "QueueOffset:   24\n"
        f"CommitLogOffset: {s1}\n"
        f"StoreSize:     {s2}\n"
        "MessageType:   1\n"
        "Priority:      0\n"
        "Reliability:   0\n"
        "DelayTime:     1766547882259 (deliver at: 2025-12-24T03:44:42Z)\n"
        "TransactionID: tx\n"
        "ShardingKey:   sk\n"
        "Broadcast:     true\n"
        "BornTimestamp: 0 (1970-01-01T00:00:00Z)\n"
        "Body:          (empty)\n"
        f"\nReached end of valid messages at offset {s1 + s2}\n"
        "\n=== Summary ===\n"
        "Total messages: 2\n"
        f"Total size: {s1 + s2} bytes\n"
    )


def test_read_commitlog_json_has_every_field(store) -> None:
    path, written = store
    f = log_file(path)
    proc = cli("read-commitlog", "--format", "json", str(f))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    in_file = [r for r in written if r.commit_log_offset < FILE_SIZE]
    assert report["size"] == FILE_SIZE
    assert report["total_messages"] == len(in_file)
    assert report["skipped"] == []
    for m, r in zip(report["messages"], in_file, strict=True):
        assert m["offset"] == r.commit_log_offset
        assert m["size"] == r.store_size
        for name in ("message_id", "topic", "transaction_id", "sharding_key", "born_host"):
            assert m[name] == getattr(r, name)
        for name in ("message_type", "status", "delay_time", "queue_id", "consume_count"):
            assert m[name] == getattr(r, name)
        assert m["tags"] == list(r.tags)
        assert m["properties"] == [list(p) for p in r.properties]
        assert m["trailing"] == r.trailing.hex()
        if m["body_encoding"] == "utf-8":
            assert m["body"].encode() == r.body


def test_read_commitlog_shows_what_it_skipped(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    at = written[1].commit_log_offset
    data[at : at + 4] = b"\xff\xff\xff\xff"
    f.write_bytes(bytes(data))
    proc = cli("read-commitlog", str(f))
    assert proc.returncode == 0, proc.stderr
    skipped = written[2].commit_log_offset - at
    assert f"\n=== Skipped {skipped} bytes (offset: {at}) ===\nReason: a record of" in proc.stdout
    assert f"Raw data (first 100 bytes): {bytes(data[at : at + 100]).hex()}\n" in proc.stdout
    assert "Total messages: 3\n" in proc.stdout
    assert f"Skipped: {skipped} bytes in 1 places\n" in proc.stdout
    report = json.loads(cli("read-commitlog", "--format", "json", str(f)).stdout)
    assert report["skipped"][0]["offset"] == at
    assert report["total_messages"] == 3


def test_read_commitlog_of_a_missing_file_fails_clearly(tmp_path: Path) -> None:
    proc = cli("read-commitlog", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert "no such file" in proc.stderr


# --- import and export ------------------------------------------------------------------


def test_import_then_export_gives_back_the_same_files(store, tmp_path: Path) -> None:
    path, written = store
    q = tmp_path / "queue"
    proc = cli("import-litemq", str(path), str(q))
    assert proc.returncode == 0, proc.stderr
    assert f"OK: {len(written)} records imported" in proc.stdout
    proc = cli(
        "export-litemq",
        str(q),
        str(tmp_path / "copy"),
        "--file-size",
        str(FILE_SIZE),
        "--consume-queue-file-size",
        str(CQ_FILE_SIZE),
    )
    assert proc.returncode == 0, proc.stderr
    original = sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())
    copy = sorted(p.relative_to(tmp_path / "copy") for p in (tmp_path / "copy").rglob("*"))
    assert [p for p in copy if (tmp_path / "copy" / p).is_file()] == original
    for rel in original:
        assert (tmp_path / "copy" / rel).read_bytes() == (path / rel).read_bytes(), rel


def test_imported_messages_carry_every_field(store, tmp_path: Path) -> None:
    path, written = store
    report = import_store(path, tmp_path / "q")
    assert (report.records, report.first_seq, report.skipped) == (len(written), 0, ())
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        msgs = list(q.tailer())
    assert len(msgs) == len(written)
    first = msgs[0]
    assert first.payload == written[0].body
    assert first.key == "order-1"
    # Topic, tags and queue id are the message's own fields (litemq format 6).
    assert (first.topic, first.tags, first.queue_id) == ("orders", ("paid", "eu"), 0)
    assert (msgs[1].topic, msgs[1].queue_id) == ("orders", 1)
    assert (msgs[3].topic, msgs[3].tags, msgs[3].queue_id) == ("notices", ("全体",), 3)
    h = first.headers
    assert "litemq.topic" not in h
    assert "litemq.tags" not in h
    assert "litemq.queue_id" not in h
    assert json.loads(h["litemq.keys"]) == ["order-1", "customer-9"]
    assert h["litemq.property.region"] == "eu-west"
    assert h["litemq.born_timestamp"] == str(T0)
    assert h["litemq.store_host"] == "10.0.0.1:10911"
    assert msgs[3].headers["litemq.trailing"] == bytes(6)
    assert msgs[-1].key is None  # no keys
    for m, r in zip(msgs, written, strict=True):
        assert record_from_message(m) == r
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        orders = [m.headers["litemq.message_id"] for m in q.tailer(topic="orders", queue_id=0)]
    assert orders == [r.message_id for r in written if (r.topic, r.queue_id) == ("orders", 0)]


@pytest.mark.parametrize(
    "record",
    [
        LiteMQRecord(message_id="dup", properties=(("a", "1"), ("a", "2"))),
        LiteMQRecord(properties=tuple((f"p{i}", str(i)) for i in range(300))),
        LiteMQRecord(properties=(("", "empty name"), ("n" * 250, "long name"))),
        LiteMQRecord(
            message_id="\udcff\udcfe", topic="t\udc80", keys=("\udcff",), tags=("\udc81",)
        ),
        LiteMQRecord(keys=("", "second")),
        LiteMQRecord(topic="", queue_id=7, tags=("a",)),
        LiteMQRecord(topic="bell\x07", tags=("ok", "tab\t")),
        LiteMQRecord(topic="t" * 256, tags=("",)),
        LiteMQRecord(topic="orders", queue_id=70_000, tags=tuple(f"t{i}" for i in range(300))),
        LiteMQRecord(topic="orders", queue_id=65_535, tags=("dup", "dup", "b")),
    ],
    ids=[
        "duplicate-names",
        "300-properties",
        "odd-names",
        "not-utf8",
        "empty-first-key",
        "no-topic-but-queue-id",
        "control-characters",
        "long-topic-empty-tag",
        "queue-id-over-u16-300-tags",
        "largest-queue-id-repeated-tag",
    ],
)
def test_records_litemq_cannot_hold_natively_still_round_trip(record, tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size=1 << 20) as q:
        app = q.appender()
        record_to_message(record).append_to(app)
        app.flush()
        m = q.get(0)
    assert record_from_message(m) == record


def test_a_header_too_large_is_refused_not_cut() -> None:
    record = LiteMQRecord(tags=tuple("t" * 1000 for _ in range(70)))
    with pytest.raises(RecordEncodeError, match=r"litemq\.tags"):
        record_to_message(record)


def test_an_import_that_cannot_go_on_says_where_it_stopped(tmp_path: Path) -> None:
    records = [
        LiteMQRecord(message_id="ok", topic="t"),
        LiteMQRecord(message_id="huge", topic="t", tags=tuple("t" * 1000 for _ in range(70))),
    ]
    write_store(tmp_path / "b", records, file_size=1 << 20)
    with pytest.raises(RecordEncodeError, match=r"offset \d+: .*huge.*1 records appended"):
        import_store(tmp_path / "b", tmp_path / "q")
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        assert [m.headers["litemq.message_id"] for m in q.tailer()] == ["ok"]


def test_unknown_litemq_headers_are_refused() -> None:
    m = record_to_message(LiteMQRecord(message_id="m"))
    m.headers["litemq.future_field"] = "1"
    with pytest.raises(HeaderError, match="future_field"):
        record_from_message(m)


def test_plain_messages_export_as_new_records(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size=1 << 20) as q:
        app = q.appender()
        app.append(b"first", "k1", {"source": "web", "raw": b"\xff"})
        app.append(b"second")
        app.append(b"third", topic="payments", tags=["card", "eu"], queue_id=2)
        app.flush()
        stamps = [m.timestamp for m in q.tailer()]
    count = export_queue(tmp_path / "q", tmp_path / "b", topic="events", file_size=4096)
    assert count == 3
    with LiteMQStore(tmp_path / "b") as s:
        got = [g.record for g in s.records()]
        assert [m.record for m in s.messages("events")] == got[:2]
        assert [m.record for m in s.messages("payments", queue_id=2)] == got[2:]
    assert [(r.message_id, r.topic, r.tags, r.queue_id, r.body, r.keys) for r in got] == [
        ("0", "events", (), 0, b"first", ("k1",)),
        ("1", "events", (), 0, b"second", ()),
        ("2", "payments", ("card", "eu"), 2, b"third", ()),
    ]
    assert got[0].properties == (("source", "web"), ("raw", "\udcff"))
    assert got[0].born_timestamp == stamps[0] // 1000 == got[0].store_timestamp
    assert got[1].commit_log_offset == 4 + len(got[0].encode())
    assert got[1].queue_offset == 24
    assert got[1].store_size == 4 + len(got[1].encode())


def test_an_empty_queue_exports_as_an_empty_store(tmp_path: Path) -> None:
    litemq.Queue(tmp_path / "q", file_size=1 << 20).close()
    proc = cli("export-litemq", str(tmp_path / "q"), str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    assert "OK: 0 records" in proc.stdout
    with LiteMQStore(tmp_path / "b") as s:
        assert list(s.records()) == []
        assert s.topics() == {}


def test_import_reports_what_it_skipped(tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    data[written[1].commit_log_offset + 4] ^= 0xFF
    f.write_bytes(bytes(data))
    seen: list[tuple[int, int]] = []
    report = import_store(tmp_path / "b", tmp_path / "q", progress=lambda d, t: seen.append((d, t)))
    assert report.records == 3
    assert len(report.skipped) == 1
    assert seen[-1] == (4096, 4096)
    proc = cli("import-litemq", str(tmp_path / "b"), str(tmp_path / "q2"))
    assert proc.returncode == 0
    assert "SKIPPED " in proc.stdout
    assert "could not be read" in proc.stdout


def test_export_refuses_an_existing_store(store, tmp_path: Path) -> None:
    path, _ = store
    import_store(path, tmp_path / "q")
    proc = cli("export-litemq", str(tmp_path / "q"), str(path))
    assert proc.returncode == 1
    assert "already holds a commit log" in proc.stderr


def test_the_readme_example_runs(tmp_path: Path) -> None:
    import re
    import shlex

    from conftest import run_python

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## LiteMQ stores\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    assert code
    assert shell
    # The block writes under tempfile.gettempdir() (/tmp for a reader); its
    # `# ->` values are checked by test_docs.py::test_readme_examples_run.
    proc = run_python(f"import tempfile\ntempfile.tempdir = {str(tmp_path)!r}\n" + code.group(1))
    lines = proc.stdout.splitlines()
    assert lines[0] == "0 orders b'order 1'"
    assert lines[1].split(" ", 1)[1] == "audit b'login'"
    assert lines[2:] == []
    for line in shell.group(1).splitlines():
        args = shlex.split(line.split("#")[0].replace("/tmp/", f"{tmp_path}/"))
        assert args[0] == "litemq"
        done = cli(*args[1:])
        assert done.returncode == 0, done.stderr
    for name in os.listdir(tmp_path / "broker" / "commitlog"):
        copy = tmp_path / "broker-copy" / "commitlog" / name
        assert copy.read_bytes() == (tmp_path / "broker" / "commitlog" / name).read_bytes()


def test_a_failed_write_poisons_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    w = StoreWriter(tmp_path / "b", file_size=4096)
    w.append(LiteMQRecord(topic="t", body=b"kept"))
    real = os.pwrite

    def full_disk(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space left"):
        w.append(LiteMQRecord(topic="t", body=b"lost"))
    monkeypatch.setattr(os, "pwrite", real)
    with pytest.raises(WriterPoisonedError, match="earlier write failed") as e:
        w.append(LiteMQRecord(topic="t", body=b"after"))
    assert isinstance(e.value, litemq.PoisonedError)
    assert isinstance(e.value.cause, OSError)
    w.close()
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record.body for g in s.records()] == [b"kept"]


def test_a_short_pwrite_is_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, off: real(fd, data[:7], off))
    with StoreWriter(tmp_path / "b", file_size=4096) as w:
        w.append(LiteMQRecord(topic="t", body=b"written seven bytes at a time"))
    monkeypatch.setattr(os, "pwrite", real)
    with LiteMQStore(tmp_path / "b") as s:
        assert [g.record.body for g in s.records()] == [b"written seven bytes at a time"]


def test_append_after_close_raises(tmp_path: Path) -> None:
    w = StoreWriter(tmp_path / "b", file_size=4096)
    w.close()
    w.close()
    with pytest.raises(LiteMQStoreError, match="closed"):
        w.append(LiteMQRecord(topic="t"))
