"""Every committed fixture queue (tests/fixtures/queue-v*/) is still read.

Each directory holds a queue written by one format version and a manifest
of what it holds (see tests/fixtures/make_fixture.py). A later version adds
a directory; the older ones stay, so a format change that stops reading an
older queue fails here. tests/rust/fixture.rs checks the other direction: that
the engine still writes the current version's fixture byte for byte.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import litemq
from conftest import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# By version number: "queue-v10" sorts before "queue-v9" as text, and
# DIRS[-1] is the current version's.
DIRS = sorted(FIXTURES.glob("queue-v*"), key=lambda d: int(d.name.removeprefix("queue-v")))


def _manifest(fixture: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((fixture / "manifest.json").read_text())
    return result


def _hashes(queue: Path) -> dict[str, str]:
    """sha256 of every file under ``queue``, by relative path (as the manifest lists them)."""
    return {
        p.relative_to(queue).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(queue.rglob("*"))
        if p.is_file()
    }


def _value(spec: dict[str, str] | None) -> str | bytes | None:
    """A key or header value as the manifest spells it: text or hex bytes."""
    if spec is None:
        return None
    if "text" in spec:
        return spec["text"]
    return bytes.fromhex(spec["hex"])


def _check_message(msg: litemq.Message, want: dict[str, Any]) -> None:
    assert msg.seq == want["seq"]
    assert msg.timestamp == want["timestamp"]
    assert msg.payload == bytes.fromhex(want["payload_hex"])
    key = _value(want["key"])
    assert msg.key == key
    assert type(msg.key) is type(key)  # text keys come back as str, bytes as bytes
    headers = {h["name"]: _value(h["value"]) for h in want["headers"]}
    assert msg.headers == headers
    assert [type(v) for v in msg.headers.values()] == [type(v) for v in headers.values()]
    if "topic" in want:  # format 6 and later
        fields = (msg.topic, msg.queue_id, list(msg.tags), msg.expires_at, msg.priority)
        assert fields == (
            want["topic"],
            want["queue_id"],
            want["tags"],
            want["expires_at"],
            want["priority"],
        )
        if "compression" in want:  # format 7 and later
            assert (msg.compression, msg.tombstone) == (want["compression"], want["tombstone"])
        else:
            assert (msg.compression, msg.tombstone) == (None, False)
    else:
        assert (msg.compression, msg.tombstone) == (None, False)
        assert (msg.topic, msg.queue_id, msg.tags, msg.expires_at, msg.priority) == (
            None,
            0,
            (),
            None,
            0,
        )


def test_there_is_a_fixture_for_the_current_format_version() -> None:
    versions = {int(d.name.removeprefix("queue-v")) for d in DIRS}
    assert versions, "no fixture queue committed"
    assert {_manifest(d)["format_version"] for d in DIRS} == versions
    # Each committed queue stays small (from format 8 a fixture holds three:
    # queue/, encrypted/ and compacted/).
    for d in DIRS:
        for q in [p for p in d.iterdir() if p.is_dir()]:
            assert sum(p.stat().st_size for p in q.rglob("*") if p.is_file()) < 1 << 20, q


@pytest.fixture(params=DIRS, ids=[d.name for d in DIRS])
def fixture(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


@pytest.fixture
def copy(fixture: Path, tmp_path: Path) -> Path:
    """The fixture queue copied to a temporary directory (opening it writes)."""
    dest = tmp_path / "queue"
    shutil.copytree(fixture / "queue", dest)
    return dest


def test_files_are_the_committed_bytes(fixture: Path) -> None:
    """The sha256 of every file: a fixture is frozen once committed."""
    queue = fixture / "queue"
    on_disk = _hashes(queue)
    assert on_disk == _manifest(fixture)["files"]


def _check_queue(q: litemq.Queue, manifest: dict[str, Any]) -> None:
    assert (q.first_seq, q.next_seq) == (manifest["first_seq"], manifest["next_seq"])
    messages = manifest["messages"]
    assert len(q) == len(messages)
    got = list(q.tailer())
    assert len(got) == len(messages)
    for msg, want in zip(got, messages, strict=True):
        _check_message(msg, want)
    for want in messages:
        _check_message(q.get(want["seq"]), want)
    # Seeking by sequence and by time lands on the right message.
    t = q.tailer()
    for want in reversed(messages):
        t.seek(want["seq"])
        _check_message(t.read_next(), want)
        t.seek_time(want["timestamp"])
        assert t.read_next().seq == want["seq"]
    for entry in manifest["keys"]:
        key = _value(entry["key"])
        assert key is not None
        assert [m.seq for m in q.find(key)] == entry["seqs"], key
    assert q.find("no such key") == []
    tailers = {c.name: c for c in q.consumers()}
    assert sorted(tailers) == [t["name"] for t in manifest["named_tailers"]]
    for want in manifest["named_tailers"]:
        info = tailers[want["name"]]
        assert info.next_seq == want["next_seq"]
        assert int(info.committed_at.timestamp() * 1_000_000) == want["committed_at"]
        assert int(info.created_at.timestamp() * 1_000_000) == want["created_at"]
        assert info.lag_messages == manifest["next_seq"] - max(
            want["next_seq"], manifest["first_seq"]
        )


def test_read_only(fixture: Path, copy: Path) -> None:
    manifest = _manifest(fixture)
    with litemq.Queue(copy, read_only=True, verify_on_startup=True) as q:
        _check_queue(q, manifest)
        by_seq = {m["seq"]: m for m in manifest["messages"]}
        for want in manifest["named_tailers"]:
            with q.tailer(name=want["name"]) as t:
                assert t.committed_seq == want["next_seq"]
                msg = t.read_next()
                if want["next_seq"] == manifest["next_seq"]:
                    assert msg is None
                else:
                    _check_message(msg, by_seq[want["next_seq"]])


def test_writer_opens_reads_and_appends(fixture: Path, copy: Path) -> None:
    manifest = _manifest(fixture)
    with litemq.Queue(copy, verify_on_startup=True, file_size=64 * 1024) as q:
        _check_queue(q, manifest)
        app = q.appender()
        seq = app.append(b"after the fixture", key="customer-7", headers={"h": b"\x00"})
        app.flush()
        assert seq == manifest["next_seq"]
        # A message with format-6 fields never lands in an older file: the
        # writer starts a new one, so older readers never meet its fields.
        topical = app.append(b"topical", topic="orders", tags=["x"], priority=2)
        app.flush()
        assert q.get(topical).topic == "orders"
        holder = q.data_files()[-1]
        assert holder.first_seq <= topical
        header = Path(holder.path).read_bytes()[:12]
        assert int.from_bytes(header[8:12], "little") >= 6  # the data file's version
        (custom,) = [k for k in manifest["keys"] if k["key"] == {"text": "customer-7"}]
        assert [m.seq for m in q.find("customer-7")] == [*custom["seqs"], seq]
        with q.tailer(name="billing") as t:
            billing = next(x for x in manifest["named_tailers"] if x["name"] == "billing")
            assert t.read_next().seq == billing["next_seq"]
    # Reopened: the fixture's messages and the new one.
    with litemq.Queue(copy, read_only=True) as q:
        assert q.next_seq == manifest["next_seq"] + 2
        for want in manifest["messages"]:
            _check_message(q.get(want["seq"]), want)
        assert q.get(manifest["next_seq"]).payload == b"after the fixture"
        last = q.get(manifest["next_seq"] + 1)
        assert (last.topic, last.tags, last.priority) == ("orders", ("x",), 2)


def test_cli_verify_and_info(fixture: Path, copy: Path) -> None:
    proc = cli("verify", str(copy))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = cli("info", str(copy), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    manifest = _manifest(fixture)
    assert (info["first_seq"], info["next_seq"]) == (manifest["first_seq"], manifest["next_seq"])


# Format 8 and later: `encrypted/` holds the same messages in an encrypted queue,
# sealed under the fixture key, bytes 0x00..0x1f (FIXTURE_KEY in tests/rust/fixture.rs).
FIXTURE_KEY = bytes(range(32))
ENCRYPTED = [d for d in DIRS if (d / "encrypted").is_dir()]


def test_the_current_fixture_has_an_encrypted_queue() -> None:
    assert DIRS[-1] in ENCRYPTED


@pytest.mark.parametrize("fixture_dir", ENCRYPTED, ids=[d.name for d in ENCRYPTED])
def test_encrypted_fixture(fixture_dir: Path, tmp_path: Path) -> None:
    manifest = _manifest(fixture_dir)
    assert manifest["encrypted"]["key_hex"] == FIXTURE_KEY.hex()
    committed = fixture_dir / "encrypted"
    on_disk = _hashes(committed)
    assert on_disk == manifest["encrypted"]["files"]
    copy = tmp_path / "encrypted"
    shutil.copytree(committed, copy)
    # Nothing of a payload is on disk in clear.
    data = b"".join(p.read_bytes() for p in copy.rglob("*.data"))
    for want in manifest["messages"]:
        payload = bytes.fromhex(want["payload_hex"])
        if len(payload) >= 8 and want["compression"] is None:
            assert payload not in data, want["seq"]
    with pytest.raises(litemq.EncryptionError):
        litemq.Queue(copy, read_only=True)
    with pytest.raises(litemq.WrongKeyError):
        litemq.Queue(copy, read_only=True, encryption_key=bytes(32))
    with litemq.Queue(copy, read_only=True, encryption_key=FIXTURE_KEY) as q:
        _check_queue(q, manifest)
    with litemq.Queue(copy, encryption_key=FIXTURE_KEY, file_size=64 * 1024) as q:
        _check_queue(q, manifest)
        app = q.appender()
        seq = app.append(b"after the fixture", key="customer-7")
        app.flush()
        (custom,) = [k for k in manifest["keys"] if k["key"] == {"text": "customer-7"}]
        assert [m.seq for m in q.find("customer-7")] == [*custom["seqs"], seq]
    with litemq.Queue(copy, read_only=True, encryption_key=FIXTURE_KEY) as q:
        assert q.get(seq).payload == b"after the fixture"


# Format 8 and later: `compacted/` holds the plain queue after key compaction
# (tombstones kept): the sequences in `compacted.dropped` are holes.
COMPACTED = [d for d in DIRS if (d / "compacted").is_dir()]


def test_the_current_fixture_has_a_compacted_queue() -> None:
    assert DIRS[-1] in COMPACTED


@pytest.mark.parametrize("fixture_dir", COMPACTED, ids=[d.name for d in COMPACTED])
def test_compacted_fixture(fixture_dir: Path, tmp_path: Path) -> None:
    manifest = _manifest(fixture_dir)
    committed = fixture_dir / "compacted"
    on_disk = _hashes(committed)
    assert on_disk == manifest["compacted"]["files"]
    dropped = set(manifest["compacted"]["dropped"])
    assert dropped, "the fixture's compaction dropped superseded values"
    kept = [m for m in manifest["messages"] if m["seq"] not in dropped]
    # Only superseded values go: every dropped message has a key with a later message.
    last_of_key: dict[str, int] = {}
    for m in manifest["messages"]:
        if m["key"] is not None:
            last_of_key[json.dumps(m["key"])] = m["seq"]
    for m in manifest["messages"]:
        if m["seq"] in dropped:
            assert m["key"] is not None
            assert last_of_key[json.dumps(m["key"])] > m["seq"]
    copy = tmp_path / "compacted"
    shutil.copytree(committed, copy)
    for read_only in (True, False):
        with litemq.Queue(copy, read_only=read_only, verify_on_startup=True) as q:
            assert (q.first_seq, q.next_seq) == (manifest["first_seq"], manifest["next_seq"])
            got = list(q.tailer())
            assert len(got) == len(kept)
            for msg, want in zip(got, kept, strict=True):
                _check_message(msg, want)
            for want in kept:
                _check_message(q.get(want["seq"]), want)
            for seq in dropped:
                with pytest.raises(litemq.CompactedError):
                    q.get(seq)
            backward = [m.seq for m in q.tailer(start="end", direction="backward")]
            assert backward == [m["seq"] for m in reversed(kept)]
            # Holes are not messages: len, stats and lag count what is there
            # (a file compacted by format 8 to 10 is counted by walking it).
            assert len(q) == q.stats().messages == len(kept)
            for c in q.consumers():
                at = max(c.next_seq, manifest["first_seq"])
                assert c.lag_messages == sum(1 for m in kept if m["seq"] >= at), c.name
            for entry in manifest["keys"]:
                key = _value(entry["key"])
                assert key is not None
                latest = q.get_latest(key)
                want_seq = entry["seqs"][-1]
                (want,) = [m for m in manifest["messages"] if m["seq"] == want_seq]
                if want["tombstone"]:
                    assert latest is None, key
                else:
                    assert latest is not None, key
                    assert latest.seq == want_seq, key


def test_cli_info_counts_the_compacted_fixtures_messages(tmp_path: Path) -> None:
    """`litemq info` of a compacted queue: messages are those left (issue 33)."""
    for fixture_dir in COMPACTED:
        manifest = _manifest(fixture_dir)
        copy = tmp_path / fixture_dir.name
        shutil.copytree(fixture_dir / "compacted", copy)
        proc = cli("info", str(copy), "--format", "json")
        assert proc.returncode == 0, proc.stderr
        kept = len(manifest["messages"]) - len(manifest["compacted"]["dropped"])
        assert json.loads(proc.stdout)["messages"] == kept, fixture_dir.name


def _footer_hole_seqs(data: bytes) -> int | None:
    """The footer's ``hole_seqs`` (bytes 80..88, format 11) of a sealed data file."""
    footer = data[-128:]
    if footer[:8] != b"LMQFOOT\0":
        return None
    return int.from_bytes(footer[80:88], "little")


