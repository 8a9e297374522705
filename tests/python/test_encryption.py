"""Encryption at rest (format 8) through the Python API.

What a user relies on: every read path returns the payload given, nothing
of it is on disk in clear, a missing or wrong key is a typed error at open,
a tampered frame is a CorruptedError, and keys are still found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq

KEY = bytes(range(32))
SMALL_FILE = 1 << 20


def data_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.data"))


def test_every_read_path_returns_the_payload(tmp_path: Path) -> None:
    body = b'{"card": "4111 1111 1111 1111"}\n' * 20
    with litemq.Queue(
        tmp_path / "q", file_size=SMALL_FILE, encryption_key=KEY, compression="zstd"
    ) as q:
        app = q.appender()
        a = app.append(body, key="k")
        app.append_batch([b"small secret", {"payload": b"x" * 10, "key": "j"}])
        app.flush()
        assert q.get(a).payload == body
        assert q.get(a).compression == "zstd"  # compressed, then sealed
        assert [m.payload for m in q.tailer()] == [body, b"small secret", b"x" * 10]
        assert [m.payload for m in q.find("k")] == [body]
        latest = q.get_latest("j")
        assert latest is not None
        assert latest.payload == b"x" * 10
        assert bytes(q.get(1).payload_view()) == b"small secret"
        assert q.read_arrow().column("payload").to_pylist() == [body, b"small secret", b"x" * 10]
    for f in data_files(tmp_path / "q"):
        raw = f.read_bytes()
        assert b"small secret" not in raw
        assert b"4111" not in raw
    with litemq.Queue(tmp_path / "q", read_only=True, encryption_key=KEY) as q:
        assert q.get(1).payload == b"small secret"


def test_a_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key.hex"
    key_file.write_text(KEY.hex() + "\n")
    with litemq.Queue(tmp_path / "q", encryption_key_file=key_file) as q:
        q.appender().append(b"hello")
    with litemq.Queue(tmp_path / "q", read_only=True, encryption_key=KEY) as q:
        assert q.get(0).payload == b"hello"
    with pytest.raises(litemq.ConfigError):
        litemq.Queue(tmp_path / "q", encryption_key=KEY, encryption_key_file=key_file)
    with pytest.raises(litemq.ConfigError, match="32 bytes"):
        litemq.Queue(tmp_path / "q", encryption_key=b"short")


def test_no_key_or_a_wrong_key_is_a_typed_error_at_open(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", encryption_key=KEY) as q:
        q.appender().append(b"secret")
    with pytest.raises(litemq.EncryptionError) as no_key:
        litemq.Queue(tmp_path / "q", read_only=True)
    assert not isinstance(no_key.value, litemq.WrongKeyError)
    assert no_key.value.file == str(tmp_path / "q")
    wrong = bytes(32)
    with pytest.raises(litemq.WrongKeyError):
        litemq.Queue(tmp_path / "q", encryption_key=wrong)
    with pytest.raises(litemq.WrongKeyError):
        litemq.Queue(tmp_path / "q", read_only=True, encryption_key=wrong)
    assert issubclass(litemq.WrongKeyError, litemq.EncryptionError)
    assert issubclass(litemq.EncryptionError, litemq.LiteMQError)
    with litemq.Queue(tmp_path / "plain") as q:
        q.appender().append(b"x")
    with pytest.raises(litemq.EncryptionError, match="without encryption"):
        litemq.Queue(tmp_path / "plain", encryption_key=KEY)


def test_tampered_ciphertext_is_a_corrupted_error(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size=SMALL_FILE, encryption_key=KEY) as q:
        q.appender().append_batch([b"A" * 32, b"B" * 32])
    (path,) = data_files(tmp_path / "q")
    raw = bytearray(path.read_bytes())
    at = 4096
    length = int.from_bytes(raw[at : at + 4], "little")
    raw[at + 4 + length - 20] ^= 1  # inside the ciphertext
    # A good CRC over the tampered bytes: only authentication can tell.
    crc = litemq._litemq._crc64(bytes(raw[at : at + 4 + length]))
    raw[at + 4 + length : at + 12 + length] = crc.to_bytes(8, "little")
    path.write_bytes(bytes(raw))
    with litemq.Queue(tmp_path / "q", read_only=True, encryption_key=KEY) as q:
        with pytest.raises(litemq.CorruptedError, match="authentication"):
            q.get(0)
        assert q.get(1).payload == b"B" * 32


def test_an_archive_needs_the_key(tmp_path: Path) -> None:
    bodies = [b"secret %d" % i for i in range(200)]
    with litemq.Queue(tmp_path / "q", file_size=64 * 1024, encryption_key=KEY) as q:
        app = q.appender()
        app.append_batch(bodies)
        app.roll()
    litemq.archive_queue(tmp_path / "q", str(tmp_path / "archive"), encryption_key=KEY)
    with pytest.raises(litemq.EncryptionError):
        litemq.open_archive(str(tmp_path / "archive"))
    with pytest.raises(litemq.WrongKeyError):
        litemq.open_archive(str(tmp_path / "archive"), encryption_key=bytes(32))
    a = litemq.open_archive(str(tmp_path / "archive"), encryption_key=KEY)
    assert a.end_seq > 0
    assert a.read_arrow().column("payload").to_pylist() == bodies[: a.end_seq]
    assert a.read_arrow(start=5, end=9).column("payload").to_pylist() == bodies[5:9]


def test_the_command_line_takes_the_key_from_the_environment(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    with litemq.Queue(tmp_path / "q", encryption_key=KEY) as q:
        app = q.appender()
        app.append(b"secret one", key="k1")
        app.append(b"secret two", key="k2")
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)

    def run(*args: str, key: bool) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "LITEMQ_ENCRYPTION_KEY_FILE"}
        if key:
            env["LITEMQ_ENCRYPTION_KEY_FILE"] = str(key_file)
        return subprocess.run(
            [sys.executable, "-m", "litemq", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )

    refused = run("dump", str(tmp_path / "q"), "--format", "json", key=False)
    assert refused.returncode == 1
    assert "encrypted" in refused.stderr
    dumped = run("dump", str(tmp_path / "q"), "--format", "json", key=True)
    assert dumped.returncode == 0, dumped.stderr
    rows = [json.loads(line) for line in dumped.stdout.splitlines()]
    assert len(rows) == 2
    assert "secret two" in dumped.stdout
    verified = run("verify", str(tmp_path / "q"), key=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    reindexed = run("reindex", str(tmp_path / "q"), key=True)
    assert reindexed.returncode == 0, reindexed.stderr
    with litemq.Queue(tmp_path / "q", read_only=True, encryption_key=KEY) as q:
        assert [m.payload for m in q.find("k2")] == [b"secret two"]
    with litemq.Queue(tmp_path / "q", encryption_key=KEY) as q:
        q.appender().roll()  # seal the file: archives take sealed files
    archived = run("archive", str(tmp_path / "q"), str(tmp_path / "arch"), "--json", key=True)
    assert archived.returncode == 0, archived.stderr
    a = litemq.open_archive(str(tmp_path / "arch"), encryption_key=KEY)
    assert a.read_arrow().column("payload").to_pylist() == [b"secret one", b"secret two"]
    assert run("archive", str(tmp_path / "q"), str(tmp_path / "a2"), key=False).returncode == 1


def test_other_readers_open_payloads(tmp_path: Path) -> None:
    bodies = [b"secret %d" % i for i in range(50)]
    with litemq.Queue(tmp_path / "q", file_size=SMALL_FILE, encryption_key=KEY) as q:
        app = q.appender()
        app.append_batch(bodies[:40])
        for b in bodies[40:]:
            app.append(b, topic="orders", priority=3)
        app.flush()
        back = q.tailer("end", direction="backward")
        assert [m.payload for m in back][:3] == bodies[::-1][:3]
        with q.tailer(name="billing") as named:
            assert [named.read_next().payload for _ in range(3)] == bodies[:3]
        assert [m.payload for m in q.tailer(topic="orders")] == bodies[40:]
        wq = q.work_queue("jobs")
        job = wq.get(timeout=1)
        assert job is not None
        assert job.payload == bodies[0]
        wq.ack(job)
        assert [bytes(m.payload) for batch in q.iter_batches(20) for m in batch] == bodies


def test_a_dead_letter_queue_is_encrypted_with_the_same_key(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size=SMALL_FILE, encryption_key=KEY) as q:
        app = q.appender()
        app.append(b"poison secret")
        app.flush()
        dlq_path = tmp_path / "dlq"
        wq = q.work_queue("dl", visibility_timeout=60, max_deliveries=1, dead_letter=str(dlq_path))
        job = wq.get(timeout=1)
        assert job is not None
        assert wq.nack(job)
        assert wq.get(timeout=0.1) is None
        assert wq.stats()["dead_lettered"] == 1
    for f in data_files(dlq_path):
        assert b"poison secret" not in f.read_bytes()
    with pytest.raises(litemq.EncryptionError):
        litemq.Queue(dlq_path, read_only=True)
    with litemq.Queue(dlq_path, read_only=True, encryption_key=KEY) as dlq:
        [msg] = list(dlq.tailer())
    assert msg.payload == b"poison secret"
