"""Batches compressed together (format 9): append_batch(..., compress_together=True).

What a user relies on: every message comes back as given, with its own
sequence, on every read path (tailer, get, backward, read_arrow, named
tailers, work queues); the queue is much smaller than with per-message
compression; what does not combine is refused with nothing appended.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import litemq
from conftest import cli

SMALL_FILE = 1 << 20


def event(i: int) -> bytes:
    return json.dumps(
        {"event_id": i, "user": f"u{i % 17}", "kind": "page_view", "ts": 1_700_000_000 + i}
    ).encode()


def data_bytes(path: Path) -> int:
    with litemq.Queue(path, read_only=True) as q:
        return sum(f.bytes_written for f in q.data_files())


@pytest.mark.parametrize("codec", ["zstd", "lz4", "gzip"])
def test_every_read_path_returns_each_member(tmp_path: Path, codec: str) -> None:
    payloads = [event(i) for i in range(2000)]
    items: list[bytes | dict[str, object]] = [
        {"payload": p, "headers": {"n": str(i)}, "priority": i % 3} if i % 2 else p
        for i, p in enumerate(payloads)
    ]
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression=codec) as q:
        app = q.appender()
        app.append(b"first")
        r = app.append_batch(items, compress_together=True)
        app.append(b"last")
        app.flush()
        assert r == range(1, 2001)
        msgs = list(q.tailer())
        assert [m.payload for m in msgs] == [b"first", *payloads, b"last"]
        for i, m in enumerate(msgs[1:-1]):
            assert m.seq == i + 1
            assert m.compression == codec
            assert m.headers == ({"n": str(i)} if i % 2 else {})
            assert m.priority == (i % 3 if i % 2 else 0)
        # get into the middle of a batch; a member's payload_view is a copy.
        for i in (1999, 0, 1000, 1):
            m = q.get(r.start + i)
            assert m.payload == payloads[i]
            assert bytes(m.payload_view()) == payloads[i]
            # position: the batch frame (file, offset) its members share.
            assert m.position is not None
        assert q.get(r.start + 5).position == q.get(r.start + 6).position
        t = q.tailer(r.start + 1500)
        assert [m.payload for m in t][:-1] == payloads[1500:]
        back = q.tailer("end", direction="backward")
        assert [m.payload for m in back] == [b"last", *reversed(payloads), b"first"]
        table = q.read_arrow()
        assert table.column("payload").to_pylist() == [b"first", *payloads, b"last"]
        assert table.column("seq").to_pylist() == list(range(2002))


def test_much_smaller_than_per_message_compression(tmp_path: Path) -> None:
    payloads = [event(i) for i in range(20_000)]
    one, together = tmp_path / "one", tmp_path / "together"
    with litemq.Queue(one, file_size=SMALL_FILE * 4, compression="zstd") as q:
        q.appender().append_batch(payloads)
    with litemq.Queue(together, file_size=SMALL_FILE * 4, compression="zstd") as q:
        q.appender().append_batch(payloads, compress_together=True)
    per_message, batched = data_bytes(one), data_bytes(together)
    assert batched * 5 < per_message, (batched, per_message)
    # Under 2 bytes of the raw JSON in 10: about what Parquet+zstd stores.
    assert batched * 10 < sum(map(len, payloads)) * 2


def test_named_tailers_and_work_queues_stop_inside_a_batch(tmp_path: Path) -> None:
    payloads = [event(i) for i in range(300)]
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        q.appender().append_batch(payloads, compress_together=True)
        with q.tailer(name="billing") as c:
            got = [c.read_next().payload for _ in range(123)]
            c.commit()
        assert got == payloads[:123]
        with q.tailer(name="billing") as c:
            assert c.read_next().seq == 123
        wq = q.work_queue("jobs")
        jobs = [wq.get(timeout=1) for _ in range(10)]
        assert [j.payload for j in jobs if j] == payloads[:10]
        for j in jobs:
            assert j is not None
            wq.ack(j)
    # Reopened: recovery walks the batch; the consumer resumes mid-batch.
    with litemq.Queue(tmp_path, verify_on_startup=True) as q, q.tailer(name="billing") as c:
        assert c.read_next().payload == payloads[123]


def test_what_does_not_combine_is_refused(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", compression="zstd") as q:
        app = q.appender()
        for bad in (
            {"payload": b"p", "topic": "orders"},
            {"payload": b"p", "tags": ["t"]},
            {"payload": b"p", "ttl": 60},
            {"payload": b"p", "compress": False},
        ):
            with pytest.raises(ValueError, match="message 1"):
                app.append_batch([b"fine", bad], compress_together=True)
        assert len(q) == 0
    with (
        litemq.Queue(tmp_path / "plain") as q,
        pytest.raises(ValueError, match="compression option"),
    ):
        q.appender().append_batch([b"x"], compress_together=True)
    with (
        litemq.Queue(tmp_path / "sealed", compression="zstd", encryption_key=bytes(32)) as q,
        pytest.raises(ValueError, match="encrypted"),
    ):
        q.appender().append_batch([b"x"], compress_together=True)


def test_an_older_build_is_kept_off_a_batch_by_the_file_version(tmp_path: Path) -> None:
    """A batch lands only in a file of version 9 or later, so older readers refuse the file."""
    with litemq.Queue(tmp_path, compression="zstd") as q:
        q.appender().append_batch([event(i) for i in range(10)], compress_together=True)
        (f,) = q.data_files()
        header = Path(f.path).read_bytes()[:12]
    assert int.from_bytes(header[8:12], "little") >= 9


def test_cli_verify_counts_every_member(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, compression="zstd") as q:
        app = q.appender()
        app.append_batch([event(i) for i in range(500)], compress_together=True)
        app.append(b"plain")
    proc = cli("verify", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = cli("info", str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["next_seq"] == 501


def test_an_archive_reads_every_member_whole_and_by_ranges(tmp_path: Path) -> None:
    qpath, dest = tmp_path / "q", tmp_path / "archive"
    payloads = [event(i) for i in range(6000)]
    with litemq.Queue(qpath, file_size=256 << 10, compression="zstd") as q:
        app = q.appender()
        app.append(b"plain")
        for at in range(0, len(payloads), 500):
            items = [
                {"payload": p, "key": f"k{i % 9}"} if i % 4 == 0 else p
                for i, p in enumerate(payloads[at : at + 500], at)
            ]
            app.append_batch(items, compress_together=True)
            if at == 2500:
                app.roll()  # a batched file sealed in the middle
        app.append(b"plain too")
        app.flush()
        app.roll()
        local = q.read_arrow().to_pylist()
    litemq.archive_queue(qpath, dest)
    a = litemq.open_archive(dest)
    assert len(a.files) >= 2
    assert a.end_seq == 6002
    assert a.read_arrow().to_pylist() == local
    # Ranges cut inside batches, across batch and file edges, inside one batch.
    for start, end in [
        (1, 501),
        (250, 260),
        (499, 503),
        (1, 6002),
        (777, 2345),
        (5990, 6002),
        (2990, 3010),
    ]:
        got = a.read_arrow(start=start, end=end).to_pylist()
        assert got == local[start:end], (start, end)
    raw = a.read_arrow(start=10, end=20, raw=True, columns=["seq", "payload"])
    assert raw.column("payload").to_pylist() == payloads[9:19]


def _keyed_items(n: int) -> list[bytes | tuple[bytes, str | bytes] | dict[str, object]]:
    """Members of a batch: every 10th keyed "a" (text), every 10th + 1 keyed
    with bytes, member 50 a tombstone of "c", the rest without a key."""
    items: list[bytes | tuple[bytes, str | bytes] | dict[str, object]] = []
    for i in range(n):
        if i == 50:
            items.append({"key": "c", "tombstone": True})
        elif i % 10 == 0:
            items.append((event(i), "a"))
        elif i % 10 == 1:
            items.append({"payload": event(i), "key": b"b\xff"})
        else:
            items.append(event(i))
    return items


def test_keys_and_tombstones_in_a_batch_are_found(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        app = q.appender()
        app.append(b"a-plain", key="a")  # 0
        app.append(b"c-plain", key="c")  # 1
        r = app.append_batch(_keyed_items(200), compress_together=True)
        assert r == range(2, 202)
        assert q.get(10).position == q.get(2).position  # one batch frame
        a = q.find("a")
        assert [m.seq for m in a] == [0] + [2 + i for i in range(0, 200, 10) if i != 50]
        assert all(m.key == "a" for m in a)
        assert a[1].payload == event(0)
        b = q.find(b"b\xff")
        assert len(b) == 20
        assert all(m.key == b"b\xff" and m.payload == event(m.seq - 2) for m in b)
        latest = q.get_latest("a")
        assert latest is not None
        assert (latest.seq, latest.payload) == (192, event(190))
        # The tombstone member deletes "c", whose plain value came first.
        assert q.get_latest("c") is None
        c = q.find("c")
        assert [(m.seq, m.tombstone, m.payload) for m in c] == [
            (1, False, b"c-plain"),
            (52, True, b""),
        ]
        # Latest wins by sequence: a plain record after the batch, then a
        # batch after it.
        app.append(b"a-later", key="a")
        latest = q.get_latest("a")
        assert latest is not None
        assert latest.payload == b"a-later"
        r2 = app.append_batch(
            [event(i) for i in range(40)] + [(b"c-back", "c")], compress_together=True
        )
        back = q.get_latest("c")
        assert back is not None
        assert (back.seq, back.payload) == (r2.stop - 1, b"c-back")
        # Tailers see keys and tombstones of members too.
        t = q.tailer(52)
        m = t.read_next()
        assert m is not None
        assert (m.key, m.tombstone) == ("c", True)


def test_the_key_index_is_rebuilt_from_batches(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        app = q.appender()
        for _ in range(5):
            app.append_batch(_keyed_items(100), compress_together=True)
        want = [m.seq for m in q.find("a")]
    assert len(want) == 45
    shutil.rmtree(tmp_path / "index")
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        assert [m.seq for m in q.find("a")] == want
        assert len(q.find(b"b\xff")) == 50
        latest = q.get_latest("a")
        assert latest is not None
        assert latest.seq == want[-1]
        assert q.get_latest("c") is None


def test_compaction_keeps_keyed_batches_and_get_latest_exact(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        app = q.appender()
        app.append(b"x-old", key="x")  # 0: superseded by a batch member
        fill = [event(i) for i in range(60)]
        r = app.append_batch([*fill, (b"x-new", "x"), (b"w-member", "w")], compress_together=True)
        app.delete("w")  # a tombstone after the member: it must stay
        app.roll()
        app.append(b"active")
        report = q.compact(grace=0)
        assert report.records_dropped == 1, report
        with pytest.raises(litemq.CompactedError):
            q.get(0)
        latest = q.get_latest("x")
        assert latest is not None
        assert (latest.seq, latest.payload) == (r.stop - 2, b"x-new")
        assert q.get_latest("w") is None
        # The batch is whole: every member reads back.
        assert [m.payload for m in q.tailer(r.start)][: len(fill)] == fill
