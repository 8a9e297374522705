"""Bad input through the public Python API: every wrong call fails with a
clear, typed error and leaves the queue on disk unchanged (a hash of every
file is compared before and after).

Covers wrong types, out-of-range values, oversized payloads, closed queues,
read-only queues, a path that is a file, an unwritable directory, a queue
from a newer format version (metadata.json and data-file header), and
truncated or damaged headers and metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import litemq

SMALL = 64 * 1024


def tree_hash(path: Path, skip: tuple[str, ...] = (".lock",)) -> str:
    """Hash of every file's relative path and bytes under `path`."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and p.name not in skip:
            h.update(str(p.relative_to(path)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def data_hash(path: Path) -> str:
    """As `tree_hash`, without the files a writer's open rewrites by design."""
    return tree_hash(path, skip=(".lock", "metadata.json"))


@pytest.fixture
def qdir(tmp_path: Path) -> Path:
    path = tmp_path / "q"
    with litemq.Queue(path, file_size=SMALL, index_interval=4) as q:
        app = q.appender()
        for i in range(300):
            app.append(b"m%d" % i, key=f"k{i % 3}")
    return path


def crc64_xz(data: bytes) -> int:
    poly = 0xC96C5795D7870F42  # 0x42F0E1EBA9EA3693 reflected
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFFFFFFFFFF


def data_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.data"))


# -- calls on an open writer: errors, nothing written ----------------------

_Exc = type[BaseException] | tuple[type[BaseException], ...]

WRITER_CALLS: list[tuple[str, Callable[[litemq.Queue], object], _Exc]] = [
    ("append int", lambda q: q.appender().append(123), TypeError),  # type: ignore[arg-type]
    ("append str", lambda q: q.appender().append("text"), TypeError),  # type: ignore[arg-type]
    ("append None", lambda q: q.appender().append(None), TypeError),  # type: ignore[arg-type]
    ("oversized payload", lambda q: q.appender().append(b"x" * SMALL), ValueError),
    ("key too long", lambda q: q.appender().append(b"x", key=b"k" * 70000), ValueError),
    ("key wrong type", lambda q: q.appender().append(b"x", key=12), TypeError),  # type: ignore[arg-type]
    ("header name empty", lambda q: q.appender().append(b"x", headers={"": b"v"}), ValueError),
    ("header value type", lambda q: q.appender().append(b"x", headers={"a": 1}), TypeError),  # type: ignore[dict-item]
    (
        "too many headers",
        lambda q: q.appender().append(b"x", headers={f"h{i}": b"" for i in range(300)}),
        ValueError,
    ),
    ("batch of ints", lambda q: q.appender().append_batch([1, 2]), TypeError),  # type: ignore[list-item]
    ("batch with oversized", lambda q: q.appender().append_batch([b"a", b"x" * SMALL]), ValueError),
    ("get negative", lambda q: q.get(-1), (ValueError, OverflowError, IndexError)),
    ("get huge", lambda q: q.get(10**30), (ValueError, OverflowError, IndexError)),
    ("get past end", lambda q: q.get(300), litemq.NotFoundError),
    ("get str", lambda q: q.get("1"), TypeError),  # type: ignore[arg-type]
    ("tailer bad start", lambda q: q.tailer("middle"), ValueError),  # type: ignore[arg-type]
    ("tailer past end", lambda q: q.tailer(10**6), litemq.NotFoundError),
    ("seek negative", lambda q: q.tailer().seek(-5), (ValueError, OverflowError, IndexError)),
    ("seek_time str", lambda q: q.tailer().seek_time("yesterday"), TypeError),  # type: ignore[arg-type]
    ("find wrong type", lambda q: q.find(3.5), TypeError),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("name", "call", "exc"), WRITER_CALLS, ids=[c[0] for c in WRITER_CALLS])
def test_bad_call_is_typed_error_and_writes_nothing(
    qdir: Path, name: str, call: Callable[[litemq.Queue], object], exc: type[BaseException]
) -> None:
    before = data_hash(qdir)
    with litemq.Queue(qdir, file_size=SMALL, index_interval=4) as q:
        with pytest.raises(exc):
            call(q)
        # A failed call consumed no sequence and left the writer usable.
        assert q.next_seq == 300
    assert data_hash(qdir) == before, f"{name}: the queue's files changed"
    with litemq.Queue(qdir, file_size=SMALL, index_interval=4) as q:
        assert q.appender().append(b"after") == 300


def test_closed_queue_refuses_everything_and_changes_nothing(qdir: Path) -> None:
    q = litemq.Queue(qdir, file_size=SMALL, index_interval=4)
    app = q.appender()
    t = q.tailer()
    q.close()
    before = tree_hash(qdir)
    for call in (
        q.appender,
        lambda: q.tailer(),
        lambda: q.get(0),
        lambda: app.append(b"x"),
        app.flush,
        lambda: q.find("k1"),
    ):
        with pytest.raises(litemq.ClosedError):
            call()
    q.close()  # idempotent
    assert tree_hash(qdir) == before
    del t


def test_read_only_queue_refuses_writes(qdir: Path) -> None:
    before = tree_hash(qdir)
    with litemq.Queue(qdir, read_only=True) as q:
        with pytest.raises(litemq.ReadOnlyError):
            q.appender()
        assert q.get(5).payload == b"m5"
    assert tree_hash(qdir) == before


# -- opens that must fail without touching anything -------------------------


def bump_metadata_version(path: Path) -> None:
    meta = json.loads((path / "metadata.json").read_text())
    meta["format_version"] = 99
    (path / "metadata.json").write_text(json.dumps(meta, indent=2))


def bump_data_header_version(path: Path) -> None:
    f = data_files(path)[0]
    b = bytearray(f.read_bytes())
    newer = json.loads((path / "metadata.json").read_text())["format_version"] + 1
    b[8:12] = newer.to_bytes(4, "little")
    b[56:64] = crc64_xz(bytes(b[:56])).to_bytes(8, "little")
    f.write_bytes(bytes(b))


def truncate_data_header(path: Path) -> None:
    f = data_files(path)[-1]
    f.write_bytes(f.read_bytes()[:40])


def damage_data_header(path: Path) -> None:
    f = data_files(path)[0]
    b = bytearray(f.read_bytes())
    b[20] ^= 0xFF
    f.write_bytes(bytes(b))


def truncate_metadata(path: Path) -> None:
    m = path / "metadata.json"
    m.write_bytes(m.read_bytes()[:25])


def garbage_metadata(path: Path) -> None:
    (path / "metadata.json").write_bytes(b"\x00\xff not json")


BAD_OPENS: list[object] = [
    ("newer metadata version", bump_metadata_version, litemq.UnsupportedVersionError),
    ("newer data-file version", bump_data_header_version, litemq.UnsupportedVersionError),
    ("truncated data header", truncate_data_header, litemq.CorruptedError),
    ("damaged data header", damage_data_header, litemq.CorruptedError),
    ("truncated metadata.json", truncate_metadata, litemq.CorruptedError),
    ("garbage metadata.json", garbage_metadata, litemq.CorruptedError),
]


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "read-only"])
@pytest.mark.parametrize(("name", "damage", "exc"), BAD_OPENS)
def test_bad_queue_on_disk_is_refused_and_left_alone(
    qdir: Path, name: str, damage: Callable[[Path], None], exc: type[BaseException], read_only: bool
) -> None:
    damage(qdir)
    before = tree_hash(qdir)
    with pytest.raises(exc) as info:
        litemq.Queue(qdir, file_size=SMALL, index_interval=4, read_only=read_only)
    assert str(info.value), "the error says what is wrong"
    assert tree_hash(qdir) == before, f"{name}: a refused open changed the files"


