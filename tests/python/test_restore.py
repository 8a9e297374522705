"""Restore: an archive (``litemq archive``) rebuilt into a local queue that writes on.

Every archived file is checked before it joins the queue (its listed length and CRC-64, a
data file every frame's CRC and its header and footer against the manifest); the queue
appears under its name only when whole, so a restore that stops is resumed, never opened.
``litemq archive --follow`` ships files as they are sealed.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

import litemq  # noqa: E402
from conftest import SMALL_FILE, cli  # noqa: E402
from litemq import archive as arc  # noqa: E402
from test_archive import fill  # noqa: E402
from test_archive import local_rows as rows  # noqa: E402


@pytest.fixture
def archived(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A queue with a named tailer and a work queue, archived; returns (queue, archive,
    the archived rows as the queue read them)."""
    q = tmp_path / "orders"
    fill(q, 4000)
    with litemq.Queue(q, read_only=True) as rq:
        with rq.tailer(name="billing", start=1500) as t:
            t.commit()
        with rq.work_queue("jobs", start=0, window=1024) as wq:
            for _ in range(30):
                job = wq.get(timeout=0)
                assert job is not None
                wq.ack(job)
    dest = tmp_path / "archive"
    report = litemq.archive_queue(q, dest)
    assert report.end_seq is not None
    return q, dest, rows(q, 0, report.end_seq)


