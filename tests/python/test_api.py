"""The Python API: what a user types, and what it returns."""

from __future__ import annotations

import array
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import litemq
from conftest import SMALL_FILE


def test_append_returns_dense_sequences_and_tailer_reads_them(queue: litemq.Queue) -> None:
    app = queue.appender()
    assert app.append(b"order 1") == 0
    assert app.append(b"order 2") == 1
    assert app.append_batch([b"a", b"b", b"c"]) == range(2, 5)
    app.flush()
    got = [(m.seq, m.payload) for m in queue.tailer()]
    assert got == [(0, b"order 1"), (1, b"order 2"), (2, b"a"), (3, b"b"), (4, b"c")]


def test_len_first_next_seq(queue: litemq.Queue) -> None:
    assert (len(queue), queue.first_seq, queue.next_seq) == (0, 0, 0)
    queue.appender().append_batch([b"x"] * 7)
    queue.appender().flush()
    assert (len(queue), queue.first_seq, queue.next_seq) == (7, 0, 7)


def test_tailer_iteration_stops_then_resumes(queue: litemq.Queue) -> None:
    app = queue.appender()
    t = queue.tailer()
    assert list(t) == []
    app.append(b"one")
    app.flush()
    assert [m.payload for m in t] == [b"one"]
    assert list(t) == []
    app.append(b"two")
    app.flush()
    assert [m.payload for m in t] == [b"two"]
    assert t.next_seq == 2


def test_empty_payload_is_a_message(queue: litemq.Queue) -> None:
    app = queue.appender()
    assert app.append(b"") == 0
    assert app.append(b"after") == 1
    app.flush()
    assert [m.payload for m in queue.tailer()] == [b"", b"after"]


def test_bytes_like_payloads(queue: litemq.Queue) -> None:
    app = queue.appender()
    arr = np.arange(4, dtype=np.float64)
    payloads = [
        b"bytes",
        bytearray(b"bytearray"),
        memoryview(b"memoryview"),
        memoryview(b"0123456789")[::2],  # not contiguous
        array.array("i", [1, 2, 3]),
        arr,
    ]
    for p in payloads:
        app.append(p)
    app.flush()
    got = [m.payload for m in queue.tailer()]
    assert got == [
        b"bytes",
        b"bytearray",
        b"memoryview",
        b"02468",
        array.array("i", [1, 2, 3]).tobytes(),
        arr.tobytes(),
    ]
    assert np.array_equal(np.frombuffer(got[-1], dtype=np.float64), arr)


def test_append_batch_accepts_tuples_dicts_and_iterables(queue: litemq.Queue) -> None:
    app = queue.appender()
    r = app.append_batch(
        [
            b"plain",
            (b"with key", "k1"),
            (b"with key and headers", b"k2", {"h": "v"}),
            {"payload": b"dict", "key": "k3", "headers": {"n": b"\x00\xff"}},
            {"payload": bytearray(b"dict only payload")},
        ]
    )
    assert r == range(5)
    assert app.append_batch(x for x in [b"gen1", b"gen2"]) == range(5, 7)
    assert app.append_batch(()) == range(7, 7)
    app.flush()
    msgs = list(queue.tailer())
    assert [m.payload for m in msgs] == [
        b"plain",
        b"with key",
        b"with key and headers",
        b"dict",
        b"dict only payload",
        b"gen1",
        b"gen2",
    ]
    assert [m.key for m in msgs[:5]] == [None, "k1", b"k2", "k3", None]
    assert msgs[2].headers == {"h": "v"}
    assert msgs[3].headers == {"n": b"\x00\xff"}
    assert msgs[0].headers == {}


