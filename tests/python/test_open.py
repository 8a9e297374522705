"""Opening a queue: where one may be created, and datasets of queues in the CLI (issue 33)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, cli, spawn_python

#: A consumer that forgets read_only=True: opens the queue, reads, and stays open.
CONSUMER = """
import sys, litemq
q = litemq.Queue(sys.argv[1], file_size=64 * 1024)
print([m.payload.decode() for m in q.tailer()], flush=True)
sys.stdin.readline()
t = q.tailer()
print([m.payload.decode() for m in t], len(q), q.next_seq, flush=True)
q.close()
"""


def test_a_handle_that_only_reads_does_not_lock_the_writer_out(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"a")
    consumer = spawn_python(CONSUMER, str(qpath))
    assert consumer.stdout is not None
    assert consumer.stdin is not None
    try:
        assert consumer.stdout.readline().strip() == "['a']"
        assert litemq._litemq.writer_pid(qpath) is None
        # The producer opens and appends while the consumer's handle is open.
        with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
            app = q.appender()
            assert app.append(b"b") == 1
            app.flush()
            assert litemq._litemq.writer_pid(qpath) == os.getpid()
            consumer.stdin.write("\n")
            consumer.stdin.flush()
            assert consumer.stdout.readline().strip() == "['a', 'b'] 2 2"
    finally:
        _, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, err


def test_two_writers_collide_at_the_first_append_and_are_told_what_to_use(
    qpath: Path,
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as a:
        a.appender().append(b"a")
        a.appender().flush()
        with litemq.Queue(qpath, file_size=SMALL_FILE) as b:
            assert b.get(0).payload == b"a"
            with pytest.raises(litemq.LockedError) as info:
                b.appender()
            assert info.value.pid == os.getpid()
            text = str(info.value)
            assert "read_only=True" in text
            assert "multi_writer=True" in text
            # Still a reader after the refusal.
            a.appender().append(b"b")
            a.appender().flush()
            assert [m.payload for m in b.tailer()] == [b"a", b"b"]


def test_what_a_handle_does_before_its_first_append(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([b"x"] * 10)
    meta = (qpath / "metadata.json").read_bytes()
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    assert q.read_only is False
    assert litemq._litemq.writer_pid(qpath) is None
    assert len(q) == 10
    assert q.next_seq == 10
    # Retention and compaction run as on a read-only handle: no lock.
    assert q.apply_retention().deleted_files == []
    q.compact()
    with q.tailer(name="c") as t:
        assert next(t).seq == 0
        t.commit()
    assert litemq._litemq.writer_pid(qpath) is None
    q.close()
    # Its close wrote nothing: the last writer's clean-shutdown mark stands.
    assert (qpath / "metadata.json").read_bytes() == meta
    # add_index writes: it takes the lock, as an append does.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.add_index("region", "str")
        assert litemq._litemq.writer_pid(qpath) == os.getpid()
    assert litemq._litemq.writer_pid(qpath) is None


def test_queue_is_not_created_in_a_directory_that_holds_other_things(tmp_path: Path) -> None:
    dataset = tmp_path / "out"
    (dataset / "job-1" / "part-00000").mkdir(parents=True)
    (dataset / "_SUCCESS").write_text("")
    with pytest.raises(FileExistsError) as info:
        litemq.Queue(dataset, file_size=SMALL_FILE)
    text = str(info.value)
    assert str(dataset) in text
    assert "_SUCCESS" in text
    assert "job-1" in text
    assert not (dataset / "metadata.json").exists()
    # An empty directory, a new one, and an existing queue still open.
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "new", tmp_path / "empty"):
        with litemq.Queue(path, file_size=SMALL_FILE) as q:
            q.appender().append(b"x")


def test_info_lists_the_queues_of_a_dataset(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    for part, n in (("part-00000", 3), ("part-00001", 2)):
        with litemq.Queue(dataset / "job-1" / part, file_size=SMALL_FILE) as q:
            q.appender().append_batch([b"m"] * n)
    (dataset / "_litemq_dataset").write_text("")
    res = cli("info", str(dataset))
    assert res.returncode == 0, res.stderr
    assert "job-1/part-00000" in res.stdout
    assert "job-1/part-00001" in res.stdout
    res = cli("info", str(dataset), "--format", "json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["messages"] == 5
    assert [(q["name"], q["messages"]) for q in info["queues"]] == [
        ("job-1/part-00000", 3),
        ("job-1/part-00001", 2),
    ]


def _iso(micros: int) -> str:
    stamp = datetime.fromtimestamp(micros // 1_000_000, tz=UTC)
    return stamp.replace(microsecond=micros % 1_000_000).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_info_of_a_queue_whose_oldest_message_was_compacted(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100") as q:
        app = q.appender()
        for i in range(250):
            app.append(f"m{i}".encode(), key="same" if i < 150 else f"k{i}")
        app.flush()
        assert q.compact(grace=0).records_dropped > 0
        with pytest.raises(litemq.CompactedError):
            q.get(0)
        first = next(iter(q.tailer()))
        newest = q.get(q.next_seq - 1)
    res = cli("info", str(qpath), "--format", "json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["first_seq"] == 0
    assert info["first_time"] == _iso(first.timestamp)
    assert info["last_time"] == _iso(newest.timestamp)
    res = cli("info", str(qpath))
    assert res.returncode == 0, res.stderr


KILLED_WRITER = """
import os, signal, sys, litemq
q = litemq.Queue(sys.argv[1], file_size=64 * 1024)
app = q.appender()
for i in range(100):
    app.append(str(i).encode())
app.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_queue_whose_writer_died_is_read_as_is_and_recovered_at_the_first_append(
    qpath: Path,
) -> None:
    killed = spawn_python(KILLED_WRITER, str(qpath))
    killed.communicate(timeout=60)
    assert killed.returncode == -9
    assert json.loads((qpath / "metadata.json").read_text())["clean_shutdown"] is False
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        # Read as a read-only handle reads it: nothing repaired, nothing locked.
        assert [m.payload for m in q.tailer()] == [str(i).encode() for i in range(100)]
        assert litemq._litemq.writer_pid(qpath) is None
        assert json.loads((qpath / "metadata.json").read_text())["writer_pid"] == killed.pid
        # The first append starts the writer: recovery, then the append after the end.
        assert q.appender().append(b"after") == 100
        assert json.loads((qpath / "metadata.json").read_text())["writer_pid"] == os.getpid()
    with litemq.Queue(qpath, read_only=True) as q:
        assert len(q) == 101
        assert q.get(100).payload == b"after"
