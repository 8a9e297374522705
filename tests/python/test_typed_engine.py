"""Typed queues through the engine's behaviours (issue 35: "typed and untyped
queues both pass every existing test").

Each test does what an untyped suite does (test_crash, test_errors' damage
tests, test_retention, test_compaction, test_consumers, test_work_queue,
test_archive, test_async, test_multi_writer, test_encryption, test_topics) on
a typed queue, in each way rows are stored: bare rows (``rows``: one
``append`` a frame), stored row batches (``batches``: ``append_batch`` of
events) and compressed row batches (``zbatches``: ``append_batch`` of a
RecordBatch with ``compress_together=True``), in 64 KiB files so rows span
several of them; and checks the typed result (``Message.value``,
``read_arrow`` columns) against what was appended. The events and the
appends are those of the crash harness (crash_writer.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import litemq
from conftest import SMALL_FILE, cli, spawn_python
from crash_writer import TYPED_SHAPES, append_some, event, event_schema, key, typed_options
from test_compaction import kill_compaction_after
from test_crash import SEED, Writer, open_queue
from test_typed import EVERY

SALT = 7
HERE = Path(__file__).parent
SCHEMA = event_schema()
#: Events that fill about three 64 KiB files as bare rows (fewer when compressed).
MANY = 2500


def typed_queue(path: Path, shape: str, **options: Any) -> litemq.Queue:
    """A queue of crash_writer's events that takes `shape`'s appends."""
    options.setdefault("file_size", SMALL_FILE)
    return litemq.Queue(path, **typed_options(shape), **options)


def fill(q: litemq.Queue, shape: str, until: int, salt: int = SALT) -> int:
    """Appends events in `shape` until `until` is reached (a batch may pass
    it); returns the next seq, flushed."""
    app = q.appender()
    seq = q.next_seq
    while seq < until:
        seq = append_some(app, shape, seq, salt)
    app.flush()
    return seq


def ev(seq: int) -> dict[str, Any]:
    """The event appended at `seq` (salt SALT)."""
    return event(seq, SALT)


def events(seqs: Any, salt: int = SALT) -> list[dict[str, Any]]:
    return [event(s, salt) for s in seqs]


def pairs(seqs: Any) -> list[tuple[int, dict[str, Any]]]:
    """(seq, event) of each of `seqs`, as `tailed` returns them."""
    return [(s, ev(s)) for s in seqs]


def tailed(q: litemq.Queue, start: int | str = "start") -> list[tuple[int, Any]]:
    """(seq, value) of every message a tailer reads from `start`."""
    return [(m.seq, m.value) for m in q.tailer(start)]


def arrow_events(q: litemq.Queue, **kw: Any) -> list[dict[str, Any]]:
    """``read_arrow``'s schema columns, as rows."""
    return q.read_arrow(**kw).select(SCHEMA.names).to_pylist()  # type: ignore[no-any-return]


def expect_all(q: litemq.Queue, seqs: list[int], salt: int = SALT) -> None:
    """Every reader returns exactly the events at `seqs`."""
    want = events(seqs, salt)
    assert tailed(q) == pairs(seqs)
    assert q.read_arrow(columns=["seq"]).column("seq").to_pylist() == seqs
    assert arrow_events(q) == want
    assert len(q) == len(seqs)


shapes = pytest.mark.parametrize("shape", TYPED_SHAPES)


