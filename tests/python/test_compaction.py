"""Key compaction (`Queue.compact`, `litemq compact`): the latest message of each
key survives in place, dropped sequences are holes every reader steps over,
tombstones go after their grace period, lookups by key stay exact, compaction
waits for retention, and a compaction killed at any point leaves a readable queue."""

from __future__ import annotations

import fcntl
import json
import threading
import time
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, cli, run_python

N = 600
KEYS = 11


def key_of(i: int) -> str | None:
    return None if i % 7 == 3 else f"k{i % KEYS}"


def fill(q: litemq.Queue, n: int = N) -> None:
    app = q.appender()
    for i in range(n):
        k = key_of(i)
        if k is None:
            app.append(f"m{i}".encode())
        else:
            app.append(f"m{i}".encode(), key=k)
    app.flush()


def survivors(active_from: int, n: int = N) -> list[int]:
    latest = {key_of(i): i for i in range(n) if key_of(i) is not None}
    return [i for i in range(n) if key_of(i) is None or i >= active_from or latest[key_of(i)] == i]


@pytest.fixture
def filled(qpath: Path):  # type: ignore[no-untyped-def]
    q = litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100")
    fill(q)
    yield q
    q.close()


def test_compact_keeps_the_latest_message_of_each_key(filled: litemq.Queue) -> None:
    q = filled
    active = q.data_files()[-1].first_seq
    first, nxt, length = q.first_seq, q.next_seq, len(q)
    report = q.compact(grace=0)
    kept = survivors(active)
    assert isinstance(report, litemq.CompactReport)
    assert report.records_dropped == N - len(kept)
    assert report.files_rewritten == len(q.data_files()) - 1
    assert report.bytes_after <= report.bytes_before
    assert report.bytes_reclaimed == report.bytes_before - report.bytes_after
    # Sequences are preserved: the range does not move, the gaps are holes,
    # which are not messages: len counts the messages left.
    assert length == N
    assert (q.first_seq, q.next_seq) == (first, nxt)
    assert len(q) == len(kept)
    assert [m.seq for m in q.tailer()] == kept
    assert all(m.payload == f"m{m.seq}".encode() for m in q.tailer())
    assert [m.seq for m in q.tailer(start="end", direction="backward")] == kept[::-1]
    assert q.read_arrow().column("seq").to_pylist() == kept
    assert q.read_arrow(start=5, end=150).column("seq").to_pylist() == [
        s for s in kept if 5 <= s < 150
    ]
    # get of a hole: CompactedError, a NotFoundError (and an IndexError).
    hole = next(s for s in range(N) if s not in kept)
    with pytest.raises(litemq.CompactedError) as e:
        q.get(hole)
    assert e.value.seq == hole
    assert isinstance(e.value, litemq.NotFoundError)
    with pytest.raises(IndexError):
        q.get(hole)
    assert q.get(kept[0]).payload == f"m{kept[0]}".encode()


def test_find_and_get_latest_are_exact_after_compaction(filled: litemq.Queue) -> None:
    q = filled
    kept = survivors(q.data_files()[-1].first_seq)
    q.compact(grace=0)
    for k in range(KEYS):
        key = f"k{k}"
        want = [s for s in kept if key_of(s) == key]
        assert [m.seq for m in q.find(key)] == want
        latest = q.get_latest(key)
        assert latest is not None
        assert latest.seq == max(i for i in range(N) if key_of(i) == key)