def test_key_and_headers_round_trip_with_their_types(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append(b"p", key="clé-été", headers={"région": "Île", "raw": b"\x00\x01\xfe"})
    app.append(b"q", key=b"\x00binary\xff")
    app.flush()
    m0 = queue.get(0)
    assert m0.key == "clé-été"
    assert isinstance(m0.key, str)
    assert m0.headers == {"région": "Île", "raw": b"\x00\x01\xfe"}
    m1 = queue.get(1)
    assert m1.key == b"\x00binary\xff"
    assert isinstance(m1.key, bytes)
    # headers returns a copy: mutating it changes nothing
    h = m0.headers
    h["x"] = "y"
    assert "x" not in m0.headers


def test_message_fields_and_datetime(queue: litemq.Queue) -> None:
    before = datetime.now(UTC)
    queue.appender().append(b"hello")
    queue.appender().flush()
    after = datetime.now(UTC)
    msg = queue.get(0)
    assert msg.seq == 0
    assert isinstance(msg.timestamp, int)
    assert msg.datetime.tzinfo is not None
    assert msg.datetime.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= msg.datetime <= after + timedelta(seconds=1)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert (msg.datetime - epoch) // timedelta(microseconds=1) == msg.timestamp
    assert "seq=0" in repr(msg)
    assert "b'hello'" in repr(msg)


def test_message_equality(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"a", b"b"])
    queue.appender().flush()
    from_tailer = list(queue.tailer())
    assert from_tailer[0] == queue.get(0)
    assert from_tailer[0] != from_tailer[1]
    assert len({from_tailer[0], queue.get(0), from_tailer[1]}) == 2
    assert from_tailer[0] != "not a message"


