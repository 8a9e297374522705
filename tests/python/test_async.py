"""asyncio: `read_next_async`, `follow_async`, `flush_async`.

What an asyncio service relies on: a wait costs no thread and wakes when a
writer in any process publishes, a cancelled read consumes nothing, and
closing ends every wait with ClosedError instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, spawn_python


def native_threads() -> int:
    """Threads of this process, native ones included."""
    return len(os.listdir("/proc/self/task"))


@pytest.mark.asyncio
async def test_read_next_async_waits_for_a_later_append(queue: litemq.Queue) -> None:
    t = queue.tailer()
    app = queue.appender()

    async def append_later() -> None:
        await asyncio.sleep(0.05)
        app.append(b"later")

    writer = asyncio.create_task(append_later())
    msg = await asyncio.wait_for(t.read_next_async(), 10)
    await writer
    assert msg is not None
    assert (msg.seq, msg.payload) == (0, b"later")
    # Nothing more: the timeout returns None.
    assert await t.read_next_async(timeout=0.05) is None


@pytest.mark.asyncio
async def test_read_next_async_returns_what_is_there_without_waiting(
    queue: litemq.Queue,
) -> None:
    queue.appender().append_batch([b"a", b"b"])
    t = queue.tailer()
    got = [await t.read_next_async(timeout=0), await t.read_next_async(timeout=0)]
    assert [m.payload for m in got if m is not None] == [b"a", b"b"]
    assert await t.read_next_async(timeout=0) is None


@pytest.mark.asyncio
async def test_bad_timeouts_are_refused_before_any_wait(queue: litemq.Queue) -> None:
    t = queue.tailer()
    with pytest.raises(ValueError, match="timeout"):
        t.read_next_async(timeout=-1)
    with pytest.raises(ValueError, match="idle_timeout"):
        t.follow_async(idle_timeout=float("nan"))


@pytest.mark.asyncio
async def test_a_cancelled_read_consumes_nothing(queue: litemq.Queue) -> None:
    t = queue.tailer()
    waiting = asyncio.create_task(t.read_next_async())
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    queue.appender().append(b"kept")
    msg = await asyncio.wait_for(t.read_next_async(), 10)
    assert msg is not None
    assert (msg.seq, msg.payload) == (0, b"kept")


@pytest.mark.asyncio
async def test_a_read_cancelled_by_a_timeout_consumes_nothing(queue: litemq.Queue) -> None:
    t = queue.tailer()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(t.read_next_async(), 0.05)
    queue.appender().append(b"kept")
    msg = await asyncio.wait_for(t.read_next_async(), 10)
    assert msg is not None
    assert msg.seq == 0


@pytest.mark.asyncio
async def test_a_thousand_idle_followers_cost_no_thread_and_all_wake(
    queue: litemq.Queue,
) -> None:
    tailers = [queue.tailer(start="end") for _ in range(1000)]
    before = native_threads()
    tasks = [asyncio.create_task(t.read_next_async()) for t in tailers]
    await asyncio.sleep(0.2)
    assert not any(task.done() for task in tasks)
    # One watch thread for the handle, not one per waiter; and one
    # registration in wake.ctl, not a thousand.
    assert native_threads() - before <= 1
    assert queue.stats().waiters == 1
    queue.appender().append(b"for everyone")
    got = await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert [(m.seq, m.payload) for m in got if m is not None] == [(0, b"for everyone")] * 1000


@pytest.mark.asyncio
async def test_closing_the_queue_ends_a_wait_with_closed_error(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    t = q.tailer()
    waiting = asyncio.create_task(t.read_next_async())
    await asyncio.sleep(0.05)
    q.close()
    with pytest.raises(litemq.ClosedError):
        await asyncio.wait_for(waiting, 10)
    with pytest.raises(litemq.ClosedError):
        await t.read_next_async()


@pytest.mark.asyncio
async def test_closing_the_tailer_ends_its_wait_with_closed_error(
    queue: litemq.Queue,
) -> None:
    t = queue.tailer()
    other = queue.tailer()
    waiting = asyncio.create_task(t.read_next_async())
    others = asyncio.create_task(other.read_next_async())
    await asyncio.sleep(0.05)
    t.close()
    with pytest.raises(litemq.ClosedError):
        await asyncio.wait_for(waiting, 10)
    # The other tailer's wait goes on.
    assert not others.done()
    queue.appender().append(b"x")
    msg = await asyncio.wait_for(others, 10)
    assert msg is not None
    assert msg.payload == b"x"


@pytest.mark.asyncio
async def test_follow_async_stops_after_idle_timeout(queue: litemq.Queue) -> None:
    queue.appender().append_batch([b"0", b"1", b"2"])
    got = [m.payload async for m in queue.tailer().follow_async(idle_timeout=0.1)]
    assert got == [b"0", b"1", b"2"]


@pytest.mark.asyncio
@pytest.mark.multiprocess
async def test_follow_async_sees_a_writer_in_another_process(qpath: Path) -> None:
    n = 200
    litemq.Queue(qpath, file_size=SMALL_FILE).close()
    reader = litemq.Queue(qpath, read_only=True)
    writer = None
    try:
        t = reader.tailer()
        writer = spawn_python(
            f"""
            import sys, time, litemq
            with litemq.Queue(sys.argv[1], file_size={SMALL_FILE}) as q:
                app = q.appender()
                for i in range({n}):
                    app.append(str(i).encode())
                    if i % 20 == 0:
                        time.sleep(0.02)
            """,
            str(qpath),
        )
        got = []
        async for msg in t.follow_async(idle_timeout=10):
            got.append(msg)
            if len(got) == n:
                break
        assert [m.seq for m in got] == list(range(n))
        assert [m.payload for m in got] == [str(i).encode() for i in range(n)]
    finally:
        if writer is not None:
            _, err = writer.communicate(timeout=60)
            assert writer.returncode == 0, err
        reader.close()


@pytest.mark.asyncio
async def test_flush_async_makes_appends_durable(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i in range(100):
        app.append(b"%d" % i)
    await asyncio.wait_for(app.flush_async(), 10)
    assert queue.stats().durable_seq >= 100
    # Nothing new: still returns.
    await asyncio.wait_for(app.flush_async(), 10)


@pytest.mark.asyncio
async def test_flush_async_after_close_raises_closed_error(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    app = q.appender()
    app.append(b"x")
    q.close()
    with pytest.raises(litemq.ClosedError):
        await asyncio.wait_for(app.flush_async(), 10)


@pytest.mark.asyncio
async def test_many_loops_one_after_another(queue: litemq.Queue) -> None:
    # Each event loop gets its own bridge; one that ended leaves nothing behind.
    def in_new_loop() -> bytes:
        async def read() -> bytes:
            m = await queue.tailer().read_next_async(timeout=5)
            assert m is not None
            return m.payload

        return asyncio.run(read())

    queue.appender().append(b"x")
    assert await asyncio.to_thread(in_new_loop) == b"x"
    assert await asyncio.to_thread(in_new_loop) == b"x"


def test_a_wait_cancelled_as_its_queue_closes_leaves_no_unretrieved_error(qpath: Path) -> None:
    # The queue closes (the wait's future gets ClosedError) and the task is
    # cancelled before it looks: asyncio must have nothing to complain about.
    import gc

    complaints: list[dict[str, object]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: complaints.append(ctx))
        q = litemq.Queue(qpath, file_size=SMALL_FILE)
        task = asyncio.create_task(q.tailer().read_next_async())
        await asyncio.sleep(0.05)
        q.close()
        await asyncio.sleep(0)  # the loop reads the notifier: the future fails
        task.cancel()
        with pytest.raises((asyncio.CancelledError, litemq.ClosedError)):
            await task
        del task
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert complaints == []


@pytest.mark.asyncio
async def test_a_named_tailer_awaits_and_commits_like_a_blocking_one(queue: litemq.Queue) -> None:
    app = queue.appender()
    with queue.tailer(name="billing", auto_commit=True) as c:
        waiting = asyncio.create_task(c.read_next_async(timeout=10))
        await asyncio.sleep(0.02)
        app.append(b"bill me")
        msg = await waiting
        assert msg is not None
        assert msg.payload == b"bill me"
    # auto_commit committed what was read: the name resumes after it.
    with queue.tailer(name="billing") as c:
        assert c.next_seq == 1
        assert await c.read_next_async(timeout=0.02) is None


@pytest.mark.asyncio
async def test_a_hole_before_published_messages_is_reported_not_awaited_forever(
    qpath: Path,
) -> None:
    # A zeroed length word in the file being written, with messages after it:
    # an async reader gets CorruptedError (as a blocking one does), it does
    # not wait for a message that can never come.
    with litemq.Queue(qpath, file_size=SMALL_FILE, index_interval=4) as q:
        q.appender().append_batch([b"m%d" % i for i in range(20)])
        q.appender().flush()
        position = q.get(10).position
        assert position is not None
        path, offset = position
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(b"\0\0\0\0")
        reader = litemq.Queue(qpath, read_only=True)
        try:
            t = reader.tailer()
            assert [m.seq for m in t.read_batch(100, timeout=0)] == list(range(10))
            with pytest.raises(litemq.CorruptedError) as info:
                await asyncio.wait_for(t.read_next_async(), 10)
            assert info.value.offset == offset
            assert t.skip_damaged()
            msg = await t.read_next_async(timeout=5)
            assert msg is not None
            assert msg.seq == 11
        finally:
            reader.close()


@pytest.mark.asyncio
async def test_a_tailer_outliving_its_dropped_queue_handle_still_awaits(qpath: Path) -> None:
    # `litemq.Queue(path).tailer()` keeps only the tailer: dropping the
    # handle (not closing it) leaves its tailers reading, async waits too.
    import gc

    with litemq.Queue(qpath, file_size=SMALL_FILE) as writer:
        t = litemq.Queue(qpath, read_only=True).tailer(start="end")
        gc.collect()
        waiting = asyncio.create_task(t.read_next_async(timeout=10))
        await asyncio.sleep(0.05)
        writer.appender().append(b"still here")
        msg = await asyncio.wait_for(waiting, 20)
        assert msg is not None
        assert msg.payload == b"still here"