def test_tombstones_stay_for_the_grace_period(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10") as q:
        app = q.appender()
        app.append(b"v1", key="a")
        app.append(b"x1", key="b")
        gone = app.delete("a")
        app.append_batch([b"filler"] * 20)  # the tombstone's file is sealed
        app.flush()
        r = q.compact(grace="1h")
        assert (r.records_dropped, r.tombstones_dropped) == (1, 0)  # v1 only
        assert q.get_latest("a") is None
        assert [m.seq for m in q.find("a")] == [gone]
        assert q.get(gone).tombstone
        with pytest.raises(litemq.CompactedError):
            q.get(0)
        time.sleep(0.01)
        r = q.compact(grace=0.005)
        assert (r.records_dropped, r.tombstones_dropped) == (1, 1)
        assert q.get_latest("a") is None
        assert q.find("a") == []
        with pytest.raises(litemq.CompactedError):
            q.get(gone)
        latest_b = q.get_latest("b")
        assert latest_b is not None
        assert latest_b.payload == b"x1"


def test_named_tailers_and_work_queues_skip_holes(filled: litemq.Queue) -> None:
    q = filled
    kept = survivors(q.data_files()[-1].first_seq)
    q.compact(grace=0)
    with q.tailer(name="c") as c:
        seen = [m.seq for m in c.follow(idle_timeout=0.05)]
        c.commit()
    assert seen == kept
    with q.tailer(name="c") as c:
        assert c.next_seq == N
    # Work queues, plain and by priority: holes are no jobs, and the ring
    # (smaller than the holes) does not stall on them.
    for wq in (q.work_queue("jobs", window=64), q.work_queue("ranked", window=64, priority=True)):
        got = []
        while (job := wq.get(timeout=0.05)) is not None:
            got.append(job.seq)
            wq.ack(job)
        assert sorted(got) == kept


def test_len_stats_lag_and_pending_count_the_messages_left(
    filled: litemq.Queue, qpath: Path
) -> None:
    """Issue 33: holes are not messages. After compaction len(q), Stats.messages, a
    named tailer's lag, a work queue's pending jobs and the CLI's info, consumers and
    wq count what a reader finds (compared with iterating), from this handle and
    from a read-only one."""
    q = filled
    with q.tailer(name="audit") as c:
        for _ in range(N // 3):
            c.read_next()
        c.commit()
    wq = q.work_queue("jobs", window=64)
    for _ in range(10):
        job = wq.get(timeout=0.05)
        assert job is not None
        wq.ack(job)
    assert (len(q), q.stats().messages) == (N, N)
    q.compact(grace=0)
    seqs = [m.seq for m in q.tailer()]
    assert len(seqs) < N
    lag = sum(1 for s in seqs if s >= N // 3)
    pending = sum(1 for s in seqs if s >= 10)
    with litemq.Queue(qpath, read_only=True) as ro:
        for handle in (q, ro):
            assert len(handle) == handle.stats().messages == len(seqs)
            (audit,) = handle.consumers()
            assert audit.lag_messages == lag
            (jobs,) = handle.work_queues()
            assert jobs.pending == pending
    assert wq.stats()["pending"] == pending
    info = json.loads(cli("info", str(qpath), "--format", "json").stdout)
    assert info["messages"] == len(seqs)
    (row,) = [
        json.loads(line)
        for line in cli("consumers", str(qpath), "--format", "json").stdout.splitlines()
    ]
    assert row["lag_messages"] == lag
    (row,) = [
        json.loads(line) for line in cli("wq", str(qpath), "--format", "json").stdout.splitlines()
    ]
    assert row["pending"] == pending


def test_compaction_waits_for_a_retention_pass(filled: litemq.Queue, qpath: Path) -> None:
    done = threading.Event()
    with open(qpath / ".retention.lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # another process's retention pass
        t = threading.Thread(target=lambda: (filled.compact(grace=0), done.set()))
        t.start()
        assert not done.wait(0.3), "compaction ran while retention held the lock"
        fcntl.flock(f, fcntl.LOCK_UN)
    assert done.wait(10)
    t.join()


def kill_compaction_after(qpath: Path, delay: float) -> None:
    """Compacts the queue at ``qpath`` in another process (slowly: 10 ms per
    file), which SIGKILLs itself ``delay`` seconds in."""
    proc = run_python(
        """
        import os, signal, sys, threading, time, litemq
        q = litemq.Queue(sys.argv[1], read_only=True)
        threading.Timer(float(sys.argv[2]), lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        q.compact(grace=0, progress=lambda done, total: time.sleep(0.01))
        time.sleep(5)
        """,
        str(qpath),
        str(delay),
        check=False,
    )
    assert proc.returncode == -9, proc.stderr


def test_a_killed_compaction_leaves_a_readable_queue(qpath: Path) -> None:
    """SIGKILL at random points of a compaction in another process: the
    queue reads as before or as after, file by file, and the next pass
    finishes the work."""
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100") as q:
        fill(q, 3000)
        active = q.data_files()[-1].first_seq
        before = {m.seq: m.payload for m in q.tailer()}
    kept = survivors(active, 3000)
    for delay in (0.0, 0.03, 0.07, 0.15, 0.25):
        kill_compaction_after(qpath, delay)
        with litemq.Queue(qpath, read_only=True) as r:
            now = {m.seq: m.payload for m in r.tailer()}
        # Every message read is the one written; all survivors are there.
        assert all(before[s] == p for s, p in now.items())
        assert set(kept) <= set(now)
    with litemq.Queue(qpath) as q:
        q.compact(grace=0)
        assert [m.seq for m in q.tailer()] == kept
    assert not list(qpath.rglob("*.tmp"))


def test_cli_compact(filled: litemq.Queue, qpath: Path) -> None:
    kept = survivors(filled.data_files()[-1].first_seq)
    proc = cli("compact", str(qpath), "--grace", "0", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["records_dropped"] == N - len(kept)
    assert report["bytes_reclaimed"] == report["bytes_before"] - report["bytes_after"]
    assert [m.seq for m in filled.tailer()] == kept
    proc = cli("compact", str(qpath))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK: 0 of ")
    bad = cli("compact", str(qpath), "--grace", "soon")
    assert bad.returncode == 1
    assert "grace" in bad.stderr


def test_an_archive_of_a_compacted_queue_reads_the_survivors(
    filled: litemq.Queue, tmp_path: Path
) -> None:
    kept = survivors(filled.data_files()[-1].first_seq)
    filled.compact(grace=0)
    filled.appender().roll()  # archive every file
    dest = tmp_path / "archive"
    litemq.archive_queue(filled.path, str(dest))
    archive = litemq.open_archive(str(dest))
    assert archive.read_arrow().column("seq").to_pylist() == kept
    part = archive.read_arrow(start=150, end=420).column("seq").to_pylist()
    assert part == [s for s in kept if 150 <= s < 420]


def test_compact_option_compacts_after_every_roll(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100", compact=True) as q:
        fill(q)
        app = q.appender()
        kept = survivors(N)  # once every file holding the N messages is sealed
        deadline = time.monotonic() + 10
        # Each roll starts a pass unless one still runs: roll until a pass
        # has seen all N messages (the ticks have no key and stay).
        while [m.seq for m in q.tailer() if m.seq < N] != kept:
            assert time.monotonic() < deadline, "no compaction after the rolls"
            app.append(b"tick")
            app.roll()
            time.sleep(0.05)
        s = q.stats()
        assert s.compactions >= 1
        assert s.compaction_errors == 0
    # Without the option nothing is compacted.
    other = qpath.parent / "plain"
    with litemq.Queue(other, file_size=SMALL_FILE, roll="count:100") as q:
        fill(q)
        assert len(list(q.tailer())) == N
        assert q.stats().compactions == 0
    with pytest.raises(litemq.ConfigError):
        litemq.Queue(qpath, compact="soon")


def test_a_job_compacted_while_leased_is_finished_as_gone(qpath: Path) -> None:
    """compact=True and a worker that nacks: background compaction drops the
    message of the job the worker holds; the nacked job is finished as gone
    (not stuck at the mark for ever), every later job is handed out, and
    retention with protect_unconsumed deletes again."""
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:100", compact=True) as q:
        fill(q, 50)  # all in the active file: nothing compacted yet
        wq = q.work_queue("w", window=64)
        job = wq.get(timeout=1)
        assert job is not None
        assert job.seq == 0  # key k0: a later k0 replaces it
        app = q.appender()
        for i in range(50, N):
            app.append(f"m{i}".encode(), key=key_of(i))
        deadline = time.monotonic() + 10
        while True:
            try:
                q.get(0)
            except litemq.CompactedError:
                break
            assert time.monotonic() < deadline, "no compaction after the rolls"
            app.append(b"tick")
            app.roll()
            time.sleep(0.05)
        assert wq.nack(job)
        got = []
        while (j := wq.get(timeout=0.05)) is not None:
            got.append(j.seq)
            assert wq.ack(j)
        assert 0 not in got, "a hole is no job"
        end = q.next_seq
        assert got[-1] == end - 1
        (info,) = q.work_queues()
        assert (info.low, info.cursor) == (end, end)
        assert not wq.ack(job), "a late ack of the hole is harmless"
        report = q.apply_retention(litemq.Retention(max_files=1, protect_unconsumed=True))
        assert report.first_seq > 0, "the mark no longer holds every file"


def test_a_compacted_queue_verifies_and_recovers(filled: litemq.Queue, qpath: Path) -> None:
    kept = survivors(filled.data_files()[-1].first_seq)
    filled.compact(grace=0)
    filled.close()
    proc = cli("verify", str(qpath))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with litemq.Queue(qpath, verify_on_startup=True) as q:  # walks every frame
        assert [m.seq for m in q.tailer()] == kept
        assert q.next_seq == N
        assert q.appender().append(b"more") == N
    proc = cli("get", str(qpath), str(next(s for s in range(N) if s not in kept)))
    assert proc.returncode == 1
    assert "compacted" in proc.stderr
