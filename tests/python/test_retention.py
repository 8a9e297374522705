"""Retention (`litemq.Retention`, `Queue.apply_retention`, `litemq retain`), reading
what retention removed, `Queue.data_files()` and the `litemq consumers` command."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import litemq
from conftest import SMALL_FILE, cli


def fill(q: litemq.Queue, n: int) -> None:
    app = q.appender()
    app.append_batch([f"m{i}".encode() for i in range(n)])
    app.flush()  # appends are handed to the I/O thread: wait until written


@pytest.fixture
def tens(qpath: Path) -> Iterator[litemq.Queue]:
    """100 messages in ten files of ten (the last one is being written)."""
    q = litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10")
    try:
        fill(q, 100)
        assert [f.first_seq for f in q.data_files()] == list(range(0, 100, 10))
        yield q
    finally:
        q.close()


def test_data_files(tens: litemq.Queue) -> None:
    files = tens.data_files()
    assert [f.file_number for f in files] == list(range(1, 11))
    assert [(f.first_seq, f.end_seq) for f in files] == [(i, i + 10) for i in range(0, 100, 10)]
    for i, f in enumerate(files):
        assert {field.name for field in dataclasses.fields(f)} == {
            "path",
            "file_number",
            "first_seq",
            "end_seq",
            "created",
            "size",
            "bytes_written",
            "bytes_allocated",
            "index_bytes_allocated",
        }
        st = Path(f.path).stat()
        assert f.size == SMALL_FILE
        # Header and ten frames written; the disk holds about that (sealed
        # files are trimmed to their data and footer, the last one gives
        # back what is allocated past its data at close).
        assert 4096 + 10 * 24 <= f.bytes_written < 4096 + 10 * 200
        assert f.bytes_allocated == st.st_blocks * 512
        # Its sparse index (.index) and dense index (.offsets, format 5).
        indexes = [Path(f.path).with_suffix(s) for s in (".index", ".offsets")]
        assert all(p.exists() for p in indexes)
        assert f.index_bytes_allocated == sum(p.stat().st_blocks * 512 for p in indexes)
        if i < len(files) - 1:
            assert st.st_size < SMALL_FILE  # sealed: trimmed
            assert f.bytes_allocated <= st.st_size
        assert f.created.tzinfo is not None
        assert f.created <= datetime.now(UTC)
    assert files == sorted(files, key=lambda f: f.created)


def _on_disk(files: list[dict[str, Any]]) -> int:
    """Disk blocks of data files and their sparse indexes: what retention counts."""
    return sum(f.bytes_allocated + f.index_bytes_allocated for f in files)


def test_retention_by_count(tens: litemq.Queue) -> None:
    doomed = _on_disk(tens.data_files()[:7])
    report = tens.apply_retention(litemq.Retention(max_files=3))
    assert isinstance(report, litemq.RetentionReport)
    assert report.first_seq == tens.first_seq == 70
    assert len(report.deleted_files) == 7
    assert all(not Path(p).exists() for p in report.deleted_files)
    assert report.deleted_bytes == doomed > 0
    assert report.protected_files == 0
    assert [f.first_seq for f in tens.data_files()] == [70, 80, 90]
    assert len(tens) == 30
    assert [m.seq for m in tens.tailer()] == list(range(70, 100))
    # A second pass has nothing left to do.
    again = tens.apply_retention(litemq.Retention(max_files=3))
    assert again.deleted_files == []
    assert again.first_seq == 70


def test_retention_deletes_key_index_files_of_deleted_data(qpath: Path) -> None:
    # Eight keys per key-index file, ten messages per data file.
    with litemq.Queue(
        qpath, file_size=SMALL_FILE, roll="count:10", key_index={"slots": 16, "items": 8}
    ) as q:
        app = q.appender()
        for i in range(100):
            app.append(f"m{i}".encode(), key=f"k{i}")
        app.flush()
        index_files = sorted((qpath / "index").glob("*.idx"))
        assert len(index_files) == 13
        report = q.apply_retention(litemq.Retention(max_files=3))
        assert report.first_seq == 70
        gone = report.deleted_key_index_files
        # Files whose every key is below seq 70: 8 full files of 8 (keys 0..63).
        assert gone == [str(p) for p in index_files[:8]]
        assert all(not Path(p).exists() for p in gone)
        assert [m.seq for m in q.find("k75")] == [75]
        assert [m.seq for m in q.find("k65")] == []  # its data file is gone
        assert q.find("k5") == []


def test_retention_by_bytes(tens: litemq.Queue) -> None:
    files = tens.data_files()
    limit = _on_disk(files[-4:]) + 4096  # room for the newest four
    report = tens.apply_retention(litemq.Retention(max_bytes=limit))
    assert report.deleted_files
    assert report.deleted_bytes == _on_disk(files[: len(report.deleted_files)])
    base = Path(tens.path)
    # Retention counts the disk blocks of every file it owns.
    kept = sum(
        p.stat().st_blocks * 512 for p in base.rglob("*") if p.suffix in (".data", ".index", ".idx")
    )
    assert kept <= limit
    # The oldest kept file is the first whose removal was not needed.
    assert report.first_seq == tens.first_seq == tens.data_files()[0].first_seq
    assert tens.first_seq >= 60


def test_retention_string_sizes_and_ages() -> None:
    r = litemq.Retention(max_age="7d", max_bytes="10G", max_files=5, protect_unconsumed=True)
    assert r.to_tuple() == (7 * 86400 * 10**6, 10 << 30, 5, True)
    assert litemq.Retention(max_age=timedelta(minutes=1)).to_tuple()[0] == 60 * 10**6
    assert litemq.Retention(max_age=1.5).to_tuple()[0] == 1_500_000
    with pytest.raises(litemq.ConfigError, match="max_files"):
        litemq.Retention(max_files=0)
    with pytest.raises(litemq.ConfigError, match="max_age"):
        litemq.Retention(max_age="soon")
    with pytest.raises(litemq.ConfigError, match="max_age"):
        litemq.Retention(max_age=timedelta(0))
    with pytest.raises(TypeError):
        litemq.Retention(max_files="3")  # type: ignore[arg-type]


def test_retention_option_is_type_checked(qpath: Path) -> None:
    with pytest.raises(TypeError, match="Retention"):
        litemq.Queue(qpath, retention={"max_files": 3})  # type: ignore[arg-type]


def test_retention_at_roll_time(qpath: Path) -> None:
    with litemq.Queue(
        qpath, file_size=SMALL_FILE, roll="count:10", retention=litemq.Retention(max_files=3)
    ) as q:
        app = q.appender()
        for i in range(100):
            app.append(f"m{i}".encode())
        app.flush()
        deadline = time.monotonic() + 30
        while len(q.data_files()) > 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [f.first_seq for f in q.data_files()] == [70, 80, 90]
        assert q.first_seq == 70
        # apply_retention uses the queue's own policy.
        assert q.apply_retention().first_seq == 70


def test_queue_without_policy_keeps_everything(tens: litemq.Queue) -> None:
    report = tens.apply_retention()
    assert report == litemq.RetentionReport(first_seq=0)
    assert tens.first_seq == 0


def test_retention_by_age(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:10") as q:
        fill(q, 30)  # files 0, 10, 20
        time.sleep(1.5)
        fill(q, 20)  # files 30, 40 (created now)
        report = q.apply_retention(litemq.Retention(max_age=timedelta(seconds=1)))
        # File i is expired once file i+1 was created max_age ago: 0 and 10 are;
        # 20's newest message may be as recent as the creation of 30.
        assert report.first_seq == q.first_seq == 20
        assert len(report.deleted_files) == 2


def test_reading_a_retained_away_seq_names_the_first_seq(tens: litemq.Queue) -> None:
    t = tens.tailer()
    assert t.read_next().seq == 0
    tens.apply_retention(litemq.Retention(max_files=2))
    assert tens.first_seq == 80
    with pytest.raises(litemq.NotFoundError) as info:
        tens.get(5)
    e = info.value
    assert isinstance(e, IndexError)
    assert (e.seq, e.first, e.next) == (5, 80, 100)
    assert "80" in str(e)
    with pytest.raises(litemq.NotFoundError) as info:
        tens.tailer(start=42)
    assert info.value.first == 80
    # A tailer reading a deleted file keeps reading it (it is still mapped);
    # moving on to the next, deleted, file fails with the first sequence
    # still available, until it seeks.
    read: list[int] = []
    with pytest.raises(litemq.NotFoundError) as info:
        read.extend(m.seq for m in t)
    assert read == list(range(1, 10))
    assert (info.value.seq, info.value.first) == (10, 80)
    t.seek(tens.first_seq)
    assert [m.seq for m in t] == list(range(80, 100))
    # A new tailer from the start begins at the first kept message.
    assert tens.tailer().read_next().seq == 80


def test_lagging_protected_consumer_holds_back_retention(tens: litemq.Queue) -> None:
    with tens.tailer(name="slow") as slow:
        for _ in range(25):
            slow.read_next()
        slow.commit()
    with tens.tailer(name="fast") as fast:
        for _ in fast:
            pass
        fast.commit()
    policy = litemq.Retention(max_files=2, protect_unconsumed=True)
    report = tens.apply_retention(policy)
    # The file holding seq 25 (20..29) and everything after it stay.
    assert report.first_seq == tens.first_seq == 20
    assert report.protected_files == 6
    with tens.tailer(name="slow") as slow:
        assert [m.seq for m in slow][:2] == [25, 26]
        slow.seek(65)
        slow.commit()
    report = tens.apply_retention(policy)
    assert report.first_seq == 60
    assert report.protected_files == 2
    # Once the slow consumer is gone, the limit applies in full.
    assert tens.remove_consumer("slow")
    assert tens.apply_retention(policy).first_seq == 80


def test_unprotected_lagging_consumer_gets_not_found(tens: litemq.Queue) -> None:
    with tens.tailer(name="slow") as slow:
        for _ in range(25):
            slow.read_next()
        slow.commit()
    report = tens.apply_retention(litemq.Retention(max_files=2))
    assert report.first_seq == 80
    info = {c.name: c for c in tens.consumers()}["slow"]
    # Lag is what is still there to read (80..99), not the 55 messages
    # retention deleted before the consumer read them (issue 12).
    assert (info.next_seq, info.lag_messages) == (25, 20)
    with tens.tailer(name="slow") as slow:
        # Skipping silently would lose messages: the reader must decide.
        with pytest.raises(litemq.NotFoundError) as e:
            slow.read_next()
        assert e.value.first == 80
        slow.seek(tens.first_seq)
        assert slow.read_next().seq == 80
        slow.commit()


# --- the CLI -------------------------------------------------------------------


def test_cli_consumers(tens: litemq.Queue) -> None:
    path = tens.path
    assert cli("consumers", path).stdout.startswith("no named tailers")
    with tens.tailer(name="billing") as t:
        for _ in range(30):
            t.read_next()
        t.commit()
    tens.tailer(name="audit", start="end").close()
    proc = cli("consumers", path)  # beside the live writer
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "NEXT_SEQ", "LAG", "LAG_BYTES"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["audit", "100", "0"],
        ["billing", "30", "70"],
    ]
    proc = cli("consumers", path, "--format", "json")
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["name"], r["next_seq"], r["lag_messages"]) for r in records] == [
        ("audit", 100, 0),
        ("billing", 30, 70),
    ]
    assert records[0]["lag_bytes"] == 0
    assert records[1]["lag_bytes"] > 0
    assert records[1]["committed_at"].endswith("Z")


def test_cli_consumers_missing_queue(tmp_path: Path) -> None:
    proc = cli("consumers", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert "no such queue" in proc.stderr


def test_cli_retain_beside_a_live_writer(tens: litemq.Queue) -> None:
    path = tens.path
    with tens.tailer(name="slow") as t:
        for _ in range(35):
            t.read_next()
        t.commit()
    proc = cli("retain", path, "--max-files", "2", "--protect-unconsumed")
    assert proc.returncode == 0, proc.stderr
    assert "first_seq now 30" in proc.stdout
    assert "kept for named tailers" in proc.stdout
    assert tens.first_seq == 30
    # The writer goes on; new files count too.
    fill(tens, 15)
    doomed = _on_disk(tens.data_files()[:7])
    proc = cli("retain", path, "--max-files", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["first_seq"] == tens.first_seq == 100
    assert len(report["deleted_files"]) == 7
    assert report["deleted_bytes"] == doomed > 0
    assert [m.seq for m in tens.tailer()] == list(range(100, 115))


def test_cli_retain_by_size_and_age(tens: litemq.Queue) -> None:
    path = tens.path
    proc = cli("retain", path, "--max-age", "7d", "--max-bytes", "10G")
    assert proc.returncode == 0, proc.stderr
    assert "0 data files deleted" in proc.stdout
    # Ten small files hold about 150 KiB of disk (sealed ones are trimmed).
    proc = cli("retain", path, "--max-bytes", "40K")
    assert proc.returncode == 0, proc.stderr
    assert tens.first_seq > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "at least one of"),
        (("--max-age", "soon"), "--max-age"),
        (("--max-bytes", "lots"), "--max-bytes"),
        (("--max-files", "0"), "--max-files"),
    ],
)
def test_cli_retain_usage_errors(tens: litemq.Queue, args: tuple[str, ...], message: str) -> None:
    proc = cli("retain", tens.path, *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert tens.first_seq == 0