def test_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_bytes(b"not a queue")
    for ro in (False, True):
        with pytest.raises(OSError):  # noqa: PT011 (NotADirectoryError or FileNotFoundError)
            litemq.Queue(f, read_only=ro)
    assert f.read_bytes() == b"not a queue"


def test_path_inside_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_bytes(b"x")
    with pytest.raises(OSError):  # noqa: PT011 (NotADirectoryError or FileNotFoundError)
        litemq.Queue(f / "q")
    assert f.read_bytes() == b"x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_directory(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(PermissionError):
            litemq.Queue(d / "q")
    finally:
        d.chmod(0o700)


def test_unwritable_queue_files_as_root_via_immutable_open(qdir: Path) -> None:
    """As root, permissions do not stop writes; a read-only open of a queue
    whose lock is held elsewhere must still work and change nothing."""
    before = data_hash(qdir)
    with litemq.Queue(qdir, file_size=SMALL, index_interval=4) as q:
        q.appender()  # the lock is taken at the first append (issue 33)
        with (
            litemq.Queue(qdir, file_size=SMALL, index_interval=4) as other,
            pytest.raises(litemq.LockedError),
        ):
            other.appender()
        with litemq.Queue(qdir, read_only=True) as r:
            assert len(r) == 300
    assert data_hash(qdir) == before


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"file_size": 1000}, ValueError),
        ({"file_size": -1}, ValueError),
        ({"file_size": object()}, TypeError),
        ({"index_interval": 0}, ValueError),
        ({"channel_capacity": 0}, ValueError),
        ({"flush": "sometimes"}, ValueError),
        ({"flush": 3}, TypeError),
        ({"read_only": "yes"}, TypeError),
        ({"key_index": {"slots": 0, "items": 1}}, ValueError),
        ({"roll": "fortnightly"}, (ValueError, TypeError)),
    ],
)
def test_bad_options_leave_an_existing_queue_alone(
    qdir: Path, kwargs: dict[str, object], exc: _Exc
) -> None:
    before = tree_hash(qdir)
    with pytest.raises(exc):
        litemq.Queue(qdir, **kwargs)  # type: ignore[arg-type]
    assert tree_hash(qdir) == before


def test_bad_options_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new"
    with pytest.raises(ValueError, match="file_size"):
        litemq.Queue(path, file_size=10)
    assert not path.exists(), "a refused open must not create the directory"
