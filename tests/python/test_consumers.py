"""Named tailers (`Queue.tailer(name=...)`): resume, commit, at-least-once across
process deaths, listing with lag, name rules and one handle per name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, run_python, spawn_python


def fill(q: litemq.Queue, n: int, size: int = 0) -> None:
    app = q.appender()
    app.append_batch([f"m{i}".encode().ljust(size, b".") for i in range(n)])
    app.flush()  # appends are handed to the I/O thread: wait until written


def seqs(t: litemq.Tailer, n: int | None = None) -> list[int]:
    out = []
    for msg in t:
        out.append(msg.seq)
        if n is not None and len(out) == n:
            break
    return out


def test_named_tailer_is_a_tailer(queue: litemq.Queue) -> None:
    fill(queue, 5)
    with queue.tailer(name="billing") as t:
        assert isinstance(t, litemq.Consumer)
        assert isinstance(t, litemq.Tailer)
        assert t.name == "billing"
        assert not t.auto_commit
        assert "billing" in repr(t)
        assert t.read_next().seq == 0
        t.seek(3)
        assert t.next_seq == 3
        assert [m.seq for m in t.follow(idle_timeout=0.05)] == [3, 4]
    assert t.closed
    with pytest.raises(litemq.ClosedError):
        t.commit()


def test_resumes_after_close_and_reopen(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:7") as q:
        fill(q, 30)
        t = q.tailer(name="billing")
        assert seqs(t, 12) == list(range(12))
        t.commit()
        assert t.committed_seq == 12
        assert seqs(t, 3) == [12, 13, 14]  # read, not committed
        t.close()
        with q.tailer(name="billing") as t:
            assert t.next_seq == 12
            assert seqs(t) == list(range(12, 30))
            t.commit(durable=True)
    # A new Queue handle (same process) sees the committed position.
    with litemq.Queue(qpath, read_only=True) as q, q.tailer(name="billing") as t:
        assert t.next_seq == 30
        assert t.committed_at <= datetime.now(UTC)
        assert t.read_next() is None


def test_start_applies_only_to_new_names(queue: litemq.Queue) -> None:
    fill(queue, 10)
    with queue.tailer(name="late", start="end") as t:
        assert t.next_seq == 10
    with queue.tailer(name="from-5", start=5) as t:
        assert t.read_next().seq == 5
        t.commit()
    # Existing names ignore `start`.
    with queue.tailer(name="from-5", start=0) as t:
        assert t.next_seq == 6


def test_auto_commit(queue: litemq.Queue) -> None:
    fill(queue, 10)
    with queue.tailer(name="auto", auto_commit=True) as t:
        assert t.auto_commit
        assert seqs(t, 4) == [0, 1, 2, 3]
    # close() committed everything read.
    with queue.tailer(name="auto", auto_commit=True) as t:
        assert t.next_seq == 4
    with pytest.raises(ValueError, match="auto_commit"):
        queue.tailer(auto_commit=True)  # type: ignore[call-overload]


def test_context_exit_on_exception_redelivers_the_failed_message(queue: litemq.Queue) -> None:
    fill(queue, 10)
    handled: list[int] = []

    def work() -> None:
        with queue.tailer(name="worker") as t:
            for msg in t:
                if msg.seq == 6:
                    raise RuntimeError("handler failed")
                handled.append(msg.seq)
                t.commit()

    with pytest.raises(RuntimeError):
        work()
    assert handled == list(range(6))
    with queue.tailer(name="worker") as t:
        assert t.read_next().seq == 6


def test_auto_commit_with_exception_redelivers_the_failed_message(queue: litemq.Queue) -> None:
    fill(queue, 10)

    def work() -> None:
        with queue.tailer(name="auto", auto_commit=True) as t:
            for msg in t:
                if msg.seq == 4:
                    raise RuntimeError("handler failed")

    with pytest.raises(RuntimeError):
        work()
    with queue.tailer(name="auto") as t:
        assert t.next_seq == 4


def test_clean_exit_without_commit_does_not_commit(queue: litemq.Queue) -> None:
    fill(queue, 5)
    with queue.tailer(name="lazy") as t:
        assert seqs(t) == [0, 1, 2, 3, 4]
    with queue.tailer(name="lazy") as t:
        assert t.next_seq == 0


def test_two_names_have_independent_positions(queue: litemq.Queue) -> None:
    fill(queue, 20)
    a = queue.tailer(name="billing")
    b = queue.tailer(name="audit")
    seqs(a, 15)
    a.commit()
    seqs(b, 4)
    b.commit()
    # Interleaved reads do not disturb each other.
    assert a.read_next().seq == 15
    assert b.read_next().seq == 4
    a.close()
    b.close()
    positions = {c.name: c.next_seq for c in queue.consumers()}
    assert positions == {"audit": 4, "billing": 15}
    # Names are case-sensitive.
    with queue.tailer(name="Billing") as t:
        assert t.next_seq == 0


@pytest.mark.parametrize(
    "name",
    ["", "a/b", "a\\b", "nul\x00", "line\nbreak", "del\x7f", ".", "..", "x" * 129],
)
def test_bad_names_are_value_errors(queue: litemq.Queue, name: str) -> None:
    with pytest.raises(ValueError, match="consumer name"):
        queue.tailer(name=name)
    assert queue.consumers() == []
    assert not (Path(queue.path) / "consumers").exists() or not any(
        (Path(queue.path) / "consumers").glob("*.pos")
    )


def test_unusual_but_valid_names(queue: litemq.Queue) -> None:
    fill(queue, 1)
    names = ["é-ü 漢字", "with space", "x" * 128, "..."]
    for name in names:
        with queue.tailer(name=name) as t:
            t.read_next()
            t.commit()
    assert sorted(c.name for c in queue.consumers()) == sorted(names)
    # No name is used as a file name as is.
    files = [p.name for p in (Path(queue.path) / "consumers").iterdir()]
    assert all(set(f) <= set("abcdefghijklmnopqrstuvwxyz234567.") for f in files)


def test_name_type_is_checked(queue: litemq.Queue) -> None:
    with pytest.raises(TypeError):
        queue.tailer(name=b"billing")  # type: ignore[call-overload]


def test_a_name_is_open_once_in_a_process(queue: litemq.Queue) -> None:
    t = queue.tailer(name="billing")
    with pytest.raises(litemq.LockedError) as info:
        queue.tailer(name="billing")
    assert info.value.pid == os.getpid()
    assert "billing" in str(info.value)
    t.close()
    queue.tailer(name="billing").close()  # free again


def test_a_name_open_in_another_process_is_locked_with_its_pid(queue: litemq.Queue) -> None:
    fill(queue, 3)
    with spawn_python(
        """
        import sys, litemq
        q = litemq.Queue(sys.argv[1], read_only=True)
        t = q.tailer(name="billing")
        print("ready", flush=True)
        sys.stdin.readline()
        t.close()
        """,
        queue.path,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline().strip() == "ready"
            with pytest.raises(litemq.LockedError) as info:
                queue.tailer(name="billing")
            assert info.value.pid == child.pid
            # Another name is free.
            queue.tailer(name="other").close()
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(timeout=60) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    queue.tailer(name="billing").close()


_KILLED_READER = """
import sys, time, litemq
q = litemq.Queue(sys.argv[1], read_only=True)
every = int(sys.argv[2])
stop_after = int(sys.argv[3])
t = q.tailer(name="billing")
read = 0
for msg in t.follow():
    print("read", msg.seq, flush=True)
    read += 1
    if read % every == 0:
        t.commit()
        print("commit", t.committed_seq, flush=True)
    if read == stop_after:
        print("waiting", flush=True)
        time.sleep(600)