def test_format_11_footers_count_the_holes() -> None:
    """From format 11 a compacted file's footer says how many sequences its holes
    stand for; the sealed files of the compacted fixture sum to the dropped ones."""
    for fixture_dir in COMPACTED:
        version = _manifest(fixture_dir)["format_version"]
        counts = [
            _footer_hole_seqs(p.read_bytes())
            for p in sorted((fixture_dir / "compacted").rglob("*.data"))
        ]
        sealed = [c for c in counts if c is not None]
        if version >= 11:
            dropped = _manifest(fixture_dir)["compacted"]["dropped"]
            assert sum(sealed) == len(dropped), fixture_dir.name
            assert any(c > 0 for c in sealed)
        else:
            assert set(sealed) == {0}, fixture_dir.name  # reserved: zero


# Format 9 and later: `batched/` holds plain messages and batches compressed
# together (append_batch(..., compress_together=True)).
BATCHED = [d for d in DIRS if (d / "batched").is_dir()]


def test_the_current_fixture_has_a_batched_queue() -> None:
    assert DIRS[-1] in BATCHED


def _check_batched(msg: litemq.Message, want: dict[str, Any]) -> None:
    assert (msg.seq, msg.timestamp) == (want["seq"], want["timestamp"])
    assert msg.payload == bytes.fromhex(want["payload_hex"])
    assert msg.headers == {h["name"]: _value(h["value"]) for h in want["headers"]}
    assert (msg.priority, msg.compression) == (want["priority"], want["compression"])
    # Keys and tombstones of members came with the fixture of format 9 too;
    # a manifest without them has none.
    assert msg.key == _value(want.get("key"))
    assert (msg.topic, msg.tombstone) == (None, want.get("tombstone", False))


