"""Work queues: competing consumers with acks, redelivery and a dead-letter
queue (``Queue.work_queue``), checked against a model, across threads and
across processes killed with SIGKILL."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import litemq
from conftest import SMALL_FILE, cli, run_python, spawn_python


def fill(q: litemq.Queue, n: int, prefix: str = "job") -> None:
    app = q.appender()
    app.append_batch([f"{prefix} {i}".encode() for i in range(n)])
    app.flush()


def test_each_job_goes_to_one_handle_and_acks_in_any_order_move_the_mark(
    queue: litemq.Queue,
) -> None:
    fill(queue, 10)
    a = queue.work_queue("thumbs")
    b = queue.work_queue("thumbs")
    jobs = [(a if i % 2 else b).get(timeout=1) for i in range(10)]
    assert all(j is not None for j in jobs)
    got = [j.id for j in jobs if j is not None]
    assert got == list(range(10)), "first handouts come in sequence order, each once"
    assert a.get(timeout=0) is None
    assert b.get(timeout=0) is None
    first = jobs[0]
    assert first is not None
    assert (first.deliveries, first.seq, first.payload, first.group) == (1, 0, b"job 0", "thumbs")
    assert first.message.payload == b"job 0"
    # Acks out of order: the mark stays at the first unacked job.
    for j in reversed(jobs[1:]):
        assert j is not None
        assert b.ack(j) is True
    s = a.stats()
    assert (s["low"], s["cursor"], s["in_flight"], s["acked"], s["pending"]) == (0, 10, 1, 9, 0)
    assert a.ack(first) is True
    assert a.ack(first) is False, "a second ack of the same handout changes nothing"
    s = a.stats()
    assert (s["low"], s["in_flight"], s["acked"], s["oldest_age"]) == (10, 0, 10, None)


def test_another_group_sees_every_job_again(queue: litemq.Queue) -> None:
    fill(queue, 3)
    one, two = queue.work_queue("one"), queue.work_queue("two")
    assert [one.get(timeout=1).id for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    assert [two.get(timeout=1).id for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]


def test_an_unacked_job_comes_back_after_the_visibility_timeout(queue: litemq.Queue) -> None:
    fill(queue, 1)
    wq = queue.work_queue("slow", visibility_timeout=0.3)
    job = wq.get(timeout=1)
    assert job is not None
    assert job.deliveries == 1
    assert wq.get(timeout=0.1) is None, "leased: not handed out again before its deadline"
    again = wq.get(timeout=2)
    assert again is not None
    assert (again.id, again.deliveries) == (0, 2)
    assert wq.ack(job) is False, "the first handout lost its lease"
    assert wq.ack(again) is True
    assert wq.stats()["redelivered"] == 1


def test_extend_keeps_a_long_job_leased(queue: litemq.Queue) -> None:
    fill(queue, 1)
    wq = queue.work_queue("long", visibility_timeout=0.3)
    job = wq.get(timeout=1)
    assert job is not None
    for _ in range(4):
        time.sleep(0.15)
        assert wq.extend(job) is True
    assert wq.get(timeout=0) is None
    assert wq.ack(job) is True


def test_nack_hands_a_job_out_again_after_its_delay(queue: litemq.Queue) -> None:
    fill(queue, 2)
    wq = queue.work_queue("retry", visibility_timeout=60)
    job = wq.get(timeout=1)
    assert job is not None
    assert wq.nack(job, delay=0.3) is True
    nxt = wq.get(timeout=0.1)
    assert nxt is not None
    assert nxt.id == 1, "a delayed job waits; the next one does not"
    assert wq.get(timeout=0.05) is None
    again = wq.get(timeout=2)
    assert again is not None
    assert (again.id, again.deliveries) == (0, 2)
    assert wq.nack(again) is True
    third = wq.get(timeout=1)
    assert third is not None
    assert (third.id, third.deliveries) == (0, 3)
    with pytest.raises(ValueError, match="delay"):
        wq.nack(third, delay=-1)


def test_past_max_deliveries_a_job_goes_to_the_dead_letter_queue(
    queue: litemq.Queue, tmp_path: Path
) -> None:
    app = queue.appender()
    app.append(b"poison", key="k1", headers={"kind": "resize"})
    app.append(b"fine")
    app.flush()
    dlq_path = tmp_path / "dlq"
    wq = queue.work_queue("dl", visibility_timeout=60, max_deliveries=2, dead_letter=str(dlq_path))
    for attempt in (1, 2):
        job = wq.get(timeout=1)
        assert job is not None
        assert (job.id, job.deliveries) == (0, attempt)
        assert wq.nack(job)
    fine = wq.get(timeout=1)
    assert fine is not None
    assert fine.id == 1, "the poison job is dead-lettered, not handed out"
    assert wq.ack(fine)
    assert wq.get(timeout=0.1) is None
    s = wq.stats()
    assert (s["dead_lettered"], s["acked"], s["low"]) == (1, 1, 2)
    with litemq.Queue(dlq_path, read_only=True) as dlq:
        [msg] = list(dlq.tailer())
    assert msg.payload == b"poison"
    assert msg.key == "k1"
    h = msg.headers
    assert h["kind"] == "resize"
    assert h["litemq.dlq.reason"] == "max_deliveries"
    assert h["litemq.dlq.seq"] == "0"
    assert h["litemq.dlq.group"] == "dl"
    assert h["litemq.dlq.deliveries"] == "2"


def test_a_dead_letter_queue_can_be_an_open_queue(queue: litemq.Queue, tmp_path: Path) -> None:
    fill(queue, 1)
    with litemq.Queue(tmp_path / "dlq", file_size=SMALL_FILE) as dlq:
        wq = queue.work_queue("dl", max_deliveries=1, dead_letter=dlq)
        job = wq.get(timeout=1)
        assert job is not None
        assert wq.nack(job)
        assert wq.get(timeout=0.1) is None
        dlq.tailer()  # readable while open
        assert [m.headers["litemq.dlq.seq"] for m in dlq.tailer()] == ["0"]


def test_without_a_dead_letter_queue_a_job_is_dropped_and_counted(queue: litemq.Queue) -> None:
    fill(queue, 1)
    wq = queue.work_queue("drop", max_deliveries=1)
    job = wq.get(timeout=1)
    assert job is not None
    assert wq.nack(job)
    assert wq.get(timeout=0.1) is None
    assert (wq.stats()["dead_lettered"], wq.stats()["low"]) == (1, 1)


def test_a_full_window_waits_for_the_job_at_the_mark(queue: litemq.Queue) -> None:
    fill(queue, 40)
    wq = queue.work_queue("ring", window=16)
    jobs = [wq.get(timeout=1) for _ in range(16)]
    assert [j.id for j in jobs if j] == list(range(16))
    assert wq.get(timeout=0.1) is None, "16 slots: job 16 waits"
    assert wq.ack(jobs[5])  # type: ignore[arg-type]
    assert wq.get(timeout=0.1) is None, "an ack above the mark frees no slot"
    got: list[litemq.Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(wq.get(timeout=5)))
    waiter.start()
    time.sleep(0.1)
    assert wq.ack(jobs[0])  # type: ignore[arg-type]
    waiter.join()
    assert got[0] is not None
    assert got[0].id == 16, "the ack at the mark wakes the waiter"


def test_get_waits_for_a_writer_in_another_process_without_holding_the_gil(
    qpath: Path,
) -> None:
    litemq.Queue(qpath, file_size=SMALL_FILE).close()
    with litemq.Queue(qpath, read_only=True) as q:
        wq = q.work_queue("w")
        ticks = []
        stop = threading.Event()

        def tick() -> None:
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.01)

        t = threading.Thread(target=tick)
        t.start()
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import litemq, sys, time; time.sleep(0.5); "
                "q = litemq.Queue(sys.argv[1]); q.appender().append(b'late'); q.close()",
                str(qpath),
            ]
        )
        job = wq.get(timeout=20)
        stop.set()
        t.join()
        writer.wait(timeout=30)
        assert job is not None
        assert job.payload == b"late"
        assert len(ticks) >= 10, "the GIL was released while get() waited"


def test_options_are_checked(queue: litemq.Queue, qpath: Path) -> None:
    for kwargs, match in [
        ({"visibility_timeout": 0}, "visibility_timeout"),
        ({"visibility_timeout": -1}, "visibility_timeout"),
        ({"max_deliveries": 0}, "max_deliveries"),
        ({"max_deliveries": 256}, "max_deliveries"),
        ({"window": 1000}, "window"),
    ]:
        with pytest.raises((ValueError, litemq.LiteMQError), match=match):
            queue.work_queue("x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises((ValueError, litemq.LiteMQError), match="name"):
        queue.work_queue("a/b")
    with pytest.raises(TypeError):
        queue.work_queue("x", dead_letter=42)  # type: ignore[arg-type]
    wq, other = queue.work_queue("x"), queue.work_queue("y")
    fill(queue, 1)
    job = other.get(timeout=1)
    assert job is not None
    with pytest.raises(ValueError, match='handed out by work queue "y"'):
        wq.ack(job)
    with litemq.Queue(qpath.parent / "other", file_size=SMALL_FILE) as other_queue:
        fill(other_queue, 1)
        namesake = other_queue.work_queue("y")
        with pytest.raises(ValueError, match="handed out by work queue"):
            namesake.ack(job)


def _metadata(path: Path) -> dict[str, object]:
    return json.loads((path / "metadata.json").read_text())


def _set_metadata(path: Path, **changes: object) -> None:
    meta = _metadata(path)
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    (path / "metadata.json").write_text(json.dumps(meta))


def test_a_queue_has_a_random_id_kept_for_good(tmp_path: Path) -> None:
    """Issue 30, item 8: ``queue_id`` in metadata.json, 32 lowercase hex
    digits, random at creation, kept by every later open (and when a restore
    wrote it before the first open); an older queue gets one at its next
    writer open (an encrypted one keeps its encryption id)."""
    a, b = tmp_path / "a", tmp_path / "b"
    with litemq.Queue(a, file_size=SMALL_FILE) as qa, litemq.Queue(b, file_size=SMALL_FILE) as qb:
        ida, idb = qa.queue_id, qb.queue_id
    assert ida is not None
    assert idb is not None
    assert len(ida) == 32
    assert set(ida) <= set("0123456789abcdef")
    assert ida != idb
    assert _metadata(a)["queue_id"] == ida
    with litemq.Queue(a) as q:
        assert q.queue_id == ida
    with litemq.Queue(a, read_only=True) as q:
        assert q.queue_id == ida
    # A restore writes the id of the queue it restores before the first open.
    restored = "0123456789abcdef0123456789abcdef"
    _set_metadata(b, queue_id=restored)
    with litemq.Queue(b) as q:
        assert q.queue_id == restored
    assert _metadata(b)["queue_id"] == restored
    # A queue written before queue ids: read-only handles know none, the
    # next writer draws one and keeps it.
    _set_metadata(a, queue_id=None)
    with litemq.Queue(a, read_only=True) as q:
        assert q.queue_id is None
    with litemq.Queue(a) as q:
        q.appender()  # the writer starts at the first write (issue 33)
        new = q.queue_id
    assert new is not None
    assert new != ida
    with litemq.Queue(a) as q:
        assert q.queue_id == new
    # An encrypted queue's id is the one its records are sealed with.
    key = bytes(range(32))
    sealed = tmp_path / "sealed"
    with litemq.Queue(sealed, file_size=SMALL_FILE, encryption_key=key) as q:
        sealed_id = q.queue_id
    enc = _metadata(sealed)["encryption"]
    assert isinstance(enc, dict)
    assert sealed_id == enc["queue_id"]
    _set_metadata(sealed, queue_id=None)
    with litemq.Queue(sealed, encryption_key=key, read_only=True) as q:
        assert q.queue_id == sealed_id
    with litemq.Queue(sealed, encryption_key=key) as q:
        q.appender()  # the writer starts at the first write (issue 33)
        assert q.queue_id == sealed_id
    assert _metadata(sealed)["queue_id"] == sealed_id
    _set_metadata(b, queue_id="NOT-HEX")
    with pytest.raises(litemq.CorruptedError, match="queue_id"):
        litemq.Queue(b)


def test_a_job_of_a_queue_deleted_and_created_again_at_its_path_is_refused(
    tmp_path: Path,
) -> None:
    """Issue 30, item 8: a job carries its queue's id and its group's, not a
    path: the queue at that path (or the group of that name) may be another
    one by the time the job is acked."""
    qpath = tmp_path / "q"
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 2)
        old = q.work_queue("y").get(timeout=1)
    assert old is not None
    shutil.rmtree(qpath)
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 2)
        wq = q.work_queue("y")
        mine = wq.get(timeout=1)
        assert mine is not None
        assert (mine.id, mine.deliveries) == (old.id, old.deliveries)
        with pytest.raises(ValueError, match="handed out by work queue"):
            wq.ack(old)
        with pytest.raises(ValueError, match="handed out by work queue"):
            wq.nack(old)
        with pytest.raises(ValueError, match="handed out by work queue"):
            wq.extend(old)
        assert wq.stats()["in_flight"] == 1, "this queue's job 0 is still leased"
        # The group removed and created again: another group.
        wq.close()
        assert q.remove_work_queue("y")
        again = q.work_queue("y")
        job = again.get(timeout=1)
        assert job is not None
        assert (job.id, job.deliveries) == (mine.id, 1)
        with pytest.raises(ValueError, match="handed out by work queue"):
            again.ack(mine)
        # The same queue through another path (a symlink): the same queue.
        link = tmp_path / "link"
        link.symlink_to(qpath)
        with litemq.Queue(link, read_only=True) as via_link:
            assert via_link.queue_id == q.queue_id
            assert via_link.work_queue("y").ack(job) is True


def test_state_persists_across_handles_and_the_group_is_listed(
    qpath: Path,
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 5)
        wq = q.work_queue("persist", start=2)
        job = wq.get(timeout=1)
        assert job is not None
        assert job.id == 2, "a new group starts where asked"
        assert wq.ack(job)
        assert repr(wq) == f'<litemq.WorkQueue "persist" of {str(qpath)!r}>'.replace("'", '"')
        wq.close()
        assert repr(wq).endswith("(closed)>")
        with pytest.raises(litemq.ClosedError):
            wq.get(timeout=0)
    with litemq.Queue(qpath, read_only=True) as q:
        [info] = q.work_queues()
        assert (info.name, info.low, info.cursor, info.acked, info.pending) == (
            "persist",
            3,
            3,
            1,
            2,
        )
        assert info.oldest_age is not None
        assert info.oldest_age >= 0
        job = q.work_queue("persist", start=0).get(timeout=1)
        assert job is not None
        assert job.id == 3, "an existing group keeps its mark"
        assert q.remove_work_queue("persist") is True
        assert q.work_queues() == []


def test_cli_prints_the_stats(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 4)
        wq = q.work_queue("thumbs")
        wq.ack(wq.get(timeout=1))  # type: ignore[arg-type]
        wq.get(timeout=1)
    out = cli("wq", str(qpath), "stats", "thumbs", "--format", "json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert (rec["name"], rec["pending"], rec["in_flight"], rec["acked"]) == ("thumbs", 2, 1, 1)
    text = cli("wq", str(qpath), "stats")
    assert text.returncode == 0
    assert "thumbs" in text.stdout
    assert "IN_FLIGHT" in text.stdout
    missing = cli("wq", str(qpath), "stats", "nope")
    assert missing.returncode != 0
    assert "no work queue named 'nope'" in missing.stderr


def test_marks_past_the_queues_end_move_back_to_it(tmp_path: Path) -> None:
    """A machine crash lost the data's tail but kept the state file's header
    page: the group's marks are past the queue's end. Opening the group moves
    them back, says so (``rewound``), and the messages written since are
    handed out instead of being skipped."""
    before, after = tmp_path / "before", tmp_path / "after"
    with litemq.Queue(before, file_size=SMALL_FILE) as q:
        fill(q, 8)
        with q.work_queue("w") as wq:
            for _ in range(8):
                assert wq.ack(wq.get(timeout=1))  # type: ignore[arg-type]
    with litemq.Queue(after, file_size=SMALL_FILE) as q:
        fill(q, 3)
        shutil.copytree(before / "workqueues", after / "workqueues")
        with q.work_queue("w") as wq:
            fill(q, 2, prefix="after the crash")
            got = []
            while (job := wq.get(timeout=0.05)) is not None:
                got.append((job.seq, job.payload))
                assert wq.ack(job)
            assert got == [(3, b"after the crash 0"), (4, b"after the crash 1")]
            assert wq.stats()["rewound"] == 5
        (info,) = q.work_queues()
        assert (info.low, info.cursor, info.rewound) == (5, 5, 5)


def test_retention_keeps_what_a_work_queue_has_not_finished(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10") as q:
        fill(q, 35)
        wq = q.work_queue("keep")
        jobs = [wq.get(timeout=1) for _ in range(15)]
        for j in jobs[1:]:
            assert j is not None
            assert wq.ack(j)
        report = q.apply_retention(litemq.Retention(max_files=1, protect_unconsumed=True))
        assert report.first_seq == 0, "job 0 is unfinished: its file stays"
        assert wq.ack(jobs[0])  # type: ignore[arg-type]
        report = q.apply_retention(litemq.Retention(max_files=1, protect_unconsumed=True))
        assert report.first_seq == 10, "the mark is at 15: only the file before it goes"


# ---- a model: the rules a work queue keeps, step by step ----


class WorkQueueMachine(RuleBasedStateMachine):
    """Two handles on one group, against a model of leases, nacks and acks.

    Leases are long (no real-time expiry here); `nack` redelivers. Checked:
    first handouts in sequence order, redeliveries only of nacked jobs with
    the right count, stale acks refused, dead-lettering at max_deliveries,
    and the figures after every step."""

    MAX = 3

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="litemq-wq-"))
        self.q = litemq.Queue(self.dir / "q", file_size=SMALL_FILE, roll="count:16")
        self.app = self.q.appender()
        self.handles = [
            self.q.work_queue("m", visibility_timeout=600, max_deliveries=self.MAX, window=16)
            for _ in range(2)
        ]
        self.appended = 0
        self.next_new = 0
        self.deliveries: dict[int, int] = {}
        self.leased: dict[int, litemq.Job] = {}
        self.ready: set[int] = set()  # nacked, delay 0
        self.stale: list[litemq.Job] = []
        self.acked: set[int] = set()
        self.dead: set[int] = set()

    def teardown(self) -> None:
        for h in self.handles:
            h.close()
        self.q.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def low(self) -> int:
        low = 0
        while low in self.acked or low in self.dead:
            low += 1
        return low

    @rule(n=st.integers(1, 6))
    def append(self, n: int) -> None:
        self.app.append_batch([f"m{self.appended + i}".encode() for i in range(n)])
        self.app.flush()
        self.appended += n

    @rule(which=st.integers(0, 1))
    def get(self, which: int) -> None:
        room = self.next_new < min(self.appended, self.low() + 16)
        expect_any = room or bool(self.ready)
        job = self.handles[which].get(timeout=0.5 if expect_any else 0)
        if job is None:
            assert not expect_any, f"nothing handed out, model has {self.ready} ready, room={room}"
            return
        if job.deliveries == 1:
            assert job.id == self.next_new, "first handouts come in sequence order"
            self.next_new += 1
        else:
            assert job.id in self.ready, f"job {job.id} redelivered without a nack"
            self.ready.discard(job.id)
        self.deliveries[job.id] = self.deliveries.get(job.id, 0) + 1
        assert job.deliveries == self.deliveries[job.id]
        assert job.payload == f"m{job.id}".encode()
        self.leased[job.id] = job

    @precondition(lambda self: self.leased)
    @rule(data=st.data(), which=st.integers(0, 1))
    def ack(self, data: st.DataObject, which: int) -> None:
        seq = data.draw(st.sampled_from(sorted(self.leased)))
        job = self.leased.pop(seq)
        assert self.handles[which].ack(job) is True
        self.acked.add(seq)
        self.stale.append(job)

    @precondition(lambda self: self.leased)
    @rule(data=st.data(), which=st.integers(0, 1))
    def nack(self, data: st.DataObject, which: int) -> None:
        seq = data.draw(st.sampled_from(sorted(self.leased)))
        job = self.leased.pop(seq)
        assert self.handles[which].nack(job) is True
        self.stale.append(job)
        if self.deliveries[seq] >= self.MAX:
            self.dead.add(seq)  # dead-lettered at its next look
        else:
            self.ready.add(seq)

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def stale_ack(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.stale))
        assert self.handles[0].ack(job) is False
        assert self.handles[1].nack(job) is False

    @invariant()
    def figures(self) -> None:
        s = self.handles[0].stats()
        assert s["acked"] == len(self.acked)
        assert s["in_flight"] == len(self.leased)
        assert s["cursor"] == self.next_new
        # Dead letters are counted when a get() looks at them.
        assert s["dead_lettered"] <= len(self.dead)
        assert s["low"] <= self.low()
        if s["dead_lettered"] == len(self.dead):
            assert s["low"] == self.low()


TestWorkQueueModel = WorkQueueMachine.TestCase


@settings(max_examples=15)
@given(
    plan=st.lists(st.sampled_from(["ack", "nack", "drop"]), min_size=1, max_size=60),
    threads=st.integers(2, 4),
)
def test_threads_sharing_a_group_finish_every_job_once(plan: list[str], threads: int) -> None:
    """Each job's fate on its first handout is drawn (ack, nack, or drop:
    let the lease run out); later handouts ack. Threads on two handles race.
    At the end every job is acked exactly once, none twice."""
    d = Path(tempfile.mkdtemp(prefix="litemq-wq-threads-"))
    try:
        with litemq.Queue(d / "q", file_size=SMALL_FILE) as q:
            fill(q, len(plan))
            handles = [q.work_queue("t", visibility_timeout=0.2) for _ in range(2)]
            acks: Counter[int] = Counter()
            lock = threading.Lock()
            errors: list[BaseException] = []

            def work(h: litemq.WorkQueue) -> None:
                try:
                    while True:
                        with lock:
                            if sum(acks.values()) >= len(plan):
                                return
                        job = h.get(timeout=0.05)
                        if job is None:
                            continue
                        fate = plan[job.id] if job.deliveries == 1 else "ack"
                        if fate == "ack" and h.ack(job):
                            with lock:
                                acks[job.id] += 1
                        elif fate == "nack":
                            h.nack(job)
                except BaseException as e:  # reported by the main thread
                    errors.append(e)

            workers = [
                threading.Thread(target=work, args=(handles[i % 2],)) for i in range(threads)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join(timeout=60)
            assert not errors, errors
            assert all(not w.is_alive() for w in workers)
            assert acks == Counter(range(len(plan))), "every job acked exactly once"
            s = handles[0].stats()
            assert (s["low"], s["acked"], s["in_flight"], s["pending"]) == (len(plan),) * 2 + (
                0,
                0,
            )
            assert s["redelivered"] == plan.count("nack") + plan.count("drop")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- processes ----

WORKER = textwrap.dedent(
    """
    import os, sys, time, litemq
    path, log, pace = sys.argv[1], sys.argv[2], float(sys.argv[3])
    q = litemq.Queue(path, read_only=True)
    wq = q.work_queue("jobs", visibility_timeout=float(sys.argv[4]), max_deliveries=255)
    with open(log, "a", buffering=1) as out:
        print("ready", flush=True)
        while True:
            job = wq.get(timeout=0.1)
            if job is None:
                if wq.stats()["low"] >= int(sys.argv[5]):
                    break
                continue
            out.write(f"try {job.id} {job.deliveries}\\n")
            if pace:
                time.sleep(pace)
            if wq.ack(job):
                out.write(f"ok {job.id} {job.deliveries}\\n")
    """
)


def spawn_worker(
    qpath: Path, log: Path, pace: float, vis: float, total: int
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(qpath), str(log), str(pace), str(vis), str(total)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_workers_killed_with_sigkill_lose_no_job_and_ack_none_twice(
    qpath: Path, tmp_path: Path
) -> None:
    """20,000 jobs, 3 worker processes, one SIGKILLed every 0.2 s and
    replaced. Visibility timeout 60 s: jobs of killed workers come back
    because their process is gone, not because the lease ran out.
    (benches/wq_kill.py runs the same with 1,000,000 jobs.)"""
    total = 20_000
    with litemq.Queue(qpath, file_size="16MiB") as q:
        fill(q, total)
    logs = tmp_path / "logs"
    logs.mkdir()
    workers: list[subprocess.Popen[str]] = []
    n = 0

    def start() -> None:
        nonlocal n
        w = spawn_worker(qpath, logs / f"w{n}.log", 0.0002, 60.0, total)
        n += 1
        assert w.stdout is not None
        assert w.stdout.readline().strip() == "ready"
        workers.append(w)

    for _ in range(3):
        start()
    kills = 0
    deadline = time.monotonic() + 240
    try:
        while any(w.poll() is None for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
            live = [w for w in workers if w.poll() is None]
            with litemq.Queue(qpath, read_only=True) as q:
                done = q.work_queues()[0].low >= total
            if live and kills < 25 and not done:
                live[kills % len(live)].send_signal(signal.SIGKILL)
                live[kills % len(live)].wait()
                kills += 1
                start()
        for w in workers:
            w.wait(timeout=60)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
            if w.stdout is not None:
                w.stdout.close()
    assert kills >= 3, "the run was too short to kill anyone"
    oks: Counter[int] = Counter()
    tried: set[int] = set()
    for log in logs.iterdir():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue  # a line cut by the kill
            if parts[0] == "ok":
                oks[int(parts[1])] += 1
            else:
                tried.add(int(parts[1]))
    assert max(oks.values()) == 1, "no job acked twice"
    # A worker killed after its ack but before logging it leaves a "try" only.
    assert set(oks) | tried == set(range(total))
    with litemq.Queue(qpath, read_only=True) as q:
        [info] = q.work_queues()
    assert (info.low, info.cursor, info.in_flight, info.pending, info.dead_lettered) == (
        total,
        total,
        0,
        0,
        0,
    ), "every job finished, by an ack (nothing dead-lettered or lost)"
    assert info.redelivered >= 1


def test_a_dead_workers_job_comes_back_within_the_visibility_timeout(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 1)
        vis = 3.0
        grab = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import litemq, sys, time\n"
                "q = litemq.Queue(sys.argv[1], read_only=True)\n"
                "job = q.work_queue('jobs', visibility_timeout=3).get(timeout=10)\n"
                "print(job.id, flush=True)\n"
                "time.sleep(60)\n",
                str(qpath),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert grab.stdout is not None
            assert grab.stdout.readline().strip() == "0"
            wq = q.work_queue("jobs", visibility_timeout=vis)
            assert wq.get(timeout=0.1) is None, "leased to a live process"
            killed = time.monotonic()
            os.kill(grab.pid, signal.SIGKILL)
            grab.wait()
            job = wq.get(timeout=vis + 1)
            elapsed = time.monotonic() - killed
        finally:
            if grab.poll() is None:
                grab.kill()
                grab.wait()
            if grab.stdout is not None:
                grab.stdout.close()
        assert job is not None
        assert (job.id, job.deliveries) == (0, 2)
        assert elapsed < vis, f"found by the owner's death, not the deadline ({elapsed:.2f} s)"


def _can_unshare() -> bool:
    try:
        return (
            subprocess.run(
                ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"],
                capture_output=True,
                timeout=30,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _can_unshare(), reason="needs unprivileged pid namespaces (unshare)")
def test_a_worker_in_another_pid_namespace_keeps_its_lease(qpath: Path) -> None:
    """Issue 30, item 10: a worker in another pid namespace (two containers
    sharing a volume) holds its job until the visibility deadline: its pid
    means nothing here, so it is not taken for dead."""
    vis = 2.0
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 1)
        wq = q.work_queue("jobs", visibility_timeout=vis)
        grab = subprocess.Popen(
            [
                "unshare",
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                sys.executable,
                "-c",
                "import litemq, os, sys, time\n"
                "q = litemq.Queue(sys.argv[1], read_only=True)\n"
                "job = q.work_queue('jobs', visibility_timeout=float(sys.argv[2])).get(timeout=10)\n"
                "print(job.id, os.getpid(), flush=True)\n"
                "time.sleep(60)\n",
                str(qpath),
                str(vis),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert grab.stdout is not None
            job_id, pid = grab.stdout.readline().split()
            assert job_id == "0"
            assert int(pid) != grab.pid, "the worker runs in a pid namespace of its own"
            leased = time.monotonic()
            assert wq.get(timeout=0.5) is None, "leased to a live worker elsewhere"
            job = wq.get(timeout=vis + 5)
            waited = time.monotonic() - leased
        finally:
            grab.kill()
            grab.wait()
            if grab.stdout is not None:
                grab.stdout.close()
        assert job is not None
        assert (job.id, job.deliveries) == (0, 2), "back at the visibility deadline"
        assert waited >= 0.5


def test_an_idle_get_sleeps_instead_of_spinning(qpath: Path) -> None:
    litemq.Queue(qpath, file_size=SMALL_FILE).close()
    out = run_python(
        """
        import os, sys, litemq
        q = litemq.Queue(sys.argv[1], read_only=True)
        wq = q.work_queue("idle")
        before = os.times()
        assert wq.get(timeout=2) is None
        after = os.times()
        print(after.user - before.user + after.system - before.system)
        """,
        str(qpath),
    )
    cpu = float(out.stdout.strip())
    assert cpu < 0.5, f"an idle get used {cpu:.2f} s of CPU in 2 s"


def test_closing_the_queue_ends_a_blocked_get(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    wq = q.work_queue("c")
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            wq.get(timeout=20)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    q.close()
    t.join(timeout=10)
    assert not t.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], litemq.ClosedError)
    with pytest.raises(litemq.ClosedError):
        wq.get(timeout=0)


def test_jobs_retention_removed_before_a_handout_are_skipped_and_counted(
    qpath: Path,
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10") as q:
        wq = q.work_queue("late")  # created at 0, before anything is written
        fill(q, 35)
        report = q.apply_retention(litemq.Retention(max_files=2))
        assert report.first_seq == 20
        job = wq.get(timeout=1)
        assert job is not None
        assert job.id == 20, "the removed jobs are skipped"
        assert wq.ack(job)
        s = wq.stats()
        assert (s["gone"], s["low"], s["acked"]) == (20, 21, 1)


def test_ctrl_c_interrupts_a_blocked_get(qpath: Path) -> None:
    litemq.Queue(qpath, file_size=SMALL_FILE).close()
    proc = spawn_python(
        """
        import sys, litemq
        q = litemq.Queue(sys.argv[1], read_only=True)
        wq = q.work_queue("ctrl-c")
        try:
            print("waiting", flush=True)
            wq.get()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
        """,
        str(qpath),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "interrupted", err
    assert proc.returncode == 3


def test_a_forked_child_gets_forked_error_and_can_open_the_group_again(qpath: Path) -> None:
    out = run_python(
        """
        import os, sys, litemq
        q = litemq.Queue(sys.argv[1], file_size=64 * 1024)
        q.appender().append_batch([b"a", b"b"])
        q.appender().flush()
        wq = q.work_queue("fork")
        job = wq.get(timeout=1)
        pid = os.fork()
        if pid == 0:
            try:
                wq.get(timeout=0)
                print("no error", flush=True)
            except litemq.ForkedError:
                again = litemq.Queue(sys.argv[1], read_only=True).work_queue("fork")
                print("child got", again.get(timeout=5).id, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent acks", wq.ack(job), flush=True)
        """,
        str(qpath),
    )
    assert out.stdout.splitlines() == ["child got 1", "parent acks True"]


# ---- priority and expiry (record fields of format 6) ----


def test_a_priority_group_serves_higher_priorities_first(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i, p in enumerate([0, 3, None, 3, 9, 1]):
        app.append(f"job {i}".encode(), priority=p)
    app.flush()
    plain = queue.work_queue("fifo")
    ranked = queue.work_queue("ranked", priority=True)
    assert [plain.get(timeout=1).id for _ in range(6)] == [0, 1, 2, 3, 4, 5]  # type: ignore[union-attr]
    order = []
    while (job := ranked.get(timeout=0.1)) is not None:
        order.append((job.id, job.message.priority))
        assert ranked.ack(job)
    assert order == [(4, 9), (1, 3), (3, 3), (5, 1), (0, 0), (2, 0)]


def test_max_wait_bounds_how_long_a_low_priority_job_waits(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append(b"old and low", priority=0)
    time.sleep(0.3)
    app.append(b"new and high", priority=7)
    app.flush()
    patient = queue.work_queue("patient", priority=True, max_wait=0.2)
    assert patient.get(timeout=1).payload == b"old and low"  # type: ignore[union-attr]
    strict = queue.work_queue("strict", priority=True, max_wait=math.inf)
    assert strict.get(timeout=1).payload == b"new and high"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="max_wait"):
        queue.work_queue("bad", priority=True, max_wait=-1)


def test_expired_jobs_are_counted_not_handed_out(queue: litemq.Queue, tmp_path: Path) -> None:
    app = queue.appender()
    app.append(b"stale", ttl=0.05)
    app.append(b"fresh", ttl=3600)
    app.append(b"forever")
    app.flush()
    time.sleep(0.1)
    wq = queue.work_queue("ttl", dead_letter=str(tmp_path / "dlq"), dead_letter_expired=True)
    got = [wq.get(timeout=1) for _ in range(2)]
    assert [j.payload for j in got if j] == [b"fresh", b"forever"]
    assert wq.get(timeout=0.1) is None
    s = wq.stats()
    assert (s["expired"], s["dead_lettered"], s["low"]) == (1, 0, 1)
    with litemq.Queue(tmp_path / "dlq", read_only=True) as dlq:
        [msg] = list(dlq.tailer())
    assert msg.payload == b"stale"
    assert msg.headers["litemq.dlq.reason"] == "expired"
    assert msg.expires_at is None, "a dead letter does not expire again"
    quiet = queue.work_queue("ttl-quiet")
    assert quiet.get(timeout=1).payload == b"fresh"  # type: ignore[union-attr]
    assert quiet.stats()["expired"] == 1


def test_a_tailer_can_skip_expired_messages(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append(b"a")
    app.append(b"stale", ttl=0.05)
    app.append(b"b", ttl=3600)
    app.flush()
    time.sleep(0.1)
    assert [m.payload for m in queue.tailer()] == [b"a", b"stale", b"b"]
    assert [m.payload for m in queue.tailer(skip_expired=True)] == [b"a", b"b"]
    with queue.tailer(name="fresh-only", skip_expired=True) as named:
        assert [m.seq for m in named] == [0, 2]


def test_get_async_waits_for_a_publish_and_finds_redeliveries(queue: litemq.Queue) -> None:
    wq = queue.work_queue("aio", visibility_timeout=0.2)
    app = queue.appender()

    async def scenario() -> list[tuple[int, int]]:
        waiting = asyncio.create_task(wq.get_async(timeout=10))
        await asyncio.sleep(0.05)
        assert not waiting.done(), "nothing published yet"
        app.append(b"late")
        first = await waiting
        assert first is not None
        # Not acked: it comes back once its lease runs out, with no publish.
        again = await wq.get_async(timeout=5)
        assert again is not None
        assert await wq.get_async(timeout=0.05) is None
        # A cancelled wait takes no job.
        cancelled = asyncio.create_task(wq.get_async(timeout=10))
        await asyncio.sleep(0.02)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        app.append(b"after")
        after = await wq.get_async(timeout=5)
        assert after is not None
        return [(j.id, j.deliveries) for j in (first, again, after)]

    assert asyncio.run(scenario()) == [(0, 1), (0, 2), (1, 1)]


def test_closing_the_handle_ends_an_async_get(queue: litemq.Queue) -> None:
    wq = queue.work_queue("aio-close")

    async def scenario() -> None:
        waiting = asyncio.create_task(wq.get_async())
        await asyncio.sleep(0.05)
        wq.close()
        with pytest.raises(litemq.ClosedError):
            await waiting

    asyncio.run(scenario())


def _grab_and_exit(qpath: Path, group: str) -> int:
    """A worker process that takes one job of `group` and exits without
    acking it; returns its pid."""
    out = run_python(
        "import litemq, os, sys\n"
        "q = litemq.Queue(sys.argv[1], read_only=True)\n"
        "job = q.work_queue(sys.argv[2], visibility_timeout=600).get(timeout=10)\n"
        "print(job.id, os.getpid(), flush=True)\n"
        "os._exit(0)\n",
        str(qpath),
        group,
    )
    seq, pid = out.stdout.split()
    assert seq == "0"
    return int(pid)


def test_pending_shows_each_job_in_flight_its_holder_and_deliveries(qpath: Path) -> None:
    """Issue 33: jobs in flight can be inspected (Redis's XPENDING), from
    Python and from the CLI, with the holding process and its deadline."""
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 4)
        wq = q.work_queue("thumbs", visibility_timeout=600)
    dead_pid = _grab_and_exit(qpath, "thumbs")
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        wq = q.work_queue("thumbs", visibility_timeout=600)
        [dead] = wq.pending()
        assert (dead["seq"], dead["state"], dead["deliveries"]) == (0, "leased", 1)
        assert (dead["pid"], dead["alive"], dead["overdue"]) == (dead_pid, False, False)
        text = cli("wq", str(qpath), "pending", "thumbs")
        assert text.returncode == 0, text.stderr
        assert text.stdout.split("\n")[0].split()[:5] == [
            "SEQ",
            "STATE",
            "DELIVERIES",
            "PID",
            "ALIVE",
        ]
        assert text.stdout.split("\n")[1].split()[:5] == ["0", "leased", "1", str(dead_pid), "no"]
        mine = wq.get(timeout=1)
        nacked = wq.get(timeout=1)
        assert mine is not None
        assert nacked is not None
        assert (mine.id, mine.deliveries, nacked.id) == (0, 2, 1), "the dead worker's job first"
        assert wq.nack(nacked, delay=300)
        before = datetime.now(UTC)
        p = wq.pending()
        assert [(j["seq"], j["state"], j["deliveries"]) for j in p] == [
            (0, "leased", 2),
            (1, "delayed", 1),
        ], "jobs 2 and 3, never handed out, are not listed"
        assert (p[0]["pid"], p[0]["alive"]) == (os.getpid(), True)
        assert (p[1]["pid"], p[1]["alive"]) == (None, None)
        assert before + timedelta(seconds=500) < p[0]["deadline"] <= before + timedelta(seconds=601)
        assert before + timedelta(seconds=200) < p[1]["deadline"] <= before + timedelta(seconds=301)
        assert not any(j["overdue"] for j in p)
        assert [j["seq"] for j in wq.pending(limit=1)] == [0]
        out = cli("wq", str(qpath), "pending", "thumbs", "--format", "json")
        assert out.returncode == 0, out.stderr
        recs = [json.loads(line) for line in out.stdout.splitlines()]
        assert [(r["seq"], r["state"], r["pid"], r["alive"], r["deliveries"]) for r in recs] == [
            (0, "leased", os.getpid(), True, 2),
            (1, "delayed", None, None, 1),
        ]
        missing = cli("wq", str(qpath), "pending", "nope")
        assert missing.returncode != 0
        assert "no work queue named 'nope'" in missing.stderr


def test_claim_takes_a_job_over_and_release_gives_it_back(qpath: Path) -> None:
    """Issue 33: claim (Redis's XCLAIM) takes over a dead worker's job at
    once, and a slow live worker's only with force; release hands a job back
    at once; the former holder's ack is refused either way."""
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 3)
        q.work_queue("jobs", visibility_timeout=600)
    _grab_and_exit(qpath, "jobs")
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        a = q.work_queue("jobs", visibility_timeout=600)
        b = q.work_queue("jobs", visibility_timeout=600)
        taken = b.claim(0)
        assert taken is not None, "its holder died: claimed at once, no timeout waited"
        assert (taken.id, taken.deliveries, taken.payload) == (0, 2, b"job 0")
        slow = a.get(timeout=1)
        assert slow is not None
        assert slow.id == 1
        assert b.claim(1) is None, "a live worker's lease is kept without force"
        assert b.claim(2) is None, "never handed out: get's to hand out, not claim's"
        stolen = b.claim(1, force=True)
        assert stolen is not None
        assert (stolen.id, stolen.deliveries) == (1, 2)
        assert a.ack(slow) is False, "the slow worker lost its lease"
        assert a.extend(slow) is False
        assert b.release(stolen) is True
        assert b.ack(stolen) is False, "released: no longer this handout's"
        again = a.get(timeout=1)
        assert again is not None
        assert (again.id, again.deliveries) == (1, 3), "released jobs come first, deliveries kept"
        assert a.release(1) is True, "a sequence works too"
        assert a.release(1) is False, "nothing to release: it waits already"
        assert b.ack(taken) is True
        assert b.claim(0, force=True) is None, "finished jobs are never claimed"
        with pytest.raises(TypeError):
            a.release("1")  # type: ignore[arg-type]
        s = a.stats()
        assert (s["in_flight"], s["acked"]) == (0, 1)


def test_cli_replays_dead_letters_into_the_source_queue_once(qpath: Path, tmp_path: Path) -> None:
    """Issue 33: ``litemq wq PATH replay NAME --from DLQ`` appends the group's
    dead-lettered jobs back to the queue (as new messages, without the
    ``litemq.dlq.*`` headers), and remembers how far it went."""
    dlq_path = tmp_path / "dlq"
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append(b"poison", key="k1", headers={"kind": "resize"}, topic="img", priority=3)
        app.append(b"fine")
        app.flush()
        wq = q.work_queue("dl", max_deliveries=1, dead_letter=str(dlq_path))
        other = q.work_queue("other", max_deliveries=1, dead_letter=str(dlq_path))
        for w in (wq, other):
            job = w.get(timeout=1)
            assert job is not None
            assert job.id == 0
            assert w.nack(job)
        fine = wq.get(timeout=1)
        assert fine is not None
        assert fine.id == 1
        assert wq.ack(fine)
        assert wq.get(timeout=0.1) is None
        assert other.get(timeout=1) is not None
    out = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {"dead_letter_seq": 0, "source_seq": 0, "seq": 2}
    ], "only group dl's dead letter"
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        m = q.get(2)
        assert (m.payload, m.key, m.topic, m.priority) == (b"poison", "k1", "img", 3)
        assert m.headers == {"kind": "resize"}
        wq = q.work_queue("dl", max_deliveries=1, dead_letter=str(dlq_path))
        job = wq.get(timeout=1)
        assert job is not None
        assert (job.id, job.deliveries) == (2, 1), "a new job, handed out afresh"
    again = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path))
    assert again.returncode == 0, again.stderr
    assert "replayed 0 jobs" in again.stdout
    with litemq.Queue(qpath, read_only=True) as q:
        assert q.next_seq == 3, "replayed once"
    # A dead letter recorded for another path is not replayed silently.
    with litemq.Queue(dlq_path, multi_writer=True) as dlq:
        dlq.appender().append(
            b"moved", headers={"litemq.dlq.group": "dl", "litemq.dlq.queue": "elsewhere"}
        )
    refused = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path))
    assert refused.returncode != 0
    assert "'elsewhere'" in refused.stderr
    assert "--any-queue" in refused.stderr
    forced = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path), "--any-queue")
    assert forced.returncode == 0, forced.stderr
    assert "replayed 1 jobs" in forced.stdout
    with litemq.Queue(qpath, read_only=True) as q:
        assert q.get(3).payload == b"moved"
    missing = cli("wq", str(tmp_path / "nothing"), "replay", "dl", "--from", str(dlq_path))
    assert missing.returncode != 0
    assert not (tmp_path / "nothing").exists(), "no queue created by a replay"


