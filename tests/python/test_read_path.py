"""The read path of issue 15: messages built cheaply by a tailer keep every
field, a tailer's position is the last message it handed out although
iteration reads ahead, `read_batch(payloads=True)`, and large `read_arrow`
columns."""

from __future__ import annotations

import asyncio
import hashlib
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import litemq
from conftest import SMALL_FILE

KEY = bytes(range(32))

#: The attributes a user reads from a message.
FIELDS = (
    "seq",
    "timestamp",
    "payload",
    "key",
    "headers",
    "topic",
    "tags",
    "queue_id",
    "priority",
    "expires_at",
    "compression",
    "tombstone",
    "position",
)


def _values(m: litemq.Message) -> dict[str, Any]:
    return {name: getattr(m, name) for name in FIELDS}


def _fill(q: litemq.Queue) -> list[dict[str, Any]]:
    """One message of each kind; returns what each must read back as."""
    app = q.appender()
    app.append(b"plain")
    app.append(b"keyed text", key="k1")
    app.append(b"keyed bytes", key=b"\x00k2")
    app.append(b"with headers", headers={"h": "v", "b": b"\xff"})
    app.append(b"topic", topic="orders", tags=["paid", "eu"], queue_id=3, priority=7)
    app.append(b"expiring", expires_at=4_000_000_000_000_000)
    app.append(b"z" * 2000, compress="zstd")
    app.delete("k1")
    app.flush()
    return [
        {"payload": b"plain", "key": None, "headers": {}},
        {"payload": b"keyed text", "key": "k1"},
        {"payload": b"keyed bytes", "key": b"\x00k2"},
        {"payload": b"with headers", "headers": {"h": "v", "b": b"\xff"}},
        {
            "payload": b"topic",
            "topic": "orders",
            "tags": ("paid", "eu"),
            "queue_id": 3,
            "priority": 7,
        },
        {"payload": b"expiring", "expires_at": 4_000_000_000_000_000},
        {"payload": b"z" * 2000, "compression": "zstd"},
        {"payload": b"", "key": "k1", "tombstone": True},
    ]


@pytest.mark.parametrize("encrypted", [False, True])
def test_tailer_messages_keep_every_field_of_every_kind(tmp_path: Path, encrypted: bool) -> None:
    extra: dict[str, Any] = {"encryption_key": KEY} if encrypted else {}
    with litemq.Queue(tmp_path / "q", file_size=SMALL_FILE, **extra) as q:
        expected = _fill(q)
        iterated = list(q.tailer())
        batched = q.tailer().read_batch(100, timeout=0)
        assert [m.seq for m in iterated] == list(range(len(expected)))
        for m, b, want in zip(iterated, batched, expected, strict=True):
            got = _values(m)
            for name, value in want.items():
                assert got[name] == value, (m.seq, name)
            # Fields a kind does not set read as their defaults.
            defaults = {"topic": None, "tags": (), "queue_id": 0, "priority": 0}
            for name, value in defaults.items():
                if name not in want:
                    assert got[name] == value, (m.seq, name)
            if "expires_at" not in want:
                assert m.expires_at is None
            if "compression" not in want:
                assert m.compression is None
            if "tombstone" not in want:
                assert m.tombstone is False
            # A tailer's message, a read_batch one and get()'s agree on every field.
            owned = q.get(m.seq)
            assert _values(b) == got
            assert _values(owned) == got
            assert m == owned
            assert bytes(m.payload_view()) == m.payload
            assert m.position is not None
            assert m.position[0].endswith(".data")
            # Pickling keeps every field.
            assert _values(pickle.loads(pickle.dumps(m))) == got
            assert repr(m) == repr(owned)