"""


def _events(out: str) -> tuple[list[int], list[int]]:
    reads, commits = [], []
    for line in out.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "read":
            reads.append(int(value))
        elif kind == "commit":
            commits.append(int(value))
    return reads, commits


@pytest.mark.multiprocess
def test_resumes_in_a_new_process_after_sigkill(qpath: Path) -> None:
    total = 1000
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:128") as q:
        fill(q, total, size=20)
        for round_, stop_after in enumerate((333, 250, 10_000)):
            with subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(_KILLED_READER),
                    str(qpath),
                    "7",
                    str(stop_after),
                ],
                stdout=subprocess.PIPE,
                text=True,
            ) as child:
                assert child.stdout is not None
                lines = []
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    line = child.stdout.readline()
                    lines.append(line)
                    if line.strip() == "waiting" or (
                        line.startswith("read") and int(line.split()[1]) == total - 1
                    ):
                        break
                child.send_signal(signal.SIGKILL)
                child.wait(timeout=60)
                lines.append(child.stdout.read())
            reads, commits = _events("".join(lines))
            before = q.consumers()
            assert len(before) == 1
            if round_ == 0:
                start = 0
            # No gap: this process started exactly at the last commit of the previous one.
            assert reads[0] == start, (round_, reads[:3], start)
            assert reads == list(range(start, start + len(reads)))
            last_commit = commits[-1] if commits else start
            # What survived the kill is exactly the last commit.
            assert before[0].next_seq == last_commit
            assert last_commit <= reads[-1] + 1
            # Repeats are only what was read after the last commit.
            start = last_commit
        assert reads[-1] == total - 1


@pytest.mark.multiprocess
def test_resume_in_a_new_process_after_clean_close(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 50)
    code = """
        import sys, litemq
        with litemq.Queue(sys.argv[1], read_only=True) as q:
            with q.tailer(name="etl") as t:
                got = [m.seq for _, m in zip(range(int(sys.argv[2])), t)]
                t.commit()
        print(got[0] if got else -1, got[-1] if got else -1)
        """
    assert run_python(code, str(qpath), "20").stdout.split() == ["0", "19"]
    assert run_python(code, str(qpath), "20").stdout.split() == ["20", "39"]
    assert run_python(code, str(qpath), "20").stdout.split() == ["40", "49"]


def test_consumers_lists_lag(queue: litemq.Queue) -> None:
    assert queue.consumers() == []
    fill(queue, 100, size=100)
    with queue.tailer(name="half") as t:
        seqs(t, 40)
        t.commit()
    with queue.tailer(name="done") as t:
        seqs(t)
        t.commit()
    queue.tailer(name="new").close()
    info = {c.name: c for c in queue.consumers()}
    assert list(info) == sorted(info)
    assert {n: c.next_seq for n, c in info.items()} == {"done": 100, "half": 40, "new": 0}
    assert {n: c.lag_messages for n, c in info.items()} == {"done": 0, "half": 60, "new": 100}
    assert info["done"].lag_bytes == 0
    # Same-sized messages: bytes behind are proportional, and at least the payloads.
    assert info["new"].lag_bytes >= 100 * 100
    assert info["half"].lag_bytes * 100 == info["new"].lag_bytes * 60
    for c in info.values():
        assert isinstance(c, litemq.ConsumerInfo)
        assert c.committed_at.tzinfo is not None
        assert c.created_at <= c.committed_at <= datetime.now(UTC)
    # Lag grows as the writer goes on.
    fill(queue, 10, size=100)
    assert {c.name: c.lag_messages for c in queue.consumers()}["done"] == 10


def test_consumers_on_a_read_only_queue(queue: litemq.Queue) -> None:
    fill(queue, 10)
    with queue.tailer(name="billing") as t:
        seqs(t, 3)
        t.commit()
    with litemq.Queue(queue.path, read_only=True) as ro:
        assert [(c.name, c.next_seq, c.lag_messages) for c in ro.consumers()] == [("billing", 3, 7)]


def test_remove_consumer(queue: litemq.Queue) -> None:
    fill(queue, 5)
    t = queue.tailer(name="gone")
    with pytest.raises(litemq.LockedError):
        queue.remove_consumer("gone")
    t.close()
    assert queue.remove_consumer("gone") is True
    assert queue.remove_consumer("gone") is False
    assert queue.consumers() == []
    with pytest.raises(ValueError, match="consumer name"):
        queue.remove_consumer("a/b")
    # A removed name starts afresh.
    with queue.tailer(name="gone", start="end") as t:
        assert t.next_seq == 5


def _fill_topics(q: litemq.Queue, n: int) -> None:
    """Message i has topic "audit" when i % 3 == 0, "orders" otherwise."""
    app = q.appender()
    for i in range(n):
        app.append(f"m{i}".encode(), topic="audit" if i % 3 == 0 else "orders")
    app.flush()


def test_a_named_tailer_remembers_its_topic_filter(queue: litemq.Queue) -> None:
    _fill_topics(queue, 30)
    with queue.tailer(name="auditor", topic="audit") as t:
        assert [t.read_next().seq for _ in range(2)] == [0, 3]
        t.commit()
    # Reopened without topic=: still only the audit messages.
    with queue.tailer(name="auditor") as t:
        assert seqs(t) == list(range(6, 30, 3))
    # Another filter for the same name is refused, naming both...
    with pytest.raises(ValueError, match="audit"):
        queue.tailer(name="auditor", topic="orders")
    with queue.tailer(name="auditor", topic="audit") as t:
        assert t.read_next().seq == 6
    # ...unless the name starts over.
    with queue.tailer(name="auditor", topic="orders", start=0, reset=True) as t:
        assert seqs(t, 3) == [1, 2, 4]
    with queue.tailer(name="auditor", start=0, reset=True) as t:
        assert seqs(t, 3) == [0, 1, 2]


def test_lag_of_a_topic_tailer_counts_its_topic(queue: litemq.Queue) -> None:
    _fill_topics(queue, 30)
    with queue.tailer(name="auditor", topic="audit") as t:
        assert [t.read_next().seq for _ in range(2)] == [0, 3]
        t.commit()
    queue.tailer(name="all").close()
    info = {c.name: c for c in queue.consumers()}
    # It stands after 3: the audit messages 6, 9, ..., 27 are ahead.
    assert (info["auditor"].next_seq, info["auditor"].lag_messages) == (4, 8)
    assert info["auditor"].topic == "audit"
    assert (info["all"].lag_messages, info["all"].topic) == (30, None)


def test_commit_a_given_sequence(queue: litemq.Queue) -> None:
    fill(queue, 10)
    with queue.tailer(name="billing") as t:
        assert seqs(t, 8) == list(range(8))
        t.commit(5)
        assert (t.committed_seq, t.next_seq) == (5, 8)
        with pytest.raises(ValueError, match="11"):
            t.commit(11)
    with queue.tailer(name="billing") as t:
        assert t.read_next().seq == 5
        t.commit(10)  # the end is a position too
    with queue.tailer(name="billing") as t:
        assert t.read_next() is None


@pytest.mark.parametrize(("policy", "first"), [("earliest", 40), ("latest", None)])
def test_auto_reset_when_retention_deleted_the_position(
    qpath: Path, policy: str, first: int | None
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10") as q:
        fill(q, 50)
        q.tailer(name="slow").close()  # committed at 0
        assert q.apply_retention(litemq.Retention(max_files=1)).first_seq == 40
        with q.tailer(name="slow") as t, pytest.raises(litemq.NotFoundError):
            t.read_next()
        with q.tailer(name="slow", auto_reset="error") as t, pytest.raises(litemq.NotFoundError):
            t.read_next()
        with q.tailer(name="slow", auto_reset=policy) as t:  # type: ignore[arg-type]
            msg = t.read_next()
            assert (msg.seq if msg else None) == first
            t.commit()
        fill(q, 1)
        with q.tailer(name="slow") as t:
            assert t.read_next().seq == (41 if first == 40 else 50)
        with pytest.raises(ValueError, match="auto_reset"):
            q.tailer(name="slow", auto_reset="oldest")  # type: ignore[arg-type]


def test_reset_applies_start_to_an_existing_name(queue: litemq.Queue) -> None:
    fill(queue, 10)
    with queue.tailer(name="b", start=5) as t:
        t.read_next()
        t.commit()
    with queue.tailer(name="b", start=2, reset=True) as t:
        assert (t.next_seq, t.committed_seq) == (2, 2)
    with queue.tailer(name="b", start="end", reset=True) as t:
        assert t.committed_seq == 10
    with queue.tailer(name="b", reset=True) as t:  # start defaults to "start"
        assert t.read_next().seq == 0
    with pytest.raises(ValueError, match="reset"):
        queue.tailer(reset=True)  # type: ignore[call-overload]


def test_seq_for_time(queue: litemq.Queue) -> None:
    assert queue.seq_for_time(datetime.now(UTC)) == 0
    fill(queue, 20)
    stamps = [m.timestamp for m in queue.tailer()]
    for i in (0, 7, 19):
        s = queue.seq_for_time(stamps[i])
        assert s <= i
        assert stamps[s] >= stamps[i]
        assert all(ts < stamps[i] for ts in stamps[:s])
    assert queue.seq_for_time(datetime(2000, 1, 1, tzinfo=UTC)) == 0
    assert queue.seq_for_time(datetime(2999, 1, 1, tzinfo=UTC)) == 20