def test_ordered_by_key_holds_one_job_per_key_in_flight(queue: litemq.Queue) -> None:
    """Issue 33: ``ordered_by="key"`` hands a key's jobs out one at a time in
    sequence order (SQS FIFO message groups); other keys and jobs without a
    key go on meanwhile."""
    app = queue.appender()
    for i, key in enumerate(["cust-1", "cust-2", "cust-1", None, "cust-1"]):
        app.append(f"job {i}".encode(), key)
    app.flush()
    plain = queue.work_queue("plain")
    got = [plain.get(timeout=1) for _ in range(3)]
    assert [j.id for j in got if j is not None] == [0, 1, 2], "without ordering: in parallel"
    a = queue.work_queue("fifo", ordered_by="key")
    b = queue.work_queue("fifo", ordered_by="key")
    first = [a.get(timeout=0), b.get(timeout=0), a.get(timeout=0)]
    assert [j.id for j in first if j is not None] == [0, 1, 3]
    assert b.get(timeout=0) is None, "cust-1's next waits for job 0"
    job0 = first[0]
    assert job0 is not None
    assert a.nack(job0)
    again = b.get(timeout=1)
    assert again is not None
    assert (again.id, again.deliveries) == (0, 2), "a nacked job keeps its key's place"
    assert b.ack(again)
    nxt = a.get(timeout=1)
    assert nxt is not None
    assert nxt.id == 2
    assert b.get(timeout=0) is None, "job 4 waits for job 2"
    assert a.ack(nxt)
    last = b.get(timeout=1)
    assert last is not None
    assert last.id == 4
    with pytest.raises(ValueError, match="ordered_by"):
        queue.work_queue("x", ordered_by="topic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        queue.work_queue("x", ordered_by="key", priority=True)


def test_ordered_workers_in_several_processes_never_overlap_a_key(qpath: Path) -> None:
    """Issue 33: three worker processes on one group ordered by key; each
    logs "start" after a get and "end" before its ack to one O_APPEND file (a
    total order of events). A key's jobs never overlap and come in sequence
    order; jobs without a key are handed out too; every job is acked once."""
    keys = [f"k{i % 2}" if i % 7 else None for i in range(150)]
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        for i, k in enumerate(keys):
            app.append(f"job {i}".encode(), k)
        app.flush()
        q.work_queue("fifo", ordered_by="key")
    log = qpath.parent / "events.log"
    worker = """
        import os, sys, time, litemq
        q = litemq.Queue(sys.argv[1], read_only=True)
        wq = q.work_queue("fifo", ordered_by="key", visibility_timeout=600)
        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        print("ready", flush=True)
        sys.stdin.readline()  # all start together
        while (job := wq.get(timeout=2)) is not None:
            os.write(fd, f"start {job.id}\\n".encode())
            time.sleep(0.002)  # the work: other workers run meanwhile
            os.write(fd, f"end {job.id}\\n".encode())
            assert wq.ack(job)
    """
    procs = [spawn_python(worker, str(qpath), str(log)) for _ in range(3)]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    events = [line.split() for line in log.read_text().splitlines()]
    assert sorted(int(s) for e, s in events if e == "start") == list(range(len(keys)))
    running: dict[str, int] = {}
    last: dict[str, int] = {}
    for event, s in events:
        seq = int(s)
        key = keys[seq]
        if key is None:
            continue
        if event == "start":
            assert key not in running, f"{seq} started while {running.get(key)} of {key} ran"
            assert last.get(key, -1) < seq, f"{key}: {seq} after {last.get(key)}"
            running[key] = seq
            last[key] = seq
        else:
            assert running.pop(key) == seq
