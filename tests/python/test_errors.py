"""Every error path a user can reach, and the exception it raises."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import time
from datetime import datetime
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE


def test_get_outside_the_queue_is_not_found(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"a", b"b"])
    queue.appender().flush()
    with pytest.raises(litemq.NotFoundError) as info:
        queue.get(5)
    e = info.value
    assert (e.seq, e.first, e.next) == (5, 0, 2)
    assert isinstance(e, IndexError)
    assert "5" in str(e)


def test_seek_past_the_end_is_not_found(queue: litemq.Queue) -> None:
    queue.appender().append(b"a")
    queue.appender().flush()
    t = queue.tailer()
    with pytest.raises(litemq.NotFoundError):
        t.seek(10)


def test_second_writer_is_refused_with_the_holder_pid(qpath: Path) -> None:
    # Within one process the OS lock is per open file: a second open is refused too.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"x")
        q.appender().flush()
        # The lock is taken at the first append (issue 33): that is where a second writer is refused.
        with (
            litemq.Queue(qpath, file_size=SMALL_FILE) as other,
            pytest.raises(litemq.LockedError) as info,
        ):
            other.appender()
        assert info.value.pid == os.getpid()
        assert str(os.getpid()) in str(info.value)


def test_use_after_close_is_closed_error(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    app = q.appender()
    app.append(b"x")
    q.close()
    q.close()  # idempotent
    with pytest.raises(litemq.ClosedError):
        app.append(b"y")
    with pytest.raises(litemq.ClosedError):
        app.append_batch([b"y"])
    with pytest.raises(litemq.ClosedError):
        q.appender()


def test_write_on_read_only_queue(qpath: Path) -> None:
    litemq.Queue(qpath, file_size=SMALL_FILE).close()
    with litemq.Queue(qpath, read_only=True) as q, pytest.raises(litemq.ReadOnlyError):
        q.appender()


def test_read_only_open_of_missing_queue_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        litemq.Queue(tmp_path / "missing", read_only=True)
    assert info.value.errno == errno.ENOENT


def test_permission_denied_is_permission_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores file modes; sysfs refuses new directories to everyone.
        target = Path("/sys/litemq-test-queue")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        target = locked / "q"
    with pytest.raises(PermissionError) as info:
        litemq.Queue(target)
    assert info.value.errno in (errno.EACCES, errno.EPERM)
    assert info.value.filename is not None


def test_path_that_is_a_file_is_an_os_error(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_bytes(b"not a queue")
    with pytest.raises(OSError, match=str(f.name)) as info:
        litemq.Queue(f)
    assert info.value.errno is not None
    assert not isinstance(info.value, litemq.LiteMQError)


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        ({"file_size": 1000}, litemq.ConfigError, "file_size"),
        ({"file_size": 0}, litemq.ConfigError, "file_size"),
        ({"file_size": "lots"}, litemq.ConfigError, "file_size"),
        ({"file_size": 1.5}, TypeError, "file_size"),
        ({"roll": "weekly"}, litemq.ConfigError, "weekly"),
        ({"roll": "count:0"}, litemq.ConfigError, "count"),
        ({"roll": "count:x"}, litemq.ConfigError, "count"),
        ({"roll": {"color": "red"}}, litemq.ConfigError, "color"),
        ({"roll": []}, litemq.ConfigError, "roll"),
        ({"roll": 3.5}, TypeError, "roll"),
        ({"roll": True}, TypeError, "roll"),
        ({"flush": "sometimes"}, litemq.ConfigError, "flush"),
        ({"flush": 1}, TypeError, "flush"),
        ({"index_interval": 0}, litemq.ConfigError, "index_interval"),
        ({"index_interval": "1"}, TypeError, "index_interval"),
        ({"channel_capacity": -1}, litemq.ConfigError, "channel_capacity"),
        ({"wait": "nap"}, litemq.ConfigError, "wait"),
        ({"read_only": "yes"}, TypeError, "read_only"),
    ],
)
def test_bad_options(
    qpath: Path, kwargs: dict[str, object], exc: type[Exception], words: str
) -> None:
    with pytest.raises(exc, match=words):
        litemq.Queue(qpath, **kwargs)  # type: ignore[arg-type]
    if exc is litemq.ConfigError:
        assert issubclass(exc, ValueError)


def test_bad_batch_options() -> None:
    with pytest.raises(litemq.ConfigError):
        litemq.Batch(bytes=0, interval=0)
    with pytest.raises(litemq.ConfigError):
        litemq.Batch(bytes=-1)
    with pytest.raises(TypeError):
        litemq.Batch(bytes="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        litemq.Batch(interval="soon")  # type: ignore[arg-type]


def test_bad_path_type(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="path"):
        litemq.Queue(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ("text", "encode"),
        (None, "NoneType"),
        (12, "int"),
        ([1, 2], "list"),
    ],
)
def test_append_wrong_payload_type(queue: litemq.Queue, payload: object, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        queue.appender().append(payload)  # type: ignore[arg-type]


def test_append_wrong_key_and_header_types(queue: litemq.Queue) -> None:
    app = queue.appender()
    with pytest.raises(TypeError, match="key"):
        app.append(b"x", key=12)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers"):
        app.append(b"x", headers=[("a", "b")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header names"):
        app.append(b"x", headers={1: "b"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="value"):
        app.append(b"x", headers={"a": 1})  # type: ignore[dict-item]
    assert len(queue) == 0


def test_limits_are_value_errors(queue: litemq.Queue) -> None:
    app = queue.appender()
    with pytest.raises(ValueError, match="key"):
        app.append(b"x", key=b"k" * (litemq.MAX_KEY_LEN + 1))
    with pytest.raises(ValueError, match="header"):
        app.append(b"x", headers={"": "empty name"})
    with pytest.raises(ValueError, match="header"):
        app.append(b"x", headers={"n" * (litemq.MAX_HEADER_NAME_LEN + 1): "v"})
    with pytest.raises(ValueError, match="header"):
        app.append(b"x", headers={"n": b"v" * (litemq.MAX_HEADER_VALUE_LEN + 1)})
    with pytest.raises(ValueError, match="headers"):
        app.append(b"x", headers={f"h{i}": "v" for i in range(litemq.MAX_HEADERS + 1)})
    with pytest.raises(ValueError, match="exceeds"):
        app.append(b"x" * SMALL_FILE)
    with pytest.raises(ValueError, match="exceeds"):
        app.append_batch([b"ok", b"x" * SMALL_FILE])
    assert len(queue) == 0
    assert app.append(b"fine", key=b"k" * 60_000) == 0


def test_append_batch_bad_items_name_the_item(queue: litemq.Queue) -> None:
    app = queue.appender()
    with pytest.raises(TypeError, match="item 1"):
        app.append_batch([b"ok", "text"])
    with pytest.raises(TypeError, match="item 0"):
        app.append_batch([(b"a", "k", {}, "extra")])
    with pytest.raises(TypeError, match="payload"):
        app.append_batch([{"key": "k"}])
    with pytest.raises(TypeError, match="unexpected"):
        app.append_batch([{"payload": b"x", "colour": "red"}])
    with pytest.raises(TypeError, match="iterable"):
        app.append_batch(b"not a list")
    with pytest.raises(TypeError, match="iterable"):
        app.append_batch(5)  # type: ignore[arg-type]
    assert len(queue) == 0


def test_bad_tailer_arguments(queue: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="start"):
        queue.tailer(start="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start"):
        queue.tailer(start=-1)
    with pytest.raises(TypeError, match="start"):
        queue.tailer(start=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="start"):
        queue.tailer(start=True)
    t = queue.tailer()
    with pytest.raises(ValueError, match="timeout"):
        t.read_next(timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        t.read_next(timeout=float("nan"))
    with pytest.raises(TypeError):
        t.read_next(timeout="1")  # type: ignore[arg-type]
    # A negative sequence is a bad value (issue 12), not pyo3's OverflowError.
    with pytest.raises(ValueError, match="seq") as info:
        t.seek(-1)
    assert not isinstance(info.value, OverflowError)


def test_bad_seek_time_arguments(queue: litemq.Queue) -> None:
    t = queue.tailer()
    with pytest.raises(ValueError, match="timezone-aware"):
        t.seek_time(datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="datetime"):
        t.seek_time("2026-01-01")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="microseconds"):
        t.seek_time(-5)


def test_corrupted_frame_is_reported_with_file_offset_and_seq(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([b"A" * 100, b"B" * 100, b"C" * 100])
        q.appender().flush()
    data = sorted(qpath.rglob("*.data"))[0]
    raw = bytearray(data.read_bytes())
    at = raw.find(b"B" * 100)
    assert at > 0
    raw[at + 50] ^= 0xFF
    data.write_bytes(bytes(raw))
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        assert next(t).payload == b"A" * 100
        with pytest.raises(litemq.CorruptedError) as info:
            t.read_next()
        e = info.value
        assert e.file is not None
        assert Path(e.file).name == data.name
        assert isinstance(e.offset, int)
        assert 0 < e.offset < at
        assert e.seq in (1, None)
        assert e.reason


def test_poisoned_error_carries_its_cause() -> None:
    # The class contract: PoisonedError exposes the original failure as .cause.
    assert issubclass(litemq.PoisonedError, litemq.LiteMQError)
    e = litemq.PoisonedError("writer is poisoned")
    assert e.cause is None


def _zero_page(data: Path, page: int) -> int:
    """Zeroes the `page`-th 4 KiB page after the 4 KiB header; returns its offset."""
    raw = bytearray(data.read_bytes())
    at = 4096 + page * 4096
    raw[at : at + 4096] = bytes(4096)
    data.write_bytes(bytes(raw))
    return at


def test_zeroed_page_in_a_sealed_file_raises_and_skip_damaged_steps_over_it(qpath: Path) -> None:
    payloads = [f"message {i} ".encode() * 8 for i in range(2000)]
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch(payloads)
    first = sorted(qpath.rglob("*.data"))[0]
    hole = _zero_page(first, 2)
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer()
        read: list[int] = []
        errors: list[litemq.CorruptedError] = []
        while True:
            try:
                msg = t.read_next()
            except litemq.CorruptedError as e:
                errors.append(e)
                assert t.skip_damaged(), "frames follow the hole"
                continue
            if msg is None:
                break
            assert msg.payload == payloads[msg.seq]
            read.append(msg.seq)
        # Not "the end of the queue": an error naming the file and offset,
        # then every message after the hole.
        assert 1 <= len(errors) <= 2
        assert all(Path(e.file).name == first.name for e in errors)
        assert hole - 512 <= errors[-1].offset < hole + 4096
        assert read[-1] == 1999
        assert 0 < 2000 - len(read) < 60
        # At the end of the data there is nothing to step over.
        assert t.skip_damaged() is False


def test_maybe_stored_error_says_a_failed_append_may_be_in_the_queue(qpath: Path) -> None:
    assert issubclass(litemq.MaybeStoredError, litemq.PoisonedError)
    assert issubclass(litemq.InternalError, litemq.LiteMQError)
    q = litemq.Queue(qpath, file_size=SMALL_FILE, flush="sync")
    app = q.appender()
    app.append(b"first")
    # The next data file cannot be created: a directory where its sparse
    # index goes. A batch bigger than the file then fails at the roll, after
    # its first part was written.
    data = sorted(qpath.rglob("*.data"))[0]
    day, counter = data.stem.split("-")
    blocker = data.with_name(f"{day}-{int(counter) + 1:04d}.index")
    blocker.mkdir()
    with pytest.raises(litemq.MaybeStoredError) as info:
        app.append_batch([b"x" * 1000] * 100)
    assert info.value.seq == 1
    assert isinstance(info.value.cause, OSError)
    assert info.value.__cause__ is info.value.cause
    with pytest.raises(litemq.PoisonedError) as later:
        app.append(b"later")
    assert not isinstance(later.value, litemq.MaybeStoredError)
    with pytest.raises(litemq.PoisonedError):
        q.close()
    del app, q
    blocker.rmdir()
    with litemq.Queue(qpath, read_only=True) as r:
        assert r.next_seq > 1  # part of the batch is there, as it said


def _make_writes_fail(file: Path) -> int:
    """Points every descriptor of this process on `file` at a read-only open of
    it: the writer's next write through its descriptor fails (EBADF), as a
    write the kernel refuses (EIO) would; its mapping and readers go on.
    Returns how many descriptors were swapped."""
    libc = ctypes.CDLL(None, use_errno=True)
    target = file.resolve()
    ro = os.open(target, os.O_RDONLY)
    swapped = 0
    try:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                same = fd != ro and Path(os.readlink(f"/proc/self/fd/{fd}")) == target
            except OSError:
                continue
            if same:
                assert libc.dup2(ro, fd) == fd, os.strerror(ctypes.get_errno())
                swapped += 1
    finally:
        os.close(ro)
    return swapped


def _batch_then_flush(app: litemq.Appender) -> None:
    app.append_batch([bytes([i]) * 1000 for i in range(100)])
    app.flush()


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_a_failed_write_of_frames_poisons_the_writer_and_publishes_none(
    qpath: Path, flush: str
) -> None:
    # "async": the batch is written on the appending thread (the I/O thread
    # asleep) or on the I/O thread; "sync": always on the I/O thread.
    size = 1 << 20
    q = litemq.Queue(qpath, file_size=size, flush=flush)
    app = q.appender()
    # Past half the file: the writer has grown it to its full size, so no
    # allocation ahead is left to fail first, and the frames' write is the
    # one call through the data file's descriptor that fails.
    want = [b"message %d" % i for i in range(10)] + [bytes([i % 251]) * 1000 for i in range(540)]
    app.append_batch(want)
    app.flush()
    data = sorted(qpath.rglob("*.data"))[-1]
    deadline = time.monotonic() + 10
    while data.stat().st_size < size:
        assert time.monotonic() < deadline, data.stat().st_size
        time.sleep(0.01)
    assert _make_writes_fail(data) >= 1, "the writer holds its data file open"
    # 100 KB, past the page the last write ended in: written with one write
    # system call, which fails: on this thread (the I/O thread asleep: the
    # batch itself raises) or on the I/O thread (the flush raises).
    with pytest.raises(litemq.PoisonedError) as info:
        _batch_then_flush(app)
    assert isinstance(info.value.cause, OSError)
    assert info.value.cause.errno == errno.EBADF
    assert "write" in str(info.value), info.value
    # Every later call reports it, and stores nothing.
    with pytest.raises(litemq.PoisonedError):
        app.append(b"later")
    # Readers see the messages before it and none of the batch.
    with litemq.Queue(qpath, read_only=True) as r:
        assert [m.payload for m in r.tailer()] == want
    with pytest.raises(litemq.PoisonedError):
        q.close()
    del app, q
    # Reopened, the queue holds them and goes on after them.
    with litemq.Queue(qpath, file_size=size, flush=flush) as q:
        assert q.next_seq == len(want)
        q.appender().append(b"after")
        q.appender().flush()
        assert [m.payload for m in q.tailer()] == [*want, b"after"]


def _keyed_queue(qpath: Path) -> dict[str, list[int]]:
    """Appends 300 keyed messages over several data and key-index files; returns the
    sequences of each key."""
    want: dict[str, list[int]] = {}
    with litemq.Queue(qpath, file_size=SMALL_FILE, key_index={"slots": 4, "items": 64}) as q:
        app = q.appender()
        for i in range(300):
            key = f"k{i % 7}"
            want.setdefault(key, []).append(app.append(b"v%d" % i, key=key))
            if i % 60 == 59:
                app.roll()
    return want


def test_lost_key_index_files_do_not_make_find_return_fewer(qpath: Path) -> None:
    want = _keyed_queue(qpath)
    files = sorted((qpath / "index").glob("*.idx"))
    assert len(files) > 3
    files[len(files) // 2].unlink()
    with litemq.Queue(qpath, read_only=True) as r:
        for key, seqs in want.items():
            assert [m.seq for m in r.find(key)] == seqs
            latest = r.get_latest(key)
            assert latest is not None
            assert latest.seq == seqs[-1]
    for f in files:
        f.unlink(missing_ok=True)
    with litemq.Queue(qpath, read_only=True) as r:
        assert [m.seq for m in r.find("k3")] == want["k3"]


def test_swapped_data_files_make_find_raise_corrupted(qpath: Path) -> None:
    _keyed_queue(qpath)
    with litemq.Queue(qpath, read_only=True) as r:
        paths = [Path(f.path) for f in r.data_files()]
    assert len(paths) > 3
    a, b = paths[1], paths[2]
    tmp = qpath / "swap.tmp"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    with litemq.Queue(qpath, read_only=True) as r:
        with pytest.raises(litemq.CorruptedError):
            r.find("k1")
        with pytest.raises(litemq.CorruptedError):
            r.get_latest("k1")


def test_every_exception_of_the_package_is_a_litemq_error_with_its_attributes(
    tmp_path: Path,
) -> None:
    # The modules beside the queue (archives, other programs' formats, Spark) raise
    # LiteMQErrors too, and stay the built-in errors callers caught before.
    import errno

    from litemq.interop import ledgerq, litemq_store
    from litemq.spark.dataset import NoQueueError, discover_queues
    from litemq.spark.options import OptionError, parse_time_us

    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b"\0" * 10)
    with pytest.raises(ledgerq.LedgerQError) as info:
        list(ledgerq.read_segment(seg))
    e = info.value
    assert isinstance(e, litemq.LiteMQError)
    assert isinstance(e, ValueError)
    assert (e.path, e.reason, e.offset) == (seg, "shorter than the 64-byte segment header", None)
    assert str(e) == f"{seg}: shorter than the 64-byte segment header"

    assert issubclass(litemq_store.LiteMQStoreError, litemq.LiteMQError)
    assert issubclass(litemq.ArchiveError, litemq.LiteMQError)

    with pytest.raises(NoQueueError) as no_queue:
        discover_queues([str(tmp_path / "nowhere")])
    assert isinstance(no_queue.value, litemq.LiteMQError)
    assert isinstance(no_queue.value, FileNotFoundError)
    assert no_queue.value.errno == errno.ENOENT
    assert no_queue.value.filename == str(tmp_path / "nowhere")

    with pytest.raises(OptionError) as bad:
        parse_time_us(True, "startTime")
    assert isinstance(bad.value, litemq.LiteMQError)
    assert isinstance(bad.value, ValueError)
    assert bad.value.option == "startTime"