@pytest.mark.parametrize("fixture_dir", BATCHED, ids=[d.name for d in BATCHED])
def test_batched_fixture(fixture_dir: Path, tmp_path: Path) -> None:
    batched = _manifest(fixture_dir)["batched"]
    committed = fixture_dir / "batched"
    on_disk = _hashes(committed)
    assert on_disk == batched["files"]
    messages = batched["messages"]
    copy = tmp_path / "batched"
    shutil.copytree(committed, copy)
    for read_only in (True, False):
        with litemq.Queue(copy, read_only=read_only, verify_on_startup=True) as q:
            assert q.next_seq == batched["next_seq"]
            got = list(q.tailer())
            assert len(got) == len(messages)
            for msg, want in zip(got, messages, strict=True):
                _check_batched(msg, want)
            for want in messages[::7]:
                _check_batched(q.get(want["seq"]), want)
            backward = [m.seq for m in q.tailer(start="end", direction="backward")]
            assert backward == [m["seq"] for m in reversed(messages)][: len(backward)]
            assert len(backward) == len(messages)
            table = q.read_arrow()
            assert table.column("payload").to_pylist() == [
                bytes.fromhex(m["payload_hex"]) for m in messages
            ]
            # Keyed members are found through the key index; the latest of
            # each key wins, a tombstone answering None.
            by_key: dict[str | bytes, list[dict[str, Any]]] = {}
            for m in messages:
                key = _value(m.get("key"))
                if key is not None:
                    by_key.setdefault(key, []).append(m)
            for key, keyed in by_key.items():
                assert [f.seq for f in q.find(key)] == [m["seq"] for m in keyed], key
                latest = q.get_latest(key)
                if keyed[-1]["tombstone"]:
                    assert latest is None, key
                else:
                    assert latest is not None, key
                    assert latest.seq == keyed[-1]["seq"], key
    with litemq.Queue(copy) as q:
        r = q.appender().append_batch([b"x" * 100] * 10, compress_together=True)
        assert r.start == batched["next_seq"]
    with litemq.Queue(copy, read_only=True) as q:
        assert [m.payload for m in q.tailer(r.start)] == [b"x" * 100] * 10