# -- kill -9 (test_crash.py) ------------------------------------------------------------


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
@shapes
def test_kill9_during_typed_appends(tmp_path: Path, shape: str) -> None:
    rng = random.Random(f"{SEED}{shape}")
    kills = int(os.environ.get("CRASH_KILLS", "40")) // 4
    for run in range(max(2, kills // 5)):
        mode = rng.choice(["async", "sync", "batch"])
        salt = rng.getrandbits(32)
        path = tmp_path / f"q{run}"
        prev_next = 0
        for rnd in range(5):
            ctx = f"CRASH_SEED={SEED} shape={shape} mode={mode} round={rnd}"
            w = Writer(path, mode, SMALL_FILE, salt, rng.randint(1, 200), shape)
            assert w.ready.wait(30), f"{ctx}: writer never got ready"
            time.sleep(rng.uniform(0, 0.2))
            w.kill()
            with open_queue(path, mode, SMALL_FILE, **typed_options(shape)) as q:
                nxt = q.next_seq
                assert nxt >= w.durable, f"{ctx}: {w.durable} durable, {nxt} recovered"
                assert nxt >= prev_next, f"{ctx}: lost rows closed cleanly before"
                got = tailed(q)
                assert [s for s, _ in got] == list(range(nxt)), f"{ctx}: dense, each once"
                assert [v for _, v in got] == events(range(nxt), salt), ctx
                assert arrow_events(q) == events(range(nxt), salt), f"{ctx}: read_arrow"
                if shape == "rows":
                    for k in range(7):
                        want = [s for s in range(nxt) if key(s) == f"k{k}"]
                        assert [m.seq for m in q.find(f"k{k}")] == want, ctx
                prev_next = nxt
                if rnd == 4:
                    assert append_some(q.appender(), shape, nxt, salt) > nxt
                    q.appender().flush()
                    prev_next = q.next_seq
        with open_queue(path, mode, SMALL_FILE, verify_on_startup=True) as q:
            assert arrow_events(q) == events(range(prev_next), salt)


# -- damage (test_errors.py) ----------------------------------------------------------


def _three_batches(q: litemq.Queue, shape: str) -> tuple[Path, int, int]:
    """Appends row batches of rows 0-9, 10-19, 20-29 into one file; returns
    the file and where the middle batch's frame starts and ends."""
    app = q.appender()
    ends = []
    for start in (0, 10, 20):
        rows = events(range(start, start + 10))
        if shape == "zbatches":
            app.append_batch(
                pa.RecordBatch.from_pylist(rows, schema=SCHEMA), compress_together=True
            )
        else:
            app.append_batch(rows)
        app.flush()
        [f] = q.data_files()
        ends.append(f.bytes_written)
    return Path(f.path), ends[0], ends[1]


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


def _check_damage(q: litemq.Queue, data: Path, lo: int, hi: int, end: int) -> None:
    """Rows 10-19 (one frame at [lo, hi) of `data`) are damaged: every read
    path says so, naming the file, and the tailer steps over them to rows
    20 to `end`."""
    t = q.tailer()
    assert [m.value for m in (t.read_next() for _ in range(10))] == events(range(10))
    with pytest.raises(litemq.CorruptedError) as info:
        t.read_next()
    e = info.value
    assert Path(e.file).name == data.name
    assert (e.offset, e.seq) == (lo, 10)
    for seq in (10, 15, 19):
        with pytest.raises(litemq.CorruptedError) as info:
            q.get(seq)
        assert Path(info.value.file).name == data.name
    with pytest.raises(litemq.CorruptedError) as info:
        q.read_arrow()
    assert Path(info.value.file).name == data.name
    with pytest.raises(litemq.CorruptedError):
        q.where("i", ">=", 0)
    assert q.get(9).value == ev(9)
    assert q.get(20).value == ev(20)
    assert t.skip_damaged()
    assert [(m.seq, m.value) for m in t] == pairs(range(20, end))
    assert t.skip_damaged() is False
    # read_arrow(on_damage="skip") is the untyped read's (refused by design).
    with pytest.raises(ValueError, match="on_damage do not apply"):
        q.read_arrow(on_damage="skip")


@pytest.mark.parametrize("shape", ["batches", "zbatches"])
def test_a_damaged_row_batch_in_the_active_file(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        data, lo, hi = _three_batches(q, shape)
        _flip(data, (lo + hi) // 2)
        _check_damage(q, data, lo, hi, 30)


@pytest.mark.parametrize("shape", ["batches", "zbatches"])
def test_a_damaged_row_batch_in_a_sealed_file(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        data, lo, hi = _three_batches(q, shape)
        q.appender().roll()
        q.appender().append(ev(30))
    _flip(data, (lo + hi) // 2)
    with typed_queue(qpath, shape, read_only=True) as q:
        _check_damage(q, data, lo, hi, 31)


@pytest.mark.parametrize("shape", ["batches", "zbatches"])
def test_a_damaged_row_batch_fails_verify_on_startup(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        data, lo, hi = _three_batches(q, shape)
    _flip(data, (lo + hi) // 2)
    with pytest.raises(litemq.CorruptedError) as info:
        typed_queue(qpath, shape, verify_on_startup=True)
    assert Path(info.value.file).name == data.name
    assert (info.value.offset, info.value.seq) == (lo, 10)


KILLED_WRITER = """
import sys
from pathlib import Path
import litemq
from test_typed_engine import _three_batches, typed_queue
q = typed_queue(Path(sys.argv[1]), sys.argv[2])
data, _, start = _three_batches(q, sys.argv[2])
print(data, start, q.data_files()[-1].bytes_written, flush=True)
sys.stdin.read()  # killed here
"""


@pytest.mark.parametrize("shape", ["batches", "zbatches"])
def test_a_torn_row_batch_at_the_end_is_cut_and_appends_go_on(qpath: Path, shape: str) -> None:
    # A writer killed (its queue not closed) by a machine crash that wrote the
    # first pages of its last row batch, not the rest.
    child = spawn_python(
        f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + KILLED_WRITER, str(qpath), shape
    )
    assert child.stdout is not None
    name, start, end = child.stdout.readline().split()
    child.kill()
    child.communicate()
    data, start, end = Path(name), int(start), int(end)
    raw = bytearray(data.read_bytes())
    half = start + (end - start) // 2
    raw[half:end] = bytes(end - half)
    data.write_bytes(bytes(raw))
    with typed_queue(qpath, shape) as q:
        app = q.appender()  # the writer starts: recovery runs
        report = q.stats().recovery
        assert report.cut_at == start
        assert report.cut_bytes > 0
        assert q.next_seq == 20, "the torn batch is gone whole"
        expect_all(q, list(range(20)))
        assert append_some(app, shape, 20, SALT) > 20
        app.flush()
        expect_all(q, list(range(q.next_seq)))
    with typed_queue(qpath, shape, verify_on_startup=True) as q:
        expect_all(q, list(range(q.next_seq)))


# -- retention (test_retention.py) ----------------------------------------------------


@shapes
def test_retention_by_count_removes_typed_files(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape, roll="count:100") as q:
        end = fill(q, shape, 1000)
        files = q.data_files()
        assert len(files) >= 5
        keep_from = files[-3].first_seq
        report = q.apply_retention(litemq.Retention(max_files=3))
        assert report.first_seq == q.first_seq == keep_from
        assert len(report.deleted_files) == len(files) - 3
        expect_all(q, list(range(keep_from, end)))
        high = [s for s in range(keep_from, end) if (n := ev(s)["n"]) is not None and n >= 450]
        assert high  # seqs 950 to 999 but every fourth (null)
        assert [m.seq for m in q.where("n", ">=", 450)] == high
        assert arrow_events(q, where=("i", "<", keep_from + 5)) == events(
            range(keep_from, keep_from + 5)
        )
        with pytest.raises(litemq.NotFoundError):
            q.get(keep_from - 1)


@shapes
def test_retention_by_age_removes_typed_files(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape, roll="count:100") as q:
        fill(q, shape, 300)
        old = q.data_files()
        time.sleep(1.5)
        q.appender().roll()
        end = fill(q, shape, q.next_seq + 200)
        report = q.apply_retention(litemq.Retention(max_age=timedelta(seconds=1)))
        assert report.deleted_files  # the files written before the sleep, but the last
        assert len(report.deleted_files) >= len(old) - 1
        expect_all(q, list(range(q.first_seq, end)))


@shapes
def test_retention_at_roll_time_removes_typed_files(qpath: Path, shape: str) -> None:
    policy = litemq.Retention(max_files=3)
    with typed_queue(qpath, shape, roll="count:100", retention=policy) as q:
        end = fill(q, shape, 1000)
        deadline = time.monotonic() + 30
        while len(q.data_files()) > 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        files = q.data_files()
        assert len(files) == 3
        assert q.first_seq == files[0].first_seq > 0
        expect_all(q, list(range(q.first_seq, end)))


# -- key compaction (test_compaction.py) ------------------------------------------------


KEYED = 1500


def keyed(seq: int) -> bool:
    """Rows 0-59 of each hundred are keyed single rows, the rest row batches."""
    return seq % 100 < 60


def fill_keyed(q: litemq.Queue, n: int = KEYED) -> None:
    """Keyed rows (``append(event, key=)``: 11 keys) among unkeyed row
    batches of ten, stored and compressed, which compaction keeps."""
    app = q.appender()
    seq = q.next_seq
    while seq < n:
        if keyed(seq):
            assert app.append(ev(seq), key=f"k{seq % 11}") == seq
            seq += 1
        else:
            seq = app.append_batch(
                events(range(seq, seq + 10)), compress_together=seq % 20 == 0
            ).stop
    app.flush()


def survivors(active_from: int, n: int = KEYED) -> list[int]:
    """What compaction keeps of `fill_keyed`'s rows: the latest row of each
    key, every row of a batch, every row of the active file."""
    latest = {s % 11: s for s in range(n) if keyed(s)}
    return [s for s in range(n) if not keyed(s) or s >= active_from or latest[s % 11] == s]


def keyed_queue(path: Path, **options: Any) -> litemq.Queue:
    return typed_queue(path, "rows", roll="count:100", compression="lz4", **options)


def test_compaction_keeps_the_latest_row_of_each_key(qpath: Path) -> None:
    n = KEYED
    with keyed_queue(qpath, indexes={"n": "int"}) as q:
        fill_keyed(q)
        kept = survivors(q.data_files()[-1].first_seq)
        report = q.compact(grace=0)
        assert report.records_dropped == n - len(kept)
        assert (q.first_seq, q.next_seq) == (0, n)
        expect_all(q, kept)
        assert arrow_events(q, start=5, end=800) == events(s for s in kept if 5 <= s < 800)
        assert pa.table(q.tailer()).column("seq").to_pylist() == kept
        # where over compacted files with holes, through an index on "n"
        # (compaction rebuilds the index files of the files it rewrites).
        low = [s for s in kept if (v := ev(s)["n"]) is not None and v < -400]
        assert [m.seq for m in q.where("n", "<", -400)] == low
        assert q.add_index("n") == len(q.data_files()) - 1
        assert {s["state"] for s in q._check_indexes()} == {"ok"}
        assert [m.seq for m in q.where("n", "<", -400)] == low
        # read_arrow(where=) through an index on "i" (= the sequence): only
        # the rows it lists, in kept single rows, batch members and holes.
        q.add_index("i")
        some = [*range(0, n, 37), n - 1]
        assert arrow_events(q, where=("i", "in", some)) == events(s for s in kept if s in some)
        assert arrow_events(q, where=("i", "between", (100, 700))) == events(
            s for s in kept if 100 <= s <= 700
        )
        for k in range(11):
            found = q.find(f"k{k}")
            assert [m.value for m in found] == events(s for s in kept if keyed(s) and s % 11 == k)
            latest = q.get_latest(f"k{k}")
            assert latest is not None
            assert latest.value == ev(max(s for s in range(n) if keyed(s) and s % 11 == k))
        hole = next(s for s in range(n) if s not in kept)
        with pytest.raises(litemq.CompactedError):
            q.get(hole)
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        expect_all(q, kept)


def test_the_compact_option_compacts_typed_files_after_every_roll(qpath: Path) -> None:
    with keyed_queue(qpath, compact=True) as q:
        fill_keyed(q)
        app = q.appender()
        kept = survivors(KEYED)  # once every file holding the rows is sealed
        deadline = time.monotonic() + 10
        while [m.seq for m in q.tailer() if m.seq < KEYED] != kept:
            assert time.monotonic() < deadline, "no compaction after the rolls"
            app.append(ev(q.next_seq))  # no key: stays
            app.roll()
            time.sleep(0.05)
        assert q.stats().compaction_errors == 0
        assert arrow_events(q, end=KEYED) == events(kept)


@pytest.mark.multiprocess
def test_a_killed_compaction_of_typed_files_leaves_a_readable_queue(qpath: Path) -> None:
    with keyed_queue(qpath) as q:
        fill_keyed(q)
        kept = survivors(q.data_files()[-1].first_seq)
    for delay in (0.0, 0.05, 0.15):
        kill_compaction_after(qpath, delay)
        with litemq.Queue(qpath, read_only=True) as r:
            now = tailed(r)
            # Every row read is the one written; all survivors are there.
            assert all(v == ev(s) for s, v in now)
            assert set(kept) <= {s for s, _ in now}
            assert arrow_events(r) == [v for _, v in now]
    with litemq.Queue(qpath) as q:
        q.compact(grace=0)
        expect_all(q, kept)
    assert not list(qpath.rglob("*.tmp"))


def test_an_archive_of_a_compacted_typed_queue_reads_the_survivors(
    qpath: Path, tmp_path: Path
) -> None:
    with keyed_queue(qpath) as q:
        fill_keyed(q)
        q.compact(grace=0)
        q.appender().roll()  # archive every file
        kept = [s for s, _ in tailed(q)]
        rows = {m.seq: m.payload for m in q.tailer()}
        want, want_part = q.read_arrow(), q.read_arrow(start=150, end=420)
    litemq.archive_queue(qpath, str(tmp_path / "archive"))
    a = litemq.open_archive(str(tmp_path / "archive"))
    got = a.read_arrow()
    assert got.column("seq").to_pylist() == kept
    assert got.equals(want)
    part = a.read_arrow(start=150, end=420)
    assert part.column("seq").to_pylist() == [s for s in kept if 150 <= s < 420]
    assert part.equals(want_part)
    raw = a.read_arrow(columns=["seq", "payload"], raw=True)
    assert raw.column("payload").to_pylist() == [rows[s] for s in raw.column("seq").to_pylist()]


# -- consumers and work queues (test_consumers.py, test_work_queue.py) --------------------


@shapes
def test_a_named_tailer_commits_and_resumes_with_values(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        end = fill(q, shape, MANY)
        with q.tailer(name="billing") as t:
            got = [(m.seq, m.value) for m in (t.read_next() for _ in range(1200))]
            assert got == pairs(range(1200))
            t.commit()
            assert t.read_next().seq == 1200  # read, not committed
    with typed_queue(qpath, shape) as q, q.tailer(name="billing") as t:
        assert t.committed_seq == 1200
        assert [(m.seq, m.value) for m in t] == pairs(range(1200, end))


@shapes
def test_a_work_queue_hands_out_typed_jobs(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        end = fill(q, shape, 300)
        a, b = q.work_queue("jobs", visibility_timeout=60), q.work_queue("jobs")
        jobs = [(a if i % 2 else b).get(timeout=1) for i in range(end)]
        assert [j.id for j in jobs if j is not None] == list(range(end))
        assert [j.message.value for j in jobs if j is not None] == events(range(end))
        assert a.get(timeout=0) is None
        first = jobs[0]
        assert first is not None
        assert a.release(first)
        again = b.get(timeout=1)
        assert again is not None
        assert (again.id, again.message.value) == (0, ev(0))
        claimed = a.claim(7, force=True)
        assert claimed is not None
        assert claimed.message.value == ev(7)
        for j in [again, claimed, *jobs[1:]]:
            assert j is not None
            a.ack(j)
        assert a.stats()["low"] == end


@pytest.mark.parametrize("dlq", ["new", "typed", "untyped"])
def test_dead_letters_of_a_typed_queue_replay_as_events(
    qpath: Path, tmp_path: Path, dlq: str
) -> None:
    dlq_path = tmp_path / "dlq"
    if dlq == "typed":
        litemq.Queue(dlq_path, schema=SCHEMA, multi_writer=True).close()
    if dlq == "untyped":  # made before dead-letter queues were typed: stays untyped
        with litemq.Queue(dlq_path, multi_writer=True) as old:
            old.appender().append(b"an older dead letter")
    with typed_queue(qpath, "rows") as q:
        app = q.appender()
        app.append(ev(0), key="k1", headers={"kind": "resize"})
        app.append(ev(1))
        app.flush()
        wq = q.work_queue("dl", max_deliveries=1, dead_letter=str(dlq_path))
        job = wq.get(timeout=1)
        assert job is not None
        assert wq.nack(job)
        fine = wq.get(timeout=1)
        assert fine is not None
        assert wq.ack(fine)
        assert wq.stats()["dead_lettered"] == 1
        row = job.payload
    with litemq.Queue(dlq_path, read_only=True) as d:
        msg = list(d.tailer())[-1]
        assert msg.payload == row
        assert msg.key == "k1"
        assert msg.headers["litemq.dlq.seq"] == "0"
        # A dead-letter queue the work queue creates is typed with the queue's schema.
        assert msg.value == (None if dlq == "untyped" else ev(0))
        assert (d.schema is None) == (dlq == "untyped")
    out = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"dead_letter_seq": msg.seq, "source_seq": 0, "seq": 2}
    with litemq.Queue(qpath) as q:
        m = q.get(2)
        assert (m.value, m.key, m.headers) == (ev(0), "k1", {"kind": "resize"})
    if dlq != "untyped":
        return
    # A dead letter whose job's row is no longer the one it holds: refused, nothing replayed.
    with litemq.Queue(dlq_path) as d:
        d.appender().append(
            b"not the row",
            headers={
                "litemq.dlq.group": "dl",
                "litemq.dlq.queue": str(qpath),
                "litemq.dlq.seq": "1",
            },
        )
    refused = cli("wq", str(qpath), "replay", "dl", "--from", str(dlq_path))
    assert refused.returncode == 1
    assert "dead letter 2" in refused.stderr
    assert "job 1 is no longer there to read its event: nothing replayed" in refused.stderr
    with litemq.Queue(qpath, read_only=True) as q:
        assert q.next_seq == 3


def test_dead_letters_of_an_older_schema_version_go_in_the_current_one(
    qpath: Path, tmp_path: Path
) -> None:
    # A job whose row was written in schema version 1 is dead-lettered after
    # an evolution: the dead-letter queue holds it in the current version.
    v1 = pa.schema([pa.field("n", pa.int32(), nullable=False), pa.field("s", pa.string())])
    v2 = pa.schema(
        [
            pa.field("count", pa.int64(), nullable=False, metadata={b"aliases": b"n"}),
            pa.field("s", pa.string()),
            pa.field("extra", pa.float64()),
        ]
    )
    with litemq.Queue(qpath, schema=v1, file_size=SMALL_FILE) as q:
        q.appender().append({"n": 7, "s": "old"})
        q.appender().flush()
    dlq_path = tmp_path / "dlq"
    with litemq.Queue(qpath, schema=v2, file_size=SMALL_FILE) as q:
        q.appender().append({"count": 8, "s": "new", "extra": 1.5})
        q.appender().flush()
        wq = q.work_queue("dl", max_deliveries=1, dead_letter=str(dlq_path))
        for _ in range(2):
            job = wq.get(timeout=1)
            assert job is not None
            assert wq.nack(job)
        assert wq.get(timeout=0.2) is None  # a get retires what was nacked
        assert wq.stats()["dead_lettered"] == 2
    with litemq.Queue(dlq_path, read_only=True) as d:
        assert d.schema is not None
        assert d.schema.names == ["count", "s", "extra"]
        assert [m.value for m in d] == [
            {"count": 7, "s": "old", "extra": None},
            {"count": 8, "s": "new", "extra": 1.5},
        ]


# -- archives (test_archive.py) ---------------------------------------------------------


@shapes
def test_archive_of_a_typed_queue_reads_back(qpath: Path, tmp_path: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        fill(q, shape, MANY)
        q.appender().roll()
        q.appender().append(ev(10**6))  # every file sealed but this one
        q.appender().flush()
        end = q.data_files()[-1].first_seq
        rows = {m.seq: m.payload for m in q.tailer() if m.seq < end}
        want = q.read_arrow(end=end)
        want_part = q.read_arrow(start=1001, end=1013, columns=["seq", "text"])
    dest = tmp_path / "archive"
    r = cli("archive", str(qpath), str(dest), "--json")
    assert r.returncode == 0, r.stderr
    a = litemq.open_archive(str(dest))
    assert (a.first_seq, a.end_seq) == (0, end)
    # Typed columns, as the queue's own read_arrow gives them.
    got = a.read_arrow()
    got.validate(full=True)
    assert got.equals(want)
    assert got.column("seq").to_pylist() == list(range(end))
    # A range inside a file (dense index, ranged read; it may start inside a row batch).
    part = a.read_arrow(start=1001, end=1013, columns=["seq", "text"])
    assert part.equals(want_part)
    # raw=True: the rows' bytes as stored, untyped.
    raw = a.read_arrow(columns=["seq", "payload"], raw=True)
    assert raw.column("payload").to_pylist() == [rows[s] for s in range(end)]
    # Restored (test_restore.py), it is the typed queue again and appends go on.
    restored = tmp_path / "restored"
    assert litemq.restore(dest, restored).next_seq == end
    with litemq.Queue(restored) as q:
        assert q.schema is not None
        assert q.schema.names == SCHEMA.names
        expect_all(q, list(range(end)))
        assert append_some(q.appender(), shape, end, SALT) > end


# -- asyncio, seek_time, get, arrow_reader (test_async.py, test_api.py) -------------------


@pytest.mark.asyncio
@shapes
async def test_an_async_tailer_awaits_typed_rows(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        t = q.tailer()
        app = q.appender()

        async def append_later() -> None:
            await asyncio.sleep(0.05)
            append_some(app, shape, 0, SALT)
            app.flush()

        writer = asyncio.create_task(append_later())
        msg = await asyncio.wait_for(t.read_next_async(), 10)
        await writer
        assert msg is not None
        assert (msg.seq, msg.value) == (0, ev(0))
        end = fill(q, shape, 500)
        got = [(m.seq, m.value) async for m in t.follow_async(idle_timeout=0.2)]
        assert got == pairs(range(1, end))


@shapes
def test_seek_time_get_and_arrow_reader(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        start = fill(q, shape, 1000)
        time.sleep(0.01)
        middle = datetime.now(UTC)
        time.sleep(0.01)
        end = fill(q, shape, MANY)
        assert q.seq_for_time(middle) == start
        t = q.tailer()
        t.seek_time(middle)
        first = t.read_next()
        assert (first.seq, first.value) == (start, ev(start))
        t.seek(start - 1)
        assert t.read_next().value == ev(start - 1)
        for seq in (0, 1, 999, 1000, 1777, end - 1):
            assert q.get(seq).value == ev(seq)
        assert arrow_events(q, start_time=middle) == events(range(start, end))
        sizes = [b.num_rows for b in q.arrow_reader(batch_size=700)]
        assert sizes == [700] * (end // 700) + ([end % 700] if end % 700 else [])
        rows = pa.Table.from_batches(list(q.arrow_reader(batch_size=700, columns=SCHEMA.names)))
        assert rows.to_pylist() == events(range(end))
        back = [m.seq for m in q.tailer("end", direction="backward")]
        assert back == list(range(end - 1, -1, -1))


@shapes
def test_a_tailer_exports_typed_arrow(qpath: Path, shape: str) -> None:
    # test_arrow_interop's tailer export: a typed queue's stream has its typed columns.
    with typed_queue(qpath, shape) as q:
        end = fill(q, shape, 600)
        with q.tailer(5) as t:
            table = pa.table(t)
            assert table.schema.names == ["seq", "timestamp", *SCHEMA.names]
            assert table.schema.field("n").type == pa.int32()
            assert table.column("seq").to_pylist() == list(range(5, end))
            assert table.select(SCHEMA.names).to_pylist() == events(range(5, end))
            assert t.next_seq == end  # reading the stream moved the tailer past it
            assert pa.table(t).num_rows == 0
            more = fill(q, shape, end + 300)
            # Small batches cut row batches: each row once, in order.
            reader = litemq.arrow.tailer_reader(t, batch_size=7, columns=["text", "seq"])
            batches = list(reader)
            assert max(b.num_rows for b in batches) == 7
            got = pa.Table.from_batches(batches)
            assert got.schema.names == ["text", "seq"]
            assert got.column("seq").to_pylist() == list(range(end, more))
            assert got.column("text").to_pylist() == [ev(s)["text"] for s in range(end, more)]
            assert t.read_next() is None
        with q.tailer(topic="orders") as t, pytest.raises(TypeError, match="arrow_reader"):
            pa.table(t)
        with pytest.raises(ValueError, match="payload"):
            litemq.arrow.tailer_reader(q.tailer(), columns=["payload"])


# -- several writer processes (test_multi_writer.py) ------------------------------------

TYPED_WRITER = """
import sys, json, litemq
from crash_writer import event
path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seqs = []
with litemq.Queue(path, multi_writer=True) as q:
    app = q.appender()
    i = 0
    while i < n:
        if i % 3 == 0:
            seqs.append(app.append(event(i, w), key=f"k{w}-{i}"))
            i += 1
        else:
            m = min(40, n - i)
            rows = [event(j, w) for j in range(i, i + m)]
            seqs.extend(app.append_batch(rows, compress_together=i % 2 == 0))
            i += m
    app.flush()
print(json.dumps(seqs), flush=True)
"""


@pytest.mark.multiprocess
def test_two_writer_processes_append_typed_rows(qpath: Path) -> None:
    n = 2000
    typed_queue(qpath, "zbatches", multi_writer=True).close()
    code = f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + TYPED_WRITER
    procs = [spawn_python(code, str(qpath), str(w), str(n)) for w in range(2)]
    returned = {}
    for w, p in enumerate(procs):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        returned[w] = json.loads(out)
    assert sorted(s for seqs in returned.values() for s in seqs) == list(range(2 * n))
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        by_seq = {s: event(i, w) for w, seqs in returned.items() for i, s in enumerate(seqs)}
        assert returned[0] == sorted(returned[0])
        assert tailed(q) == [(s, by_seq[s]) for s in range(2 * n)]
        assert arrow_events(q) == [by_seq[s] for s in range(2 * n)]
        for w in (0, 1):
            for i in (0, 81, 162):  # single appends (i % 3 == 0 between batches of 40)
                assert [m.value for m in q.find(f"k{w}-{i}")] == [event(i, w)]


FLOOD = """
import sys, litemq, pyarrow as pa
from crash_writer import event, event_schema
with litemq.Queue(sys.argv[1], multi_writer=True) as q:
    app = q.appender()
    print("ready", flush=True)
    i = 0
    while True:
        rows = [event(j, 9) for j in range(i, i + 500)]
        app.append_batch(pa.RecordBatch.from_pylist(rows, schema=event_schema()), compress_together=True)
        i += 500
"""


@pytest.mark.multiprocess
def test_a_writer_killed_mid_row_batch_does_not_block_the_others(qpath: Path) -> None:
    q = typed_queue(qpath, "zbatches", multi_writer=True)
    app = q.appender()
    mine = 0
    for _ in range(3):
        flood = spawn_python(f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + FLOOD, str(qpath))
        assert flood.stdout is not None
        assert flood.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        flood.kill()
        flood.communicate(timeout=30)
        started = time.monotonic()
        for _ in range(20):
            app.append(event(mine, 0))
            mine += 1
        assert time.monotonic() - started < 2.0
    app.flush()
    q.close()
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        got = [v for _, v in tailed(q)]
        assert [v for v in got if v["salt"] == 0] == [event(i, 0) for i in range(mine)]
        assert all(v == event(v["i"], 9) for v in got if v["salt"] != 0)
        assert arrow_events(q) == got


# -- encryption (test_encryption.py) ----------------------------------------------------

KEY = bytes(range(32))


def test_an_encrypted_typed_queue_reads_back_and_refuses_row_batches(qpath: Path) -> None:
    with typed_queue(qpath, "rows", encryption_key=KEY, compression="zstd") as q:
        end = fill(q, "rows", 600)
        end = fill(q, "batches", end + 600)  # each row a sealed record of its own
        with pytest.raises(
            ValueError, match=r"compress_together is not available on an encrypted queue"
        ):
            append_some(q.appender(), "zbatches", end, SALT)
        assert q.next_seq == end  # nothing stored
        expect_all(q, list(range(end)))
        assert q.get(611).value == ev(611)
        assert [m.seq for m in q.where("n", "=", -499)] == [
            s for s in range(end) if ev(s)["n"] == -499
        ]
    texts = [ev(s)["text"] for s in range(end)]
    raw = b"".join(p.read_bytes() for p in qpath.rglob("*.data"))
    assert not any(t.encode() in raw for t in texts if len(t) > 16)
    with pytest.raises(litemq.EncryptionError, match="encryption_key"):
        litemq.Queue(qpath, read_only=True)  # no key
    with litemq.Queue(qpath, encryption_key=KEY) as q:
        assert arrow_events(q) == events(range(end))
        q.appender().roll()
        want, want_part = q.read_arrow(end=end), q.read_arrow(start=611, end=620)
    # Archived, read back whole and by ranges with the key (test_restore's encrypted archive).
    litemq.archive_queue(qpath, qpath.parent / "archive", encryption_key=KEY)
    a = litemq.open_archive(qpath.parent / "archive", encryption_key=KEY)
    assert a.read_arrow().equals(want)
    assert a.read_arrow(start=611, end=620).equals(want_part)
    assert arrow_events(a) == events(range(end))


# -- topics (test_topics.py) -----------------------------------------------------------


@shapes
def test_typed_rows_with_topics(qpath: Path, shape: str) -> None:
    with typed_queue(qpath, shape) as q:
        app = q.appender()
        app.append(ev(0), topic="orders")
        end = fill(q, shape, 100)
        app.append(ev(end), topic="orders", tags=["paid"])
        app.append(ev(end + 1), topic="audit")
        app.flush()
        t = q.tailer(topic="orders")
        assert [(m.seq, m.value) for m in t] == [(0, ev(0)), (end, ev(end))]
        assert [(m.seq, m.value) for m in q.tailer(tags=["paid"])] == [(end, ev(end))]
        assert {(i.topic, i.count) for i in q.topics()} >= {("orders", 2), ("audit", 1)}
        # read_arrow of a typed queue has no topic column to filter by: refused, saying so.
        with pytest.raises(ValueError, match="topic do not apply"):
            q.read_arrow(topic="orders")
        assert arrow_events(q, where=("i", "in", [0, end])) == [ev(0), ev(end)]


# -- the CLI (test_cli.py, test_console.py) ---------------------------------------------

FULL = {
    "flag": True,
    "small": -7,
    "big": 2**64 - 1,
    "ratio": 0.5,
    "at": datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    "day": date(2026, 12, 2),
    "amount": Decimal("-1234567890.12"),
    "name": "héllo",
    "blob": b"\x00\xff",
}
FULL_JSON = {
    "flag": True,
    "small": -7,
    "big": 2**64 - 1,
    "ratio": 0.5,
    "at": "1969-12-31T23:59:59.999999+00:00",
    "day": "2026-12-02",
    "amount": "-1234567890.12",
    "name": "héllo",
    "blob": {"base64": "AP8="},
}


def _every_type(path: Path) -> None:
    with litemq.Queue(path, schema=EVERY, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append(FULL, key="k")
        app.append_batch([dict.fromkeys(FULL), {**FULL, "small": 9, "name": "b"}])


def test_cli_prints_the_events_of_a_typed_queue(qpath: Path) -> None:
    _every_type(qpath)
    text = cli("dump", str(qpath)).stdout.splitlines()
    assert len(text) == 3
    assert text[0].endswith(json.dumps(FULL_JSON, ensure_ascii=False))
    assert "key='k'" in text[0]
    assert text[1].endswith(json.dumps(dict.fromkeys(FULL)))
    records = [
        json.loads(line) for line in cli("dump", str(qpath), "--format", "json").stdout.splitlines()
    ]
    assert [r["value"] for r in records] == [
        FULL_JSON,
        dict.fromkeys(FULL),
        {**FULL_JSON, "small": 9, "name": "b"},
    ]
    got = json.loads(cli("get", str(qpath), "2", "--format", "json").stdout)
    assert got["value"]["small"] == 9
    assert json.loads(cli("find", str(qpath), "k", "--format", "json").stdout)["value"] == FULL_JSON
    assert (
        cli("tail", "-n", "1", str(qpath))
        .stdout.strip()
        .endswith('"name": "b", "blob": {"base64": "AP8="}}')
    )
    # An untyped queue's records have no value.
    with litemq.Queue(qpath.parent / "plain") as q:
        q.appender().append(b"bytes")
    assert "value" not in json.loads(
        cli("dump", str(qpath.parent / "plain"), "--format", "json").stdout
    )


def test_cli_where_on_a_schema_field(qpath: Path) -> None:
    _every_type(qpath)

    def seqs(*args: str) -> list[int]:
        proc = cli("where", str(qpath), *args)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line)["seq"] for line in proc.stdout.splitlines()]

    assert seqs("small", "=", "-7") == [0]
    assert seqs("small", ">", "-7") == [2]
    assert seqs("name", "in", "héllo", "b") == [0, 2]
    assert seqs("at", "<", "1970-01-01T00:00:00+00:00") == [0, 2]
    assert seqs("day", "=", "2026-12-02") == [0, 2]
    assert seqs("amount", "<", "0") == [0, 2]
    assert seqs("flag", "=", "true") == [0, 2]
    assert seqs("small", "between", "0", "10") == [2]
    text = cli("where", str(qpath), "small", "=", "9", "--format", "text").stdout
    assert '"name": "b"' in text
    bad = cli("where", str(qpath), "small", "=", "ten")
    assert bad.returncode == 1
    assert 'field "small" (int16)' in bad.stderr
    nope = cli("where", str(qpath), "nope", "=", "1")
    assert nope.returncode == 1
    assert '"nope" is not a field of the queue\'s schema (flag, small' in nope.stderr
    # An index on a schema field, from the shell: its type is the field's.
    with litemq.Queue(qpath) as q:
        q.appender().roll()
    added = cli("index", "add", str(qpath), "name")
    assert added.returncode == 0, added.stderr
    assert "index 'name' (str): 1 sealed files indexed" in added.stdout
    assert cli("index", "list", str(qpath)).stdout == "name\tstr\t1 ok\n"
    assert seqs("name", "in", "héllo", "b") == [0, 2]
    wrong = cli("index", "add", str(qpath), "small", "--type", "str")
    assert wrong.returncode == 1
    assert 'the schema field "small" (int16) is indexed as "int"' in wrong.stderr


def test_cli_append_takes_events_and_copies_a_typed_dump(qpath: Path, tmp_path: Path) -> None:
    _every_type(qpath)
    copy = tmp_path / "copy"
    litemq.Queue(copy, schema=EVERY).close()
    dump = cli("dump", str(qpath), "--format", "json").stdout
    proc = subprocess.run(
        [sys.executable, "-m", "litemq", "append", str(copy), "--input", "json"],
        input=dump,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = '{"name": "x", "blob": "abc", "amount": "1.5"}\n{"small": "no"}\n'
    proc = subprocess.run(
        [sys.executable, "-m", "litemq", "append", str(copy)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert 'line 2: schema: field "small" (int16): expected an int' in proc.stderr
    assert "1 message appended before it (sequences 3..4)" in proc.stderr
    with litemq.Queue(copy) as q:
        assert [m.value for m in q] == [
            FULL,
            dict.fromkeys(FULL),
            {**FULL, "small": 9, "name": "b"},
            {**dict.fromkeys(FULL), "name": "x", "blob": b"abc", "amount": Decimal("1.50")},
        ]
        assert q.get(0).key == "k"
    raw = subprocess.run(
        [sys.executable, "-m", "litemq", "append", str(copy), "--input", "raw"],
        input="bytes",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert raw.returncode == 1
    assert "a typed queue stores events, not bytes" in raw.stderr