def test_messages_stay_valid_after_the_tailer_moves_on_and_closes(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:50") as q:
        q.appender().append_batch([f"m{i}".encode() * 10 for i in range(200)])
        q.appender().flush()
        t = q.tailer()
        first = t.read_batch(10, timeout=0)
        views = [m.payload_view() for m in first]
        rest = list(t)  # moves on, across files
        assert len(rest) == 190
        t.close()
        q.close()
        # The tailer and its queue are closed: the messages and their views
        # are still whole.
        for i, (m, v) in enumerate(zip(first, views, strict=True)):
            assert m.payload == f"m{i}".encode() * 10
            assert bytes(v) == m.payload
            assert bytes(m.payload_view()) == m.payload
            assert m.position is not None
        assert rest[-1].payload == b"m199" * 10


def _numbered(q: litemq.Queue, n: int, start: int = 0) -> list[bytes]:
    payloads = [f"m{i}".encode() * 5 for i in range(start, start + n)]
    q.appender().append_batch(payloads)
    q.appender().flush()
    return payloads


def test_position_is_after_the_last_message_handed_out(qpath: Path) -> None:
    # Iteration reads runs ahead; whatever the user calls next sees the
    # tailer where the last message it got leaves it, across file rolls.
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:300") as q:
        payloads = _numbered(q, 1000)
        t = q.tailer()
        assert next(t).seq == 0
        assert t.next_seq == 1
        assert "at seq 1>" in repr(t)
        assert [m.seq for m in t.read_batch(3, timeout=0)] == [1, 2, 3]
        assert next(t).seq == 4
        assert t.read_next(timeout=1).seq == 5  # type: ignore[union-attr]
        assert t.read_next().seq == 6  # type: ignore[union-attr]
        assert t.read_batch(2, timeout=0, payloads=True) == payloads[7:9]
        assert [next(t).seq for _ in range(3)] == [9, 10, 11]
        t.seek(12)  # where it stands already
        assert next(t).seq == 12
        t.seek(295)  # a run that reaches the end of a file
        got = [next(t).seq, next(t).seq]
        assert t.next_seq == 297
        got += [m.seq for m in t.read_batch(2, timeout=0)]
        got += [next(t).seq for _ in range(4)]
        follow = t.follow(idle_timeout=0.01)
        got += [next(follow).seq, next(t).seq]
        assert got == list(range(295, 305))
        assert t.next_seq == 305
        t.seek(100)
        for m in t:
            if m.seq == 150:
                break
        assert t.next_seq == 151
        t.seek_time(q.get(400).timestamp)
        assert next(t).seq <= 400
        t.seek_end()
        assert next(t, None) is None
        assert t.next_seq == 1000
        # What the stopped tailer did not read comes to it once written.
        more = _numbered(q, 10, start=1000)
        assert [m.payload for m in t] == more
        assert t.next_seq == 1010


def test_iteration_mixes_runs_with_messages_read_alone(qpath: Path) -> None:
    # Bare messages come in runs; compressed ones, keyed ones, tombstones
    # and batches compressed together between them are read as before, and
    # every message comes once, in order, as `get` gives it.
    opts: dict[str, Any] = {"compression": "zstd", "compression_min_size": 256}
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:97", **opts) as q:
        app = q.appender()
        for i in range(400):
            if i % 7 == 3:
                app.append(b"z" * 300 + str(i).encode())
            elif i % 11 == 5:
                app.append(str(i).encode(), key=f"k{i}")
            elif i % 53 == 0:
                app.delete("k5")
            else:
                app.append(str(i).encode())
        app.append_batch([b"b%d" % i for i in range(50)], compress_together=True)
        app.append_batch([b"after%d" % i for i in range(30)])
        app.flush()
        n = len(q)
        t = q.tailer()
        got = list(t)
        assert [m.seq for m in got] == list(range(n))
        assert {m.compression for m in got} == {None, "zstd"}
        assert any(m.tombstone for m in got)
        assert t.next_seq == n
        for m in got:
            assert _values(m) == _values(q.get(m.seq))
        # Stepping one message at a time, with a look at the position each time.
        t.seek(0)
        for seq in range(n):
            assert t.next_seq == seq
            assert next(t).seq == seq


def test_large_and_small_messages_read_ahead_in_order(qpath: Path) -> None:
    # Runs are cut by bytes as well as by count: large messages come one
    # run at a time, and every message once, in order.
    sizes = [10, 70_000, 10, 10, 200_000, 64 << 10, 3, 150_000] * 5 + [10] * 300
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    with litemq.Queue(qpath, file_size=4 << 20) as q:
        q.appender().append_batch(payloads)
        q.appender().flush()
        t = q.tailer()
        for seq, payload in enumerate(payloads):
            assert t.next_seq == seq
            m = next(t)
            assert (m.seq, m.payload) == (seq, payload)
        assert next(t, None) is None
        assert [m.payload for m in q.tailer()] == payloads


def _drain_from_threads(t: litemq.Tailer, threads: int) -> list[list[int]]:
    """The sequences each of `threads` threads got iterating `t` at once."""
    got: list[list[int]] = [[] for _ in range(threads)]
    # Every thread is running before any reads: one started late on a busy
    # machine would find the queue drained, and prove nothing.
    ready = threading.Barrier(threads)

    def drain(out: list[int]) -> None:
        ready.wait()
        for m in t:
            out.append(m.seq)

    workers = [threading.Thread(target=drain, args=(out,)) for out in got]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between messages
    try:
        for th in workers:
            th.start()
        for th in workers:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    return got


def test_threads_sharing_a_tailer_get_each_message_once(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:3000") as q:
        _numbered(q, 20_000)
        # Draining 20,000 takes about 2 ms: now and then one thread has done
        # it before the system wakes the others (1 run in 15 here). Every
        # attempt must hand out each message once; one of five must have
        # been shared, or the test proved nothing.
        for _ in range(5):
            t = q.tailer()
            got = _drain_from_threads(t, 4)
            assert sorted(s for out in got for s in out) == list(range(20_000))
            assert all(out == sorted(out) for out in got)
            assert t.next_seq == 20_000
            if sum(1 for out in got if out) > 1:
                break
        else:
            pytest.fail("no attempt had two threads reading")


def _ten_messages_the_sixth_damaged(qpath: Path) -> None:
    """A queue of ten 100-byte messages whose sixth frame's payload has a flipped byte."""
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([b"x" * 100] * 10)
        q.appender().flush()
    data = sorted(qpath.rglob("*.data"))[-1]
    raw = bytearray(data.read_bytes())
    raw[4096 + 128 * 5 + 50] ^= 0xFF  # inside the sixth frame's payload
    data.write_bytes(bytes(raw))


def test_damage_after_a_run_is_reported_at_the_damaged_message(qpath: Path) -> None:
    _ten_messages_the_sixth_damaged(qpath)
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        assert [next(t).seq for _ in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(litemq.CorruptedError):
            next(t)
        assert t.next_seq == 5
        assert t.skip_damaged()
        assert [m.seq for m in t] == [6, 7, 8, 9]


def test_closing_drops_what_was_read_ahead(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        _numbered(q, 100)
        t = q.tailer()
        assert next(t).seq == 0
        t.close()
        assert t.closed
        with pytest.raises(litemq.ClosedError):
            next(t)
        t = q.tailer()
        assert next(t).seq == 0
    with pytest.raises(litemq.ClosedError):
        next(t)


def test_named_tailer_commits_what_next_handed_out(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        _numbered(q, 100)
        with q.tailer(name="billing") as t:
            assert [next(t).seq for _ in range(3)] == [0, 1, 2]
            t.commit()
            assert t.committed_seq == 3
            assert next(t).seq == 3
        with q.tailer(name="billing") as t:
            assert t.next_seq == 3
            assert next(t).seq == 3


def test_read_next_async_after_next_returns_the_following_message(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        _numbered(q, 100)
        t = q.tailer()
        assert next(t).seq == 0
        msg = asyncio.run(t.read_next_async(timeout=1))
        assert msg is not None
        assert msg.seq == 1
        assert next(t).seq == 2


def test_read_batch_payloads_returns_the_payloads(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100", compression="zstd") as q:
        payloads = [f"m{i}".encode() * (1 + i % 40) for i in range(450)]
        q.appender().append_batch(payloads)
        q.appender().flush()
        t = q.tailer()
        got: list[bytes] = []
        while batch := t.read_batch(128, timeout=0, payloads=True):
            assert 1 <= len(batch) <= 128
            assert all(type(p) is bytes for p in batch)
            got.extend(batch)
        # In order, each once, across the rolls; compressed ones decompressed.
        assert got == payloads
        assert t.next_seq == 450
        assert t.read_batch(10, timeout=0, payloads=True) == []
        t.seek(445)
        assert t.read_batch(3, payloads=True) == payloads[445:448]
        # The same read as messages.
        t.seek(100)
        assert [m.payload for m in t.read_batch(50)] == payloads[100:150]


def test_read_batch_payloads_of_every_kind_and_after_a_wait(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size=SMALL_FILE, encryption_key=KEY) as q:
        expected = _fill(q)
        t = q.tailer()
        assert t.read_batch(100, timeout=0, payloads=True) == [e["payload"] for e in expected]
        # When nothing is there, the first message waited for is a payload too.
        assert t.read_batch(5, timeout=0.01, payloads=True) == []
        q.appender().append(b"late")
        q.appender().flush()
        assert t.read_batch(5, timeout=5, payloads=True) == [b"late"]


def test_read_batch_payloads_keeps_what_it_read_before_damage(qpath: Path) -> None:
    _ten_messages_the_sixth_damaged(qpath)
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        assert t.read_batch(100, timeout=0, payloads=True) == [b"x" * 100] * 5
        with pytest.raises(litemq.CorruptedError):
            t.read_batch(100, timeout=0, payloads=True)
        assert t.next_seq == 5


def test_read_batch_payloads_must_be_a_keyword(queue: litemq.Queue) -> None:
    t = queue.tailer()
    with pytest.raises(TypeError):
        t.read_batch(3, 0, True)  # type: ignore[call-overload]


def test_large_read_arrow_columns_hold_every_row(qpath: Path) -> None:
    # Columns past 4 MiB (reserved up front for the whole read): 60,000 rows of 100 bytes
    # (6 MB of payload, 480 kB per int column) across sealed files and the
    # active one come back whole, in order.
    n = 60_000
    with litemq.Queue(qpath, file_size=2 << 20) as q:
        app = q.appender()
        for start in range(0, n, 1000):
            app.append_batch([i.to_bytes(4, "little") * 25 for i in range(start, start + 1000)])
        app.flush()
        assert len(list(qpath.rglob("*.data"))) > 2
        batch = q.read_arrow()
        assert batch.num_rows == n
        assert batch.column("seq").to_pylist() == list(range(n))
        payloads = batch.column("payload").to_pylist()
        assert payloads == [i.to_bytes(4, "little") * 25 for i in range(n)]
        part = q.read_arrow(1000, 51_000, columns=["payload"])
        assert part.column("payload").to_pylist() == payloads[1000:51_000]


def test_read_batch_payloads_of_a_named_tailer_commits_what_it_returned(
    queue: litemq.Queue,
) -> None:
    queue.appender().append_batch([b"a", b"b", b"c"])
    queue.appender().flush()
    with queue.tailer(name="c1") as c:
        assert c.read_batch(2, timeout=0, payloads=True) == [b"a", b"b"]
        c.commit()
    with queue.tailer(name="c1") as c:
        assert c.read_batch(5, timeout=0, payloads=True) == [b"c"]


def test_read_batch_payloads_takes_a_bool(queue: litemq.Queue) -> None:
    with pytest.raises(TypeError):
        queue.tailer().read_batch(3, timeout=0, payloads=1)  # type: ignore[call-overload]


def _sealed_files_of(qpath: Path, n: int) -> list[Path]:
    """A closed queue of ``n`` numbered 100-byte messages (128-byte frames)
    in 256 KiB files, about 2,000 frames each; returns its data files."""
    with litemq.Queue(qpath, file_size=256 * 1024) as q:
        q.appender().append_batch([i.to_bytes(4, "little") * 25 for i in range(n)])
        q.appender().flush()
    files = sorted(qpath.rglob("*.data"))
    assert len(files) >= 3
    return files


@pytest.mark.parametrize("reader", ["next", "read_batch"])
def test_runs_past_a_quarter_of_a_sealed_file_still_report_damage_where_it_is(
    qpath: Path, reader: str
) -> None:
    # A tailer reading run after run verifies a sealed file whole once it
    # has read a quarter of it, and then skips the per-frame CRC. Here the
    # whole-file check fails (a payload byte of message 1,700, far past the
    # first quarter of the first file, is flipped), so the frames must still
    # be checked one by one: every message before it is handed out, the
    # damaged one is reported at its own sequence, never handed out.
    files = _sealed_files_of(qpath, 6000)
    raw = bytearray(files[0].read_bytes())
    raw[4096 + 128 * 1700 + 50] ^= 0xFF
    files[0].write_bytes(bytes(raw))
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        got: list[bytes] = []

        def read_all() -> None:
            if reader == "next":
                got.extend(m.payload for m in t)
            else:
                while page := t.read_batch(100, timeout=0, payloads=True):
                    got.extend(page)

        with pytest.raises(litemq.CorruptedError) as info:
            read_all()
        assert info.value.seq == 1700
        assert got == [i.to_bytes(4, "little") * 25 for i in range(1700)]
        assert t.next_seq == 1700


def test_runs_over_sealed_files_hand_out_every_message(qpath: Path) -> None:
    # The same files undamaged, read with the whole-file check (a fresh
    # handle per read, so no file is known verified beforehand), by next()
    # and by read_batch, and after a seek into the middle of a file.
    _sealed_files_of(qpath, 6000)
    want = [i.to_bytes(4, "little") * 25 for i in range(6000)]
    with litemq.Queue(qpath, read_only=True) as q:
        assert [m.payload for m in q.tailer()] == want
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        got: list[bytes] = []
        while page := t.read_batch(333, timeout=0, payloads=True):
            got.extend(page)
        assert got == want
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer(start=1500)
        assert [m.seq for m in t] == list(range(1500, 6000))


def _read_skipping_damage(
    t: litemq.Tailer, max_messages: int
) -> tuple[dict[int, bytes], list[litemq.CorruptedError]]:
    """Reads ``t`` to the end with ``read_batch(max_messages)``, stepping
    over each damage reported with ``skip_damaged()``; returns the messages
    by sequence and the errors."""
    got: dict[int, bytes] = {}
    errors: list[litemq.CorruptedError] = []
    while True:
        try:
            page = t.read_batch(max_messages, timeout=0)
        except litemq.CorruptedError as e:
            errors.append(e)
            assert len(errors) < 5, errors
            assert t.skip_damaged()
            continue
        if not page:
            return got, errors
        for m in page:
            assert m.seq not in got
            got[m.seq] = m.payload


@pytest.mark.parametrize("together", [False, True], ids=["frames", "batches"])
def test_read_batch_over_a_damaged_frame_returns_what_precedes_it_and_skips_only_it(
    qpath: Path, together: bool
) -> None:
    # read_batch asking for more than a quarter of a sealed file verifies
    # the file whole; that check fails here (one byte of the frame holding
    # message 1,700 flipped). read_batch must still behave as next() does:
    # hand out every message before the damaged frame, raise with the
    # damaged frame's sequence, and skip_damaged() steps over that frame
    # alone (the messages it stood for), reading on after it.
    n = 6000
    # Half of each payload does not compress, so batches fill files too.
    want = [hashlib.sha256(i.to_bytes(4, "little")).digest() * 2 + b"-" * 36 for i in range(n)]
    opts: dict[str, Any] = {"compression": "zstd"} if together else {}
    with litemq.Queue(qpath, file_size=(64 if together else 256) * 1024, **opts) as q:
        q.appender().append_batch(want, compress_together=together)
    files = sorted(qpath.rglob("*.data"))
    assert len(files) >= 3
    with litemq.Queue(qpath, read_only=True) as q:
        position = q.get(1700).position
    assert position is not None
    assert position[0] == str(files[0])
    frame_at = position[1]
    raw = bytearray(files[0].read_bytes())
    raw[frame_at + 40] ^= 0xFF
    files[0].write_bytes(bytes(raw))

    with litemq.Queue(qpath, read_only=True) as q:
        lost = [s for s in range(n) if isinstance(_get_or_error(q, s), litemq.CorruptedError)]
        assert 1700 in lost
        # The members of one frame: consecutive sequences.
        assert lost == list(range(lost[0], lost[-1] + 1))
        if not together:
            assert lost == [1700]
        got, errors = _read_skipping_damage(q.tailer(), 1000)
        assert [e.seq for e in errors] == [lost[0]]
        assert errors[0].file == str(files[0])
        assert sorted(got) == [s for s in range(n) if s not in lost]
        assert all(got[s] == want[s] for s in got)


def _get_or_error(q: litemq.Queue, seq: int) -> litemq.Message | litemq.LiteMQError:
    try:
        return q.get(seq)
    except litemq.LiteMQError as e:
        return e
