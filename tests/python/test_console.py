"""The `litemq` command as a console: appending from a shell, tailing by time and
as a named consumer, reading past damage, tombstones and compression in the output,
and one vocabulary across commands (issue 33)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import litemq
from conftest import SMALL_FILE, cli


def _cli_in(stdin: str | bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Runs ``python -m litemq ARGS`` with `stdin` as its standard input."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "litemq", *args],
        input=data,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_append_lines_with_key_topic_and_headers(qpath: Path) -> None:
    proc = _cli_in(
        "one\ntwo\n\nthree\n",
        "append",
        str(qpath),
        "--key",
        "k1",
        "--topic",
        "orders",
        "--header",
        "src=cli",
        "--file-size",
        "64KiB",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "OK: 4 messages appended, sequences 0..4\n"
    with litemq.Queue(qpath, read_only=True) as q:
        got = list(q)
    assert [m.payload for m in got] == [b"one", b"two", b"", b"three"]
    assert {m.key for m in got} == {"k1"}
    assert {m.topic for m in got} == {"orders"}
    assert got[0].headers == {"src": "cli"}


def test_append_json_lines_round_trips_what_dump_prints(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append(b"\x00\xffbin", key=b"\xfe", headers={"h": "v", "b": b"\x01"}, topic="t")
        app.append(b"text", key="k", tags=["x"], priority=3)
        app.delete("k")
    dumped = cli("dump", str(qpath), "--format", "json")
    assert dumped.returncode == 0, dumped.stderr
    copy = tmp_path / "copy"
    proc = _cli_in(dumped.stdout, "append", str(copy), "--input", "json", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"appended": 3, "first_seq": 0, "end_seq": 3}
    with litemq.Queue(copy, read_only=True) as q:
        got = list(q)
    assert got[0].payload == b"\x00\xffbin"
    assert got[0].key == b"\xfe"
    assert got[0].headers == {"h": "v", "b": b"\x01"}
    assert got[0].topic == "t"
    assert (got[1].payload, got[1].key, got[1].tags, got[1].priority) == (b"text", "k", ("x",), 3)
    assert got[2].tombstone
    assert got[2].key == "k"


def test_append_raw_stdin_is_one_message(qpath: Path) -> None:
    data = b"line 1\nline 2\n\x00\xff"
    proc = _cli_in(data, "append", str(qpath), "--input", "raw", "--compress")
    assert proc.returncode == 0, proc.stderr
    with litemq.Queue(qpath, read_only=True) as q:
        got = list(q)
    assert [m.payload for m in got] == [data]


def test_append_bad_json_stops_at_the_line_and_says_what_was_appended(qpath: Path) -> None:
    stdin = '{"payload": "a"}\nnot json\n{"payload": "c"}\n'
    proc = _cli_in(stdin, "append", str(qpath), "--input", "json")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "line 2" in err
    assert "Traceback" not in err
    assert "1 message appended before it (sequences 0..1)" in err
    with litemq.Queue(qpath, read_only=True) as q:
        assert [m.payload for m in q] == [b"a"]


def test_tombstones_and_compression_in_dump_get_and_find(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append(b"x" * 2000, key="k", compress="zstd")
        app.delete("k")
    proc = cli("dump", str(qpath))
    lines = proc.stdout.splitlines()
    assert "compressed=zstd" in lines[0]
    assert "tombstone" not in lines[0]
    assert "tombstone" in lines[1]
    records = _json_lines(cli("dump", str(qpath), "--format", "json").stdout)
    assert [(r["tombstone"], r["compression"]) for r in records] == [(False, "zstd"), (True, None)]
    got = json.loads(cli("get", str(qpath), "1", "--format", "json").stdout)
    assert got["tombstone"] is True
    assert "tombstone" in cli("get", str(qpath), "1").stdout
    found = _json_lines(cli("find", str(qpath), "k", "--format", "json").stdout)
    assert [(r["seq"], r["tombstone"], r["compression"]) for r in found] == [
        (0, False, "zstd"),
        (1, True, None),
    ]
    assert "compressed=zstd" in cli("find", str(qpath), "k").stdout


def test_tail_since_prints_what_was_written_after_that_time(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        for i in range(15):
            app.append(f"new {i}".encode())
    # Everything is newer than 10 minutes ago: all 15, not the default last 10.
    proc = cli("tail", str(qpath), "--since", "10m")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 15
    # A time after the last message: nothing.
    future = str(int(time.time() * 1_000_000) + 3_600_000_000)
    assert cli("tail", str(qpath), "--since", future).stdout == ""


def test_tail_name_commits_as_it_prints(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([f"m{i}".encode() for i in range(5)])
    proc = cli("tail", str(qpath), "--name", "ops", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert [r["seq"] for r in _json_lines(proc.stdout)] == [0, 1, 2, 3, 4]
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        assert [(c.name, c.next_seq) for c in q.consumers()] == [("ops", 5)]
        q.appender().append(b"m5")
    # A second run resumes where the first committed.
    proc = cli("tail", str(qpath), "--name", "ops", "--format", "json")
    assert [r["seq"] for r in _json_lines(proc.stdout)] == [5]


def _damage_middle(qpath: Path) -> None:
    """Flip a bit in the payload of message 7 (its frame's CRC no longer matches)."""
    data = sorted(qpath.rglob("*.data"))[0]
    raw = bytearray(data.read_bytes())
    at = raw.find(b"message 0007")
    assert at > 0
    raw[at] ^= 0x20
    data.write_bytes(bytes(raw))


def test_dump_skip_damaged_reads_past_a_bad_frame_and_says_so(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:40") as q:
        q.appender().append_batch([f"message {i:04}".encode() for i in range(100)])
    _damage_middle(qpath)
    plain = cli("dump", str(qpath))
    assert plain.returncode == 1
    assert "--skip-damaged" in plain.stderr
    proc = cli("dump", str(qpath), "--skip-damaged")
    assert proc.returncode == 0, proc.stderr
    assert "skipped damaged data in" in proc.stderr
    assert "(seq 7)" in proc.stderr
    seqs = [int(line.split()[0]) for line in proc.stdout.splitlines()]
    assert seqs == [s for s in range(100) if s != 7]


def test_where_prints_the_json_every_command_prints(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, indexes={"customer": "str"}) as q:
        app = q.appender()
        app.append(b"\xff\x00", key="o1", headers={"customer": "c7"}, topic="orders")
        app.append(b"other", headers={"customer": "c8"})
    proc = cli("where", str(qpath), "customer", "=", "c7")
    assert proc.returncode == 0, proc.stderr
    [record] = _json_lines(proc.stdout)
    assert record["payload"] == base64.b64encode(b"\xff\x00").decode()
    assert record["payload_encoding"] == "base64"
    assert (record["key"], record["topic"]) == ("o1", "orders")
    assert record["headers"] == {"customer": "c7"}
    assert record["time"].endswith("Z")
    dumped = _json_lines(cli("dump", str(qpath), "--format", "json").stdout)
    assert record == dumped[0]
    text = cli("where", str(qpath), "customer", "=", "c7", "--format", "text").stdout
    assert "key='o1'" in text


# ------------------------------------------------------------------------------------------
# one vocabulary


def test_ranges_are_half_open_in_info_errors_and_archive(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:5") as q:
        q.appender().append_batch([b"m"] * 12)
    info = cli("info", str(qpath))
    assert "sequences    0..12\n" in info.stdout
    missing = cli("get", str(qpath), "12")
    assert missing.returncode == 1
    assert "it holds 0..12" in missing.stderr
    archived = cli("archive", str(qpath), str(tmp_path / "archive"))
    assert archived.returncode == 0, archived.stderr
    assert "the archive holds sequences 0..10" in archived.stdout  # two sealed files of 5


def test_archive_takes_format_json_and_json_as_a_deprecated_alias(
    qpath: Path, tmp_path: Path
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll="count:5") as q:
        q.appender().append_batch([b"m"] * 12)
    proc = cli("archive", str(qpath), str(tmp_path / "a1"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["first_seq"] == 0
    assert proc.stderr == ""
    old = cli("archive", str(qpath), str(tmp_path / "a2"), "--json")
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout)["first_seq"] == 0
    assert "--json is deprecated: use --format json" in old.stderr


def test_wq_without_stats_prints_the_stats(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"job")
        q.work_queue("thumbs").close()
    proc = cli("wq", str(qpath), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == "thumbs"

    def figures(*args: str) -> dict[str, object]:
        record = json.loads(cli("wq", str(qpath), *args, "--format", "json").stdout)
        del record["oldest_age"]  # grows between the two runs
        return record

    assert figures() == figures("stats")
    assert "IN_FLIGHT" in cli("wq", str(qpath)).stdout


def test_find_start_takes_an_age_like_retain_max_age(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"recent", key="k")
    proc = cli("find", str(qpath), "k", "--start", "1h", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert [r["payload"] for r in _json_lines(proc.stdout)] == ["recent"]
    future = cli("find", str(qpath), "k", "--end", "1h", "--format", "json")
    assert future.returncode == 0, future.stderr
    assert future.stdout == ""  # written less than an hour ago: not before 1h ago


def test_errors_name_cli_options_not_python_arguments(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"m", headers={"customer": "c7"})
    proc = cli("where", str(qpath), "customer", "=", "c7")
    assert proc.returncode == 1
    assert 'no index on "customer"' in proc.stderr
    assert "litemq index add" in proc.stderr
    assert "q.add_index" not in proc.stderr
    secret = tmp_path / "secret"
    with litemq.Queue(secret, file_size=SMALL_FILE, encryption_key=bytes(range(32))) as q:
        q.appender().append(b"m")
    proc = cli("info", str(secret))
    assert proc.returncode == 1
    assert "LITEMQ_ENCRYPTION_KEY_FILE" in proc.stderr
    assert "encryption_key" not in proc.stderr.replace("LITEMQ_ENCRYPTION_KEY_FILE", "")


def test_help_does_not_claim_every_command_is_read_only() -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Every command but reindex opens the queue read-only" not in text
    assert "append" in text
    assert "writer" in text