def test_payload_view_is_zero_copy_and_outlives_everything(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    q.appender().append(b"0123456789")
    q.appender().flush()
    t = q.tailer()
    msg = next(t)
    view = msg.payload_view()
    assert isinstance(view, memoryview)
    assert view.readonly
    assert bytes(view) == b"0123456789"
    assert bytes(view[2:5]) == b"234"
    with pytest.raises(TypeError):
        view[0] = 1  # type: ignore[index]
    t.close()
    del msg
    q.close()
    # The view keeps its file mapped after tailer, message and queue are gone.
    assert bytes(view) == b"0123456789"
    assert np.frombuffer(view, dtype=np.uint8)[9] == ord("9")


def test_payload_view_of_get_is_a_memoryview(queue: litemq.Queue) -> None:
    queue.appender().append(b"abc")
    queue.appender().flush()
    view = queue.get(0).payload_view()
    assert bytes(view) == b"abc"


def test_get(queue: litemq.Queue) -> None:
    queue.appender().append_batch([f"m{i}".encode() for i in range(100)])
    queue.appender().flush()
    assert queue.get(42).payload == b"m42"
    assert queue.get(0).payload == b"m0"
    assert queue.get(99).payload == b"m99"


def test_get_tells_where_each_message_lies(tmp_path: Path) -> None:
    """get reads a message in place: its position names the data file that holds it,
    sealed or being written, and its payload view is of that file."""
    with litemq.Queue(tmp_path / "q", file_size=64 * 1024) as q:
        q.appender().append_batch([bytes([i % 251]) * 300 for i in range(1000)])
        q.appender().flush()
        files = q.data_files()
        assert len(files) > 3
        with litemq.Queue(tmp_path / "q", read_only=True) as ro:
            for f in (files[0], files[len(files) // 2], files[-1]):
                for seq in (f.first_seq, f.first_seq + 1):
                    for handle in (q, ro):
                        m = handle.get(seq)
                        path, offset = m.position
                        assert path == str(f.path)
                        assert offset >= 4096
                        assert bytes(m.payload_view()) == m.payload == bytes([seq % 251]) * 300


def test_tailer_start_positions(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append_batch([b"0", b"1", b"2", b"3"])
    app.flush()
    assert [m.seq for m in queue.tailer(start=2)] == [2, 3]
    assert [m.seq for m in queue.tailer(start="start")] == [0, 1, 2, 3]
    assert [m.seq for m in queue.tailer(0)] == [0, 1, 2, 3]
    end = queue.tailer(start="end")
    assert list(end) == []
    app.append(b"4")
    app.flush()
    assert [m.seq for m in end] == [4]


def test_seek_and_seek_end(queue: litemq.Queue) -> None:
    queue.appender().append_batch([str(i).encode() for i in range(3000)])
    queue.appender().flush()
    t = queue.tailer()
    t.seek(2500)
    m = t.read_next()
    assert m is not None
    assert m.seq == 2500
    t.seek(10)
    assert next(t).payload == b"10"
    t.seek_end()
    assert t.next_seq == 3000
    assert t.read_next() is None


def test_seek_time(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append_batch([b"early"] * 10)
    app.flush()
    boundary = datetime.now(UTC) + timedelta(milliseconds=5)
    while datetime.now(UTC) <= boundary + timedelta(milliseconds=2):
        pass
    app.append_batch([b"late"] * 5)
    app.flush()
    t = queue.tailer()
    t.seek_time(boundary)
    msgs = list(t)
    assert [m.payload for m in msgs] == [b"late"] * 5
    assert all(m.datetime >= boundary for m in msgs)
    # an int is µs since the epoch
    t.seek_time(queue.get(3).timestamp)
    assert next(t).seq <= 3
    t.seek_time(0)
    assert t.next_seq == 0


def test_read_next_timeout(queue: litemq.Queue) -> None:
    t = queue.tailer()
    assert t.read_next() is None
    assert t.read_next(timeout=0.05) is None
    app = queue.appender()

    def later() -> None:
        app.append(b"late")

    timer = threading.Timer(0.05, later)
    timer.start()
    msg = t.read_next(timeout=30)
    timer.join()
    assert msg is not None
    assert msg.payload == b"late"


def test_read_next_none_waits_forever_until_a_message(queue: litemq.Queue) -> None:
    t = queue.tailer()
    app = queue.appender()
    timer = threading.Timer(0.1, lambda: app.append(b"x"))
    timer.start()
    msg = t.read_next(timeout=None)
    timer.join()
    assert msg is not None
    assert msg.payload == b"x"


def test_follow(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append(b"first")

    def writer() -> None:
        for i in range(20):
            app.append(f"live {i}".encode())

    th = threading.Thread(target=writer)
    got = []
    follow = queue.tailer().follow()
    th.start()
    for msg in follow:
        got.append(msg.payload)
        if len(got) == 21:
            break
    th.join()
    assert got == [b"first"] + [f"live {i}".encode() for i in range(20)]


def test_follow_idle_timeout_stops(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"a", b"b"])
    queue.appender().flush()
    assert [m.payload for m in queue.tailer().follow(idle_timeout=0.05)] == [b"a", b"b"]


def test_many_threads_share_an_appender(queue: litemq.Queue) -> None:
    app = queue.appender()
    seqs: list[int] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        mine = [app.append(f"{n}:{i}".encode()) for i in range(500)]
        with lock:
            seqs.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    app.flush()
    assert sorted(seqs) == list(range(2000))
    by_seq = {m.seq: m.payload for m in queue.tailer()}
    assert len(by_seq) == 2000
    for n in range(4):
        own = [by_seq[s] for s in sorted(by_seq) if by_seq[s].startswith(f"{n}:".encode())]
        assert own == [f"{n}:{i}".encode() for i in range(500)]


def test_many_threads_share_a_tailer(queue: litemq.Queue) -> None:
    queue.appender().append_batch([str(i).encode() for i in range(4000)])
    queue.appender().flush()
    t = queue.tailer()
    seen: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        mine = [m.seq for m in t]
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(seen) == list(range(4000))


def test_close_then_reopen_loses_nothing(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([f"{i}".encode() * 50 for i in range(3000)])
        q.appender().flush()
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        assert len(q) == 3000
        assert q.appender().append(b"more") == 3000
        q.appender().flush()
        assert [m.payload for m in q.tailer(start=2998)] == [b"2998" * 50, b"2999" * 50, b"more"]


def test_rolls_across_files(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100") as q:
        q.appender().append_batch([b"x" * 100] * 1000)
        q.appender().flush()
        stats = q.stats()
        assert stats.files >= 10
        assert stats.rolls >= 9
        assert [m.seq for m in q.tailer()] == list(range(1000))
    assert len(list(qpath.rglob("*.data"))) >= 10


def test_read_only_queue_reads_while_writer_writes(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as writer:
        app = writer.appender()
        app.append(b"one")
        app.flush()
        with litemq.Queue(qpath, read_only=True) as reader:
            assert reader.read_only
            t = reader.tailer()
            assert [m.payload for m in t] == [b"one"]
            app.append(b"two")
            msg = t.read_next(timeout=10)
            assert msg is not None
            assert msg.payload == b"two"
            with pytest.raises(litemq.ReadOnlyError):
                reader.appender()


def test_stats(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"x"] * 3)
    queue.appender().flush()
    queue.appender().flush()
    s = queue.stats()
    assert s.messages == 3
    assert s.first_seq == 0
    assert s.next_seq == 3
    assert s.files >= 1
    assert s.read_only is False
    assert s.durable_seq == 3
    assert isinstance(s.recovery, litemq.RecoveryReport)
    assert s.recovery.cut_bytes == 0
    assert s.recovery.dropped_files == ()


def test_stats_and_data_files_are_frozen_dataclasses_with_a_deprecated_dict_face(
    queue: litemq.Queue,
) -> None:
    import dataclasses

    queue.appender().append_batch([b"x"] * 3)
    s = queue.stats()
    assert isinstance(s, litemq.Stats)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.files = 0  # type: ignore[misc]
    assert dataclasses.asdict(s)["messages"] == 3
    # Code written for the dicts still runs, and is told what to write instead.
    with pytest.warns(DeprecationWarning, match=r"use \.messages instead"):
        assert s["messages"] == 3
    with pytest.raises(KeyError):
        s["no_such_field"]
    (f,) = queue.data_files()
    assert isinstance(f, litemq.DataFileInfo)
    assert (f.first_seq, f.end_seq, f.file_number) == (0, 3, 1)
    assert Path(f.path).exists()
    with pytest.warns(DeprecationWarning, match=r"use \.first_seq instead"):
        assert f["first_seq"] == 0


def test_lone_appends_are_written_by_the_appending_thread(qpath: Path) -> None:
    # Appends a few milliseconds apart find the I/O thread asleep: the
    # appender writes them itself, and a follower sees each without waiting
    # for another append or a flush.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        t = q.tailer()
        for i in range(10):
            time.sleep(0.005)
            app.append(b"%d" % i)
            msg = t.read_next(timeout=10)
            assert msg is not None
            assert (msg.seq, msg.payload) == (i, b"%d" % i)
        assert q.stats().appender_writes >= 5


def test_iterating_a_queue_reads_everything(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"a", b"b"])
    queue.appender().flush()
    assert [m.payload for m in queue] == [b"a", b"b"]


def test_reprs_show_state(queue: litemq.Queue, qpath: Path) -> None:
    queue.appender().append(b"x")
    queue.appender().flush()
    assert repr(queue) == f'litemq.Queue("{qpath}", first_seq=0, next_seq=1)'
    t = queue.tailer()
    assert "at seq 0" in repr(t)
    t.close()
    assert "closed" in repr(t)
    assert str(qpath) in repr(queue.appender())


@pytest.mark.parametrize("flush", ["async", "sync", litemq.Batch(bytes=4096, interval=0.001)])
def test_flush_modes_write_and_read_back(qpath: Path, flush: litemq.options.FlushSpec) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, flush=flush) as q:
        app = q.appender()
        for i in range(50):
            app.append(f"{i}".encode())
        app.flush()
        assert q.stats().durable_seq == 50
        assert [m.payload for m in q.tailer()] == [f"{i}".encode() for i in range(50)]


def test_tailer_and_queue_as_context_managers(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"x")
        q.appender().flush()
        with q.tailer() as t:
            assert not t.closed
            assert next(t).payload == b"x"
        assert t.closed
        with pytest.raises(litemq.ClosedError):
            t.read_next()
    with pytest.raises(litemq.ClosedError):
        q.appender()


def test_other_options_are_accepted(qpath: Path) -> None:
    with litemq.Queue(
        qpath,
        file_size="128KiB",
        roll={"period": "hourly", "size": "96KiB", "count": 500},
        index_interval=16,
        verify_on_startup=True,
        channel_capacity=8,
        wait="busy-spin",
    ) as q:
        q.appender().append_batch([b"y" * 200] * 2000)
        q.appender().flush()
        t = q.tailer()
        t.seek(1234)
        assert next(t).seq == 1234
        msg = q.tailer(start="end").read_next(timeout=0.01)
        assert msg is None
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        assert len(q) == 2000


def test_version_and_all() -> None:
    assert isinstance(litemq.__version__, str)
    for name in litemq.__all__:
        assert hasattr(litemq, name), name
    assert issubclass(litemq.ConfigError, ValueError)
    assert issubclass(litemq.NotFoundError, IndexError)
    for name in (
        "CorruptedError",
        "LockedError",
        "ClosedError",
        "PoisonedError",
        "ConfigError",
        "UnsupportedVersionError",
        "ReadOnlyError",
        "NotFoundError",
        "ForkedError",
    ):
        assert issubclass(getattr(litemq, name), litemq.LiteMQError)


def test_public_api_has_docstrings_with_examples() -> None:
    classes = [litemq.Queue, litemq.Appender, litemq.Tailer, litemq.Message, litemq.Batch]
    for cls in classes:
        assert cls.__doc__, cls
        assert ">>>" in cls.__doc__, cls
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable(member):
                continue
            assert member.__doc__, f"{cls.__name__}.{name} has no docstring"


def test_find_by_key_and_time(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, key_index={"slots": 4, "items": 64}) as q:
        app = q.appender()
        for i in range(300):
            app.append(f"m{i}".encode(), key=f"k{i % 3}" if i % 2 else b"\x00raw")
        app.flush()
        k1 = [m.seq for m in q.find("k1")]
        assert k1 == [i for i in range(300) if i % 2 and i % 3 == 1]
        assert [m.seq for m in q.find(b"k1")] == k1
        assert [m.seq for m in q.find(b"\x00raw", limit=3)] == [0, 2, 4]
        assert q.find("nobody") == []
        assert q.find("k1", limit=0) == []
        mid = q.get(150).timestamp
        later = [m.seq for m in q.find("k1", start=mid)]
        assert later == [s for s in k1 if q.get(s).timestamp >= mid]
        earlier = [m.seq for m in q.find("k1", end=q.get(150).datetime)]
        assert earlier == [s for s in k1 if q.get(s).timestamp < mid]
        msg = q.find("k2")[0]
        assert msg.key == "k2"
        assert msg.payload == f"m{msg.seq}".encode()


def test_a_million_single_appends_land_in_order(qpath: Path) -> None:
    # One thread, one message per call, as fast as Python goes: the path the
    # appender's hand-off to the I/O thread batches behind the scenes.
    n = 1_000_000
    with litemq.Queue(qpath, file_size="256MiB") as q:
        app = q.appender()
        append = app.append
        for i in range(n):
            append(i.to_bytes(4, "little") + b"x" * 96)
        app.flush()
        assert q.next_seq == n
        expected = 0
        for msg in q.tailer():
            assert msg.seq == expected
            assert int.from_bytes(msg.payload[:4], "little") == expected
            expected += 1
        assert expected == n


def test_read_batch_order_max_and_rolls(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100") as q:
        q.appender().append_batch([f"m{i}".encode() for i in range(450)])
        q.appender().flush()
        t = q.tailer()
        got: list[litemq.Message] = []
        while batch := t.read_batch(128, timeout=0):
            assert 1 <= len(batch) <= 128
            got.extend(batch)
        # In order, every message once, across the file rolls at each 100.
        assert [m.seq for m in got] == list(range(450))
        assert [m.payload for m in got] == [f"m{i}".encode() for i in range(450)]
        assert got[7] == q.get(7)
        assert t.next_seq == 450
        assert t.read_batch(10, timeout=0) == []
        t.seek(440)
        assert [m.seq for m in t.read_batch(1000, timeout=0)] == list(range(440, 450))
        assert len(list(q.tailer(start=5).read_batch(3))) == 3


def test_read_batch_timeout_waits_for_the_first(queue: litemq.Queue) -> None:
    t = queue.tailer()
    t0 = time.monotonic()
    assert t.read_batch(10, timeout=0.2) == []
    assert time.monotonic() - t0 >= 0.19
    app = queue.appender()
    timer = threading.Timer(0.1, lambda: (app.append(b"late"), app.flush()))
    timer.start()
    try:
        batch = t.read_batch(10, timeout=10)  # returns once the first message is there
    finally:
        timer.join()
    assert [m.payload for m in batch] == [b"late"]
    app.append_batch([b"x", b"y"])
    app.flush()
    assert [m.payload for m in t.read_batch(10)] == [b"x", b"y"]  # available: no wait


def test_read_batch_bad_arguments_and_closed(queue: litemq.Queue) -> None:
    t = queue.tailer()
    with pytest.raises(ValueError, match="at least 1"):
        t.read_batch(0)
    with pytest.raises(TypeError, match="max_messages"):
        t.read_batch("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        t.read_batch(True)
    with pytest.raises(ValueError, match="timeout"):
        t.read_batch(3, timeout=-1)
    queue.close()
    with pytest.raises(litemq.ClosedError):
        t.read_batch(3, timeout=0)


def test_read_batch_wakes_with_closed_error(queue: litemq.Queue) -> None:
    t = queue.tailer()
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            t.read_batch(10)
        except BaseException as e:
            errors.append(e)

    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.1)
    queue.close()
    th.join(5)
    assert not th.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], litemq.ClosedError)


def test_read_batch_of_a_named_tailer_commits_what_it_returned(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"a", b"b", b"c"])
    queue.appender().flush()
    with queue.tailer(name="c1") as c:
        assert [m.payload for m in c.read_batch(2, timeout=0)] == [b"a", b"b"]
        c.commit()
    with queue.tailer(name="c1") as c:
        assert [m.payload for m in c.read_batch(5, timeout=0)] == [b"c"]
