"""Batches compressed together (format 9): append_batch(..., compress_together=True).

What a user relies on: every message comes back as given, with its own
sequence, on every read path (tailer, get, backward, read_arrow, named
tailers, work queues); the queue is much smaller than with per-message
compression; what does not combine is refused with nothing appended.
"""

from __future__ import annotations

import json
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
            {"payload": b"p", "key": "k"},
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
    """A batch lands only in a version-9 file, so older readers refuse the file."""
    with litemq.Queue(tmp_path, compression="zstd") as q:
        q.appender().append_batch([event(i) for i in range(10)], compress_together=True)
        (f,) = q.data_files()
        header = Path(f.path).read_bytes()[:12]
    assert int.from_bytes(header[8:12], "little") == 9


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
            app.append_batch(payloads[at : at + 500], compress_together=True)
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