# Format 12 and later: `typed/` holds events of a schema (single rows and
# row batches) across an evolution to a second version.
TYPED = [d for d in DIRS if (d / "typed").is_dir()]


def test_the_current_fixture_has_a_typed_queue() -> None:
    assert DIRS[-1] in TYPED


def _typed_value(want: Any, arrow_type: Any) -> Any:
    """A value as the manifest spells it, as Python reads it back."""
    import pyarrow as pa

    if want is None:
        return None
    if pa.types.is_timestamp(arrow_type):
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=want)
    if pa.types.is_date32(arrow_type):
        return date(1970, 1, 1) + timedelta(days=want)
    if pa.types.is_decimal(arrow_type):
        return Decimal(want)
    if pa.types.is_binary(arrow_type):
        return bytes.fromhex(want["hex"])
    return want


def _typed_event(types: dict[str, Any], m: dict[str, Any]) -> dict[str, Any]:
    """A message's values as the manifest spells them, as Python reads them."""
    return {k: _typed_value(v, types[k]) for k, v in m["value"].items()}


@pytest.mark.parametrize("fixture_dir", TYPED, ids=[d.name for d in TYPED])
def test_typed_fixture(fixture_dir: Path, tmp_path: Path) -> None:
    typed = _manifest(fixture_dir)["typed"]
    committed = fixture_dir / "typed"
    on_disk = _hashes(committed)
    assert on_disk == typed["files"]
    messages = typed["messages"]
    copy = tmp_path / "typed"
    shutil.copytree(committed, copy)
    for read_only in (True, False):
        with litemq.Queue(copy, read_only=read_only, verify_on_startup=True) as q:
            schema = q.schema
            assert schema is not None
            assert [v["version"] for v in typed["schema"]["versions"]] == [1, 2]
            # The manifest's keys are sorted; the schema has its own order.
            assert schema.names == [f["name"] for f in typed["schema"]["versions"][-1]["fields"]]
            assert sorted(schema.names) == sorted(messages[0]["value"])
            types = {f.name: f.type for f in schema}
            expected = functools.partial(_typed_event, types)
            got = list(q.tailer())
            assert [(m.seq, m.timestamp) for m in got] == [
                (m["seq"], m["timestamp"]) for m in messages
            ]
            for msg, want in zip(got, messages, strict=True):
                assert msg.value == expected(want), want["seq"]
                assert msg.key == want["key"]
            for want in messages[::97]:
                assert q.get(want["seq"]).value == expected(want)
            table = q.read_arrow()
            assert table.column("seq").to_pylist() == [m["seq"] for m in messages]
            for name in schema.names:
                assert table.column(name).to_pylist() == [expected(m)[name] for m in messages], name
    with litemq.Queue(copy) as q:
        event = {**expected(messages[-1]), "venue": "XLON"}
        seq = q.appender().append(event)
        assert seq == messages[-1]["seq"] + 1
    with litemq.Queue(copy, read_only=True) as q:
        assert q.get(seq).value == event
