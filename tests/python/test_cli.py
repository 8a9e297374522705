"""The `litemq` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, cli, spawn_python


@pytest.fixture
def filled(qpath: Path) -> Path:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:50") as q:
        app = q.appender()
        app.append_batch([f"hello {i}".encode() for i in range(120)])
        app.append(b"\x00\x01binary\xff", key=b"\xffk", headers={"h": "v", "b": b"\x00"})
        app.append(b"keyed", key="order-7")
    return qpath


def test_console_script_is_installed(filled: Path) -> None:
    script = Path(sys.executable).parent / "litemq"
    assert script.exists()
    proc = subprocess.run(
        [str(script), "get", str(filled), "3"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "hello 3" in proc.stdout


def test_info_text_and_json(filled: Path) -> None:
    proc = cli("info", str(filled))
    assert proc.returncode == 0, proc.stderr
    assert "messages     122" in proc.stdout
    assert "sequences    0..122" in proc.stdout
    assert "writer       none" in proc.stdout
    proc = cli("info", str(filled), "--format", "json")
    info = json.loads(proc.stdout)
    assert info["messages"] == 122
    assert (info["first_seq"], info["next_seq"]) == (0, 122)
    assert info["writer_pid"] is None
    assert len(info["data_files"]) == 3
    assert info["first_time"].endswith("Z")
    assert info["first_time"] <= info["last_time"]


def test_info_names_a_live_writer(filled: Path) -> None:
    holder = spawn_python(
        """
        import sys, litemq
        with litemq.Queue(sys.argv[1]) as q:
            q.appender()  # the lock is taken at the first write (issue 33)
            print("locked", flush=True)
            sys.stdin.readline()
        """,
        str(filled),
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        info = json.loads(cli("info", str(filled), "--format", "json").stdout)
        assert info["writer_pid"] == holder.pid
        assert f"pid {holder.pid}" in cli("info", str(filled)).stdout
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.communicate(timeout=60)


def test_dump_text(filled: Path) -> None:
    proc = cli("dump", str(filled), "--from", "118")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 4
    assert lines[0].split()[0] == "118"
    assert lines[0].endswith("hello 118")
    assert "key=b'\\xffk'" in lines[2]
    assert "b'\\x00\\x01binary\\xff'" in lines[2]
    assert "key='order-7'" in lines[3]
    assert lines[3].endswith("keyed")


def test_dump_limit_and_json(filled: Path) -> None:
    proc = cli("dump", str(filled), "--from", "119", "--limit", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["seq"] for r in records] == [119, 120]
    assert records[0]["payload"] == "hello 119"
    assert records[0]["payload_encoding"] == "utf-8"
    assert records[0]["key"] is None
    binary = records[1]
    assert binary["payload_encoding"] == "base64"
    assert binary["payload"] == "AAFiaW5hcnn/"
    assert binary["key_encoding"] == "base64"
    assert binary["headers"] == {"h": "v", "b": {"utf-8": "\u0000"}}
    assert isinstance(binary["timestamp"], int)


def test_dump_shows_topic_tags_priority_and_expiry(queue: litemq.Queue) -> None:
    app = queue.appender()
    app.append(b"plain")
    app.append(b"paid", topic="orders", queue_id=2, tags=["paid", "eu"], priority=5, expires_at=0)
    app.flush()
    proc = cli("dump", queue.path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    plain, paid = (json.loads(line) for line in proc.stdout.splitlines())
    assert (plain["topic"], plain["tags"], plain["priority"], plain["expires_at"]) == (
        None,
        [],
        0,
        None,
    )
    assert (paid["topic"], paid["queue_id"], paid["tags"]) == ("orders", 2, ["paid", "eu"])
    assert (paid["priority"], paid["expires_at"]) == (5, 0)
    text = cli("dump", queue.path, "--from", "1").stdout
    assert "topic='orders'/2" in text
    assert "tags=paid,eu" in text
    assert "priority=5" in text
    assert "expires=1970-01-01T00:00:00" in text


def test_dump_hex(filled: Path) -> None:
    proc = cli("dump", str(filled), "--from", "120", "--limit", "1", "--format", "hex")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "9 bytes" in lines[0]
    assert lines[1].split("|")[0].split() == [
        "00000000", "00", "01", "62", "69", "6e", "61", "72", "79", "ff",
    ]  # fmt: skip
    assert lines[1].endswith("|..binary.|")


def test_get_and_missing_seq(filled: Path) -> None:
    proc = cli("get", str(filled), "5", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["payload"] == "hello 5"
    proc = cli("get", str(filled), "500")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("litemq: error: ")
    assert "500" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_tail_prints_the_last_messages(filled: Path) -> None:
    proc = cli("tail", "-n", "2", str(filled))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["120", "121"]


def test_tail_follow_sees_new_messages(filled: Path) -> None:
    tail = subprocess.Popen(
        [sys.executable, "-m", "litemq", "tail", "-f", "-n", "1", str(filled)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tail.stdout is not None
    try:
        assert tail.stdout.readline().split()[0] == "121"
        with litemq.Queue(filled, file_size=SMALL_FILE) as q:
            q.appender().append(b"brand new")
        line = tail.stdout.readline()
        assert line.split()[0] == "122"
        assert line.strip().endswith("brand new")
    finally:
        tail.terminate()
        tail.communicate(timeout=30)


def test_verify_ok(filled: Path) -> None:
    proc = cli("verify", str(filled))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK: 122 frames checked, 0 bad"


def test_verify_reports_each_bad_frame(filled: Path) -> None:
    data = sorted(filled.rglob("*.data"))[0]
    raw = bytearray(data.read_bytes())
    for text in (b"hello 7", b"hello 30"):
        at = raw.find(text)
        assert at > 0
        raw[at] ^= 0x20
    data.write_bytes(bytes(raw))
    proc = cli("verify", str(filled))
    assert proc.returncode == 1
    bad = [line for line in proc.stdout.splitlines() if line.startswith("BAD")]
    assert len(bad) == 2
    assert bad[0].startswith("BAD seq=7 ")
    assert bad[1].startswith("BAD seq=30 ")
    assert data.name in bad[0]
    assert proc.stdout.splitlines()[-1] == "FAILED: 120 frames checked, 2 bad"
    assert "Traceback" not in proc.stderr


def test_find_by_key(filled: Path) -> None:
    proc = cli("find", str(filled), "order-7", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["seq"] for line in proc.stdout.splitlines()] == [121]
    proc = cli("find", str(filled), "ff6b", "--hex-key")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "120"
    proc = cli("find", str(filled), "order-7", "--start", "2999-01-01T00:00:00Z")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


def test_reindex_rebuilds_the_key_index(filled: Path) -> None:
    index_dir = filled / "index"
    assert index_dir.is_dir()
    before = {p.name: p.read_bytes() for p in index_dir.iterdir()}
    for p in index_dir.iterdir():
        p.unlink()
    proc = cli("reindex", str(filled))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK: 2 keys indexed from 122 messages"
    assert [
        json.loads(line)["seq"]
        for line in cli("find", str(filled), "order-7", "--format", "json").stdout.splitlines()
    ] == [121]
    after = {p.name: p.read_bytes() for p in index_dir.iterdir()}
    assert len(after) == len(before)


def test_reindex_counts_the_messages_retention_left(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:50") as q:
        q.appender().append_batch([(b"m", f"k{i % 3}") for i in range(120)])
        q.appender().flush()
        assert q.apply_retention(litemq.Retention(max_files=1)).first_seq == 100
    proc = cli("reindex", str(qpath))
    assert proc.returncode == 0, proc.stderr
    # next_seq is 120, but only 100..119 are there.
    assert proc.stdout.strip() == "OK: 20 keys indexed from 20 messages"


def test_consumers_lag_leaves_out_what_retention_deleted(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:50") as q:
        q.appender().append_batch([b"m"] * 120)
        q.appender().flush()
        with q.tailer(name="slow") as t:
            for _ in range(10):
                t.read_next()
            t.commit()
        assert q.apply_retention(litemq.Retention(max_files=1)).first_seq == 100
        assert [(c.name, c.next_seq, c.lag_messages) for c in q.consumers()] == [("slow", 10, 20)]
    proc = cli("consumers", str(qpath))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split()[:3] == ["slow", "10", "20"]
    assert "retention deleted 90 messages it had not read" in proc.stdout
    (record,) = [
        json.loads(x) for x in cli("consumers", str(qpath), "--format", "json").stdout.splitlines()
    ]
    assert (record["lag_messages"], record["deleted_unread"]) == (20, 90)


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["get"], 2, "required"),
        (["get", "{q}", "minus"], 2, "not a sequence number"),
        (["get", "{q}", "-3"], 2, "sequence"),
        (["dump", "{q}", "--format", "xml"], 2, "invalid choice"),
        (["find", "{q}", "k", "--start", "yesterday"], 2, "not a time"),
        (["frobnicate", "{q}"], 2, "invalid choice"),
        (["info", "{missing}"], 1, "no such queue"),
        (["dump", "{notaqueue}"], 1, "error"),
    ],
)
def test_errors_are_one_line_without_traceback(
    filled: Path, tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    notaqueue = tmp_path / "plain-dir"
    notaqueue.mkdir()
    subst = {"{q}": str(filled), "{missing}": str(tmp_path / "nope"), "{notaqueue}": str(notaqueue)}
    proc = cli(*[subst.get(a, a) for a in args])
    assert proc.returncode == code
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr
    if code == 1:
        assert len(proc.stderr.strip().splitlines()) == 1


def test_dump_into_a_closed_pipe_is_quiet(filled: Path) -> None:
    proc = subprocess.run(
        f"{sys.executable} -m litemq dump {filled} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ},
    )
    assert proc.stdout.split()[0] == "0"
    assert "Traceback" not in proc.stderr
    assert "BrokenPipe" not in proc.stderr


def test_verify_reports_a_zeroed_page_and_checks_what_follows(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([f"message {i} ".encode() * 8 for i in range(2000)])
    first = sorted(qpath.rglob("*.data"))[0]
    raw = bytearray(first.read_bytes())
    raw[4096 + 8192 : 4096 + 12288] = bytes(4096)
    first.write_bytes(bytes(raw))
    proc = cli("verify", str(qpath))
    assert proc.returncode == 1, proc.stdout
    bad = [line for line in proc.stdout.splitlines() if line.startswith("BAD")]
    assert bad
    assert all(first.name in line for line in bad)
    assert "stopped" not in proc.stdout
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("FAILED: ")
    assert "unreachable" in last
    checked = int(last.split()[1].replace(",", ""))
    assert checked > 1900  # it went on after the hole
    assert "Traceback" not in proc.stderr


def test_verify_beside_a_live_writer_checks_up_to_the_tail_it_saw(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([b"x" * 50] * 50_000)
    writer = spawn_python(
        """
        import sys, time, litemq
        with litemq.Queue(sys.argv[1], file_size=64 * 1024) as q:
            app = q.appender()
            app.append_batch([b"y" * 50] * 100)
            app.flush()
            print("writing", flush=True)
            for _ in range(20_000):  # at most 2M messages, about 20 s
                app.append_batch([b"y" * 50] * 100)
                time.sleep(0.001)
        """,
        str(qpath),
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "writing"
        proc = cli("verify", str(qpath))
    finally:
        writer.kill()
        writer.communicate()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK: ")
    assert " 0 bad" in proc.stdout


def test_topics_and_topic_filters(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i in range(30):
        if i % 3 == 0:
            app.append(f"o{i}".encode(), topic="orders", tags=["paid"] if i % 2 else ["eu"])
        elif i % 3 == 1:
            app.append(f"a{i}".encode(), topic="audit")
        else:
            app.append(f"p{i}".encode())
    app.flush()
    proc = cli("topics", queue.path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["topic"], r["count"], r["first_seq"], r["last_seq"]) for r in rows] == [
        ("audit", 10, 1, 28),
        ("orders", 10, 0, 27),
    ]
    assert [(r["first_offset"], r["last_offset"]) for r in rows] == [(0, 9), (0, 9)]
    text = cli("topics", queue.path).stdout.splitlines()
    assert text[0].split() == [
        *("topic", "queue", "messages", "first", "last", "offsets", "last", "written")
    ]
    # Offsets half-open, as every range the CLI prints.
    assert text[1].split()[:6] == ["audit", "0", "10", "1", "28", "0..10"]
    assert text[2].split()[:6] == ["orders", "0", "10", "0", "27", "0..10"]
    dumped = cli("dump", queue.path, "--topic", "orders", "--tag", "paid", "--format", "json")
    assert [json.loads(line)["seq"] for line in dumped.stdout.splitlines()] == [3, 9, 15, 21, 27]
    tail = cli("tail", queue.path, "--topic", "audit", "-n", "2", "--format", "json")
    assert [json.loads(line)["seq"] for line in tail.stdout.splitlines()] == [25, 28]
    assert cli("dump", queue.path, "--topic", "").returncode != 0


def test_consumers_reset_and_delete(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append_batch([b"m"] * 10)
        app.flush()
        stamp = [m.timestamp for m in q.tailer()][4]
        q.tailer(name="billing").close()

    def position() -> int:
        with litemq.Queue(qpath, read_only=True) as q:
            return {c.name: c.next_seq for c in q.consumers()}["billing"]

    for to, want in [("7", 7), ("latest", 10), ("earliest", 0)]:
        proc = cli("consumers", str(qpath), "reset", "billing", "--to", to)
        assert proc.returncode == 0, proc.stderr
        assert position() == want
        assert f"billing: next_seq {want}" in proc.stdout
    when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=stamp)
    proc = cli("consumers", str(qpath), "reset", "billing", "--to", when.isoformat())
    assert proc.returncode == 0, proc.stderr
    assert position() <= 4
    # A name that does not exist is an error, not a new consumer.
    proc = cli("consumers", str(qpath), "reset", "nobody", "--to", "0")
    assert proc.returncode == 1
    assert "nobody" in proc.stderr
    proc = cli("consumers", str(qpath), "reset", "billing")
    assert proc.returncode == 2
    assert "--to" in proc.stderr
    # An open consumer cannot be reset or deleted under it.
    with litemq.Queue(qpath, read_only=True) as q, q.tailer(name="billing"):
        proc = cli("consumers", str(qpath), "delete", "billing")
        assert proc.returncode == 1
        assert "billing" in proc.stderr
    proc = cli("consumers", str(qpath), "delete", "billing")
    assert proc.returncode == 0, proc.stderr
    with litemq.Queue(qpath, read_only=True) as q:
        assert q.consumers() == []
    assert cli("consumers", str(qpath), "delete", "billing").returncode == 1