def test_archive_destroy_restore_compare_every_message_and_continue(
    archived: tuple[Path, Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    q, dest, before = archived
    end = before[-1]["seq"] + 1
    shutil.rmtree(q)  # the host is lost
    report = litemq.restore(dest, q)
    assert isinstance(report, litemq.RestoreReport)
    assert (report.first_seq, report.next_seq) == (0, end)
    assert report.skipped == 0
    assert any(p.endswith(".data") for p in report.restored)
    assert report.consumers == {"billing": 1500}
    assert report.work_queues == {"jobs": 30}
    assert rows(q) == before  # every message, byte for byte
    with litemq.Queue(q, file_size=SMALL_FILE) as w:
        assert (w.first_seq, w.next_seq) == (0, end)
        assert [(c.name, c.next_seq) for c in w.consumers()] == [("billing", 1500)]
        assert [(x.name, x.low, x.window) for x in w.work_queues()] == [("jobs", 30, 1024)]
        assert [m.seq for m in w.find(b"k3", limit=2)] == [3, 24]  # the key index too
        app = w.appender()
        assert app.append(b"after the restore") == end
        app.flush()
        assert w.get(end).payload == b"after the restore"
        with w.tailer(name="billing") as t:
            m = t.read_next()
            assert m is not None
            assert m.seq == 1500
    assert cli("verify", str(q)).returncode == 0


def test_restore_keeps_the_archived_metadata_options_and_queue_id(
    archived: tuple[Path, Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _q, dest, _rows = archived
    # An archive whose metadata.json carries a queue_id.
    meta = json.loads((dest / "metadata.json").read_text())
    meta["queue_id"] = "0123456789abcdef0123456789abcdef"
    raw = json.dumps(meta).encode()
    (dest / "metadata.json").write_bytes(raw)
    m = json.loads((dest / arc.MANIFEST).read_text())
    for e in m["files"]:
        if e["path"] == "metadata.json":
            e["size"], e["crc64"] = len(raw), litemq._litemq._crc64(raw)
    (dest / arc.MANIFEST).write_text(json.dumps(m))
    target = tmp_path / "restored"
    litemq.restore(dest, target)
    got = json.loads((target / "metadata.json").read_text())
    assert got["queue_id"] == meta["queue_id"]
    assert got["options"] == meta["options"]
    assert got["clean_shutdown"] is False  # recovery runs at the first open
    # The restored queue is the archived one: its first writer keeps the id.
    with litemq.Queue(target) as q:
        assert q.queue_id == meta["queue_id"]
    assert json.loads((target / "metadata.json").read_text())["queue_id"] == meta["queue_id"]


def test_restore_refuses_a_damaged_archived_file_and_names_it(
    archived: tuple[Path, Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _q, dest, _ = archived
    a = litemq.open_archive(dest)
    f = a.files[1]
    raw = bytearray((dest / f.path).read_bytes())
    raw[4096 + 300] ^= 0x08
    (dest / f.path).write_bytes(bytes(raw))
    target = tmp_path / "restored"
    with pytest.raises(arc.ArchiveError, match=f.path):
        litemq.restore(dest, target)  # not the listed CRC-64
    assert not target.exists()
    # A manifest that agrees with the damaged bytes: the frames' own CRCs still catch it.
    m = json.loads((dest / arc.MANIFEST).read_text())
    for e in m["files"]:
        if e["path"] == f.path:
            e["crc64"] = litemq._litemq._crc64(bytes(raw))
    (dest / arc.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(arc.ArchiveError, match=f.path):
        litemq.restore(dest, target)
    assert not target.exists()
    with pytest.raises(FileNotFoundError):
        litemq.Queue(target, read_only=True).close()


def test_an_interrupted_restore_is_resumed_and_never_opens_half_done(
    archived: tuple[Path, Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _q, dest, before = archived
    target = tmp_path / "restored"
    done: list[str] = []

    class Killed(Exception):
        pass

    def stop_after_two_data_files(rel: str) -> None:
        done.append(rel)
        if sum(p.endswith(".data") for p in done) == 2:
            raise Killed

    with pytest.raises(Killed):
        litemq.restore(dest, target, on_file=stop_after_two_data_files)
    assert not target.exists()  # nothing under the queue's name until it is whole
    # A file cut short mid-write is left under a temporary name, never a data file's.
    report = litemq.restore(dest, target)
    assert report.skipped == len(done)
    assert not set(report.restored) & set(done)
    assert rows(target) == before
    # A restore over an existing queue is refused.
    with pytest.raises(FileExistsError):
        litemq.restore(dest, target)


def test_cli_restore_prints_json(
    archived: tuple[Path, Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _q, dest, before = archived
    target = tmp_path / "restored"
    r = cli("restore", str(dest), str(target), "--format", "json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["next_seq"] == before[-1]["seq"] + 1
    assert summary["consumers"] == {"billing": 1500}
    r = cli("restore", str(dest), str(target))
    assert r.returncode == 1
    assert "litemq: error:" in r.stderr
    assert "exists" in r.stderr


def test_archive_follow_ships_each_file_as_it_is_sealed_and_stops_on_sigterm(
    qpath: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    fill(qpath, 10)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "litemq",
            "archive",
            str(qpath),
            str(dest),
            "--follow",
            "--every",
            "0.05",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
            app = q.appender()
            for round_ in range(3):
                for i in range(50):
                    app.append(b"round %d message %d" % (round_, i))
                app.roll()  # seal the file: the follower ships it
                sealed_end = q.next_seq
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if litemq.open_archive(dest).end_seq == sealed_end:
                            break
                    except FileNotFoundError:
                        pass
                    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                    assert time.monotonic() < deadline, "the follower did not ship the file"
                    time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped" in out
    a = litemq.open_archive(dest)
    assert a.read_arrow().to_pylist() == rows(qpath, 0, a.end_seq)


def test_an_encrypted_archive_restores_with_its_key_and_stays_encrypted(tmp_path: Path) -> None:
    key = bytes(range(32))
    bodies = [b"secret %d" % i for i in range(300)]
    q = tmp_path / "q"
    with litemq.Queue(q, file_size=SMALL_FILE, encryption_key=key) as w:
        app = w.appender()
        app.append_batch(bodies)
        app.roll()
        with w.tailer(name="audit", start=7) as t:
            t.commit()
    litemq.archive_queue(q, tmp_path / "archive", encryption_key=key)
    target = tmp_path / "restored"
    with pytest.raises(litemq.EncryptionError):
        litemq.restore(tmp_path / "archive", target)
    assert not target.exists()
    report = litemq.restore(tmp_path / "archive", target, encryption_key=key)
    assert report.consumers == {"audit": 7}
    with pytest.raises(litemq.EncryptionError):
        litemq.Queue(target, read_only=True).close()
    with litemq.Queue(target, encryption_key=key) as w:
        assert w.read_arrow().column("payload").to_pylist() == bodies
        assert w.appender().append(b"more") == len(bodies)
