"""Payload compression (format 7) and tombstones, through the Python API.

What a user relies on: payloads come back as given on every read path, the
stored form is smaller only when worth it, the option is remembered, a
bomb is a CorruptedError, and a deleted key has no latest value.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest

import litemq

SMALL_FILE = 1 << 20


def events(n: int) -> bytes:
    """JSON lines with repeated field names, ids and timestamps."""
    return b"".join(
        json.dumps(
            {"event_id": i, "user": f"u{i % 17}", "kind": "page_view", "ts": 1_700_000_000 + i}
        ).encode()
        + b"\n"
        for i in range(n)
    )


def data_bytes(path: Path) -> int:
    """Bytes of frames written: what the data files hold up to their tails."""
    with litemq.Queue(path, read_only=True) as q:
        return sum(f.bytes_written for f in q.data_files())


@pytest.mark.parametrize("codec", ["zstd", "lz4", "gzip"])
def test_every_read_path_returns_the_payload(tmp_path: Path, codec: str) -> None:
    body = events(100)
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression=codec) as q:
        app = q.appender()
        a = app.append(body, key="k")
        rest = app.append_batch([body, {"payload": body[:50], "key": "j"}])
        app.flush()
        msgs = [q.get(a), q.get(rest.start), q.get(rest.start + 1)]
        assert [m.payload for m in msgs] == [body, body, body[:50]]
        assert [m.compression for m in msgs] == [codec, codec, None]  # 50 bytes < min_size
        assert [m.payload for m in q.tailer()] == [body, body, body[:50]]
        assert [m.payload for m in q.find("k")] == [body]
        # payload_view of a compressed message: a view of the decompressed copy.
        assert bytes(msgs[0].payload_view()) == body
        batch = q.read_arrow()
        assert batch.column("payload").to_pylist() == [body, body, body[:50]]
        assert pickle.loads(pickle.dumps(msgs[0])).compression == codec


def test_stored_compressed_only_when_worth_it(tmp_path: Path) -> None:
    noise = random.Random(7).randbytes(20_000)
    with litemq.Queue(
        tmp_path, file_size=SMALL_FILE, compression="zstd", compression_min_size=1000
    ) as q:
        app = q.appender()
        seqs = [
            app.append(noise),  # saves less than 5 %
            app.append(events(20)[:900]),  # below compression_min_size
            app.append(events(20)),
            app.append(events(20), compress=False),
            app.append(events(20)[:900], compress="lz4"),  # asked: min_size ignored
            app.append(events(20), compress=True),
        ]
        app.flush()
        got = [q.get(s).compression for s in seqs]
        assert got == [None, None, "zstd", None, "lz4", "zstd"]
        assert q.get(seqs[0]).payload == noise


def test_compression_shrinks_the_files(tmp_path: Path) -> None:
    body = events(50)
    for name, option in [("plain", None), ("zstd", "zstd")]:
        with litemq.Queue(tmp_path / name, file_size=SMALL_FILE, compression=option) as q:
            q.appender().append_batch([body] * 20)
    assert data_bytes(tmp_path / "zstd") * 4 < data_bytes(tmp_path / "plain")


def test_the_option_is_remembered_and_can_be_turned_off(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="gzip", compression_level=9):
        pass
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["options"]["compression"] == {"codec": "gzip", "level": 9, "min_size": 64}
    with litemq.Queue(tmp_path) as q:
        seq = q.appender().append(events(10))
        assert q.get(seq).compression == "gzip"
    with litemq.Queue(tmp_path, compression=False) as q:
        seq = q.appender().append(events(10))
        assert q.get(seq).compression is None
    with litemq.Queue(tmp_path) as q:
        seq = q.appender().append(events(10))
        assert q.get(seq).compression is None


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"compression": "brotli"}, litemq.ConfigError),
        ({"compression": True}, TypeError),
        ({"compression": "zstd", "compression_level": 23}, litemq.ConfigError),
        ({"compression": "gzip", "compression_level": -1}, litemq.ConfigError),
        ({"compression": "lz4", "compression_level": 1}, litemq.ConfigError),
        ({"compression_level": 3}, TypeError),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, options: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        litemq.Queue(tmp_path, **options)  # type: ignore[arg-type]


def test_bad_compress_argument(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE) as q:
        app = q.appender()
        with pytest.raises(ValueError, match="compress"):
            app.append(b"x", compress="snappy")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="compress"):
            app.append(b"x", compress=3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="compress"):
            app.append_batch([{"payload": b"x", "compress": "snappy"}])


def test_a_bomb_is_a_corrupted_error_not_an_allocation(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE, compression="zstd") as q:
        app = q.appender()
        app.append(bytes(8 << 20))  # 8 MiB of zeros: a few hundred bytes stored
        app.append(b"after")
    with litemq.Queue(tmp_path, read_only=True, max_decompressed_size="1MiB") as q:
        with pytest.raises(litemq.CorruptedError, match="decompression limit"):
            q.get(0)
        t = q.tailer()
        with pytest.raises(litemq.CorruptedError):
            t.read_next()
        with pytest.raises(litemq.CorruptedError):
            q.read_arrow()
    with litemq.Queue(tmp_path, read_only=True) as q:
        assert len(q.get(0).payload) == 8 << 20


def test_delete_and_get_latest(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path, file_size=SMALL_FILE) as q:
        app = q.appender()
        app.append(b"v1", key="a")
        app.append(b"w1", key=b"b")
        app.append(b"v2", key="a")
        gone = app.delete(b"b")
        latest = q.get_latest("a")
        assert latest is not None
        assert latest.payload == b"v2"
        assert q.get_latest(b"b") is None
        assert q.get_latest("nobody") is None
        tomb = q.get(gone)
        assert (tomb.tombstone, tomb.key, tomb.payload) == (True, b"b", b"")
        assert "tombstone=True" in repr(tomb)
        assert [m.tombstone for m in q.tailer()] == [False, False, False, True]
        assert pickle.loads(pickle.dumps(tomb)).tombstone
        app.append(b"w2", key=b"b")
        again = q.get_latest(b"b")
        assert again is not None
        assert again.payload == b"w2"


def test_an_archive_reads_compressed_payloads_back(tmp_path: Path) -> None:
    bodies = [events(20 + i % 5) for i in range(300)]
    with litemq.Queue(tmp_path / "q", file_size=64 * 1024, compression="zstd") as q:
        app = q.appender()
        app.append_batch(bodies)
        app.roll()
        assert q.get(0).compression == "zstd"
    litemq.archive_queue(tmp_path / "q", str(tmp_path / "archive"))
    a = litemq.open_archive(str(tmp_path / "archive"))
    assert a.read_arrow().column("payload").to_pylist() == bodies[: a.end_seq]
    assert a.read_arrow(start=5, end=9).column("payload").to_pylist() == bodies[5:9]
