"""`read_arrow` and topics (issue 17) and stored bytes (issue 20): the topic,
queue_id, tags, priority and expires_at columns hold what each message
carries; a topic filter returns exactly the rows a full read filtered in
pyarrow returns, reading only that topic's frames; ``raw=True`` gives the
payload as stored with its codec and decompressed size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import litemq
from conftest import SMALL_FILE

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

N = 1500
#: Messages before the first one with a topic: the first files hold no topic at all.
PLAIN_PREFIX = 400
EXPIRES = 4_000_000_000_000_000  # µs: far in the future


def _shape(i: int) -> dict[str, Any]:
    """The fields message i is appended with."""
    if i < PLAIN_PREFIX:
        return {"priority": i % 3} if i % 7 == 0 else {}
    if i % 10 == 0:
        return {"topic": "orders", "tags": ["paid", "eu"], "key": f"k{i}"}
    if i % 10 == 1:
        return {"topic": "orders", "queue_id": 1, "tags": ["refund"], "priority": 5}
    if i % 10 == 2:
        return {"topic": "orders-eu", "tags": ["paid"]}  # "orders" is a prefix of it
    if i % 10 == 3:
        return {"tags": ["paid"], "expires_at": EXPIRES + i}
    if i % 10 == 4:
        return {"topic": "audit", "queue_id": 3}
    return {}


def _payload(i: int) -> bytes:
    # Every 9th payload repeats enough to be worth compressing.
    return (b"order %d " % i) * (40 if i % 9 == 0 else 1)


def _fill(q: litemq.Queue, start: int, stop: int) -> None:
    app = q.appender()
    for i in range(start, stop):
        s = _shape(i)
        compress = ("zstd", "lz4", "gzip")[(i // 9) % 3] if i % 9 == 0 else False
        assert app.append(_payload(i), compress=compress, **s) == i
    app.flush()


@pytest.fixture
def filled(qpath: Path) -> Path:
    """N messages in sealed files (topic indexes built) and an active file."""
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 200}) as q:
        _fill(q, 0, N)
        assert len(q.data_files()) >= 7
    assert list(qpath.rglob("*.topics"))
    return qpath


def test_the_topic_columns_hold_each_messages_fields(filled: Path) -> None:
    with litemq.Queue(filled, read_only=True) as q:
        b = q.read_arrow()
        assert b.schema.names == [
            "seq",
            "timestamp",
            "key",
            "headers",
            "payload",
            "topic",
            "queue_id",
            "tags",
            "priority",
            "expires_at",
        ]
        assert b.schema.field("topic").type == pa.string()
        assert b.schema.field("tags").type == pa.list_(pa.string())
        rows = b.to_pylist()
        assert len(rows) == N
        exp = b.column("expires_at").cast(pa.int64()).to_pylist()
        for i, (r, m) in enumerate(zip(rows, q.tailer(start=0), strict=True)):
            assert r["seq"] == m.seq == i
            assert r["payload"] == m.payload == _payload(i)
            assert r["topic"] == m.topic == _shape(i).get("topic")
            assert r["queue_id"] == m.queue_id == _shape(i).get("queue_id", 0)
            assert r["tags"] == list(m.tags) == _shape(i).get("tags", [])
            assert r["priority"] == m.priority == _shape(i).get("priority", 0)
            assert exp[i] == m.expires_at == _shape(i).get("expires_at")
        # Picked columns, in the order asked; the others are not built.
        some = q.read_arrow(10, 20, columns=["tags", "seq", "topic"])
        assert some.schema.names == ["tags", "seq", "topic"]
        assert some.to_pylist() == [
            {"tags": r["tags"], "seq": r["seq"], "topic": r["topic"]} for r in rows[10:20]
        ]
        with pytest.raises(ValueError, match="unknown column 'topics'"):
            q.read_arrow(columns=["topics"])


SELECTORS: list[dict[str, Any]] = [
    {"topic": "orders"},
    {"topic": "orders", "tags": {"paid"}},
    {"topic": "orders", "tags": ["refund", "eu"]},
    {"topic": "orders", "queue_id": 1},
    {"topic": "audit", "queue_id": 3},
    {"topic": "orders-eu"},
    {"topic": "nothing"},
    {"tags": ["paid"]},
]


def _expected(full: pa.RecordBatch, sel: dict[str, Any]) -> pa.RecordBatch:
    """What filtering a full read in pyarrow keeps for a selector."""
    mask = pa.array([True] * full.num_rows)
    if "topic" in sel:
        mask = pc.and_(mask, pc.fill_null(pc.equal(full.column("topic"), sel["topic"]), False))
    if "queue_id" in sel:
        mask = pc.and_(mask, pc.equal(full.column("queue_id"), sel["queue_id"]))
    if "tags" in sel:
        wanted = set(sel["tags"])
        mask = pc.and_(
            mask, pa.array([bool(wanted & set(t)) for t in full.column("tags").to_pylist()])
        )
    return full.filter(mask)


@pytest.mark.parametrize("sel", SELECTORS, ids=lambda s: repr(s))
def test_a_topic_filter_equals_filtering_a_full_read(filled: Path, sel: dict[str, Any]) -> None:
    with litemq.Queue(filled, read_only=True) as q:
        full = q.read_arrow()
        want = _expected(full, sel)
        got = q.read_arrow(**sel)
        assert got.schema == full.schema
        assert got.to_pylist() == want.to_pylist()
        # Windows and max_rows count the rows kept.
        for start, end, max_rows in [(0, 390, None), (395, 1013, None), (777, None, 7)]:
            w = _expected(q.read_arrow(start, end), sel)
            if max_rows is not None:
                w = w.slice(0, max_rows)
            g = q.read_arrow(start, end, max_rows, ["seq", "payload"], **sel)
            assert g.to_pylist() == w.select(["seq", "payload"]).to_pylist()


def test_a_topic_filter_reads_the_active_file_and_missing_indexes(filled: Path) -> None:
    # An index removed (or not built yet) means reading the file frame by frame: same rows.
    for ix in filled.rglob("*.topics"):
        ix.unlink()
        break
    with litemq.Queue(filled) as q:
        _fill(q, N, N + 150)  # into the active file, not indexed yet
        full = q.read_arrow()
        for sel in SELECTORS:
            assert q.read_arrow(**sel).to_pylist() == _expected(full, sel).to_pylist()


def _corrupt_payload(m: litemq.Message) -> None:
    pos = m.position
    assert pos is not None
    path, offset = pos
    with open(path, "r+b") as f:
        f.seek(offset + 24)  # inside the record, past the length word
        byte = f.read(1)
        f.seek(offset + 24)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_topic_filter_reads_only_that_topics_frames(filled: Path) -> None:
    """Damage in frames of no topic, or of another topic, in sealed files is never read
    by a topic filter (the footer says a file has no topic, the topic index lists the
    frames to read), while a full read finds it."""
    with litemq.Queue(filled, read_only=True) as q:
        want = q.read_arrow(topic="orders").to_pylist()
        victims = [q.get(5), q.get(PLAIN_PREFIX + 4), q.get(PLAIN_PREFIX + 205)]
    assert _shape(5) == {}  # in a file without topics
    assert _shape(PLAIN_PREFIX + 4)["topic"] == "audit"  # another topic, indexed file
    assert "topic" not in _shape(PLAIN_PREFIX + 205)  # no topic, indexed file
    for m in victims:
        _corrupt_payload(m)
    with litemq.Queue(filled, read_only=True) as q:
        with pytest.raises(litemq.CorruptedError):
            q.read_arrow()
        assert q.read_arrow(topic="orders").to_pylist() == want


def test_bad_topic_arguments_are_typed_errors(filled: Path) -> None:
    with litemq.Queue(filled, read_only=True) as q:
        with pytest.raises(TypeError, match="not a single str"):
            q.read_arrow(topic="orders", tags="paid")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="queue_id needs a topic"):
            q.read_arrow(queue_id=1)
        with pytest.raises(ValueError, match="1 to 255 bytes"):
            q.read_arrow(topic="")
        with pytest.raises(TypeError, match="raw must be a bool"):
            q.read_arrow(raw=1)  # type: ignore[arg-type]


def test_raw_gives_the_stored_bytes_codec_and_size(filled: Path) -> None:
    with litemq.Queue(filled, read_only=True) as q:
        plain = q.read_arrow()
        raw = q.read_arrow(raw=True)
        assert raw.schema.names == [*plain.schema.names, "codec", "raw_len"]
        kinds = set()
        for i, (p, r) in enumerate(zip(plain.to_pylist(), raw.to_pylist(), strict=True)):
            codec = q.get(i).compression
            assert r["codec"] == codec
            assert r["raw_len"] == len(p["payload"]) == len(_payload(i))
            if codec is None:
                assert r["payload"] == p["payload"]
            else:
                kinds.add(codec)
                assert len(r["payload"]) < len(p["payload"])
                # What is on disk is that codec's stream of the payload.
                name = {"zstd": "zstd", "gzip": "gzip", "lz4": "lz4_raw"}[codec]
                back = pa.decompress(r["payload"], r["raw_len"], codec=name, asbytes=True)
                assert back == p["payload"]
        assert kinds == {"zstd", "lz4", "gzip"}
        # Without raw the codec columns can still be asked for; payloads stay decompressed.
        c = q.read_arrow(0, 20, columns=["seq", "codec", "raw_len", "payload"])
        assert c.column("payload").to_pylist() == [_payload(i) for i in range(20)]
        assert c.column("codec").to_pylist()[:10] == ["zstd"] + [None] * 8 + ["lz4"]
        # Raw and a topic filter together.
        t = q.read_arrow(topic="orders", raw=True, columns=["seq", "payload", "codec"])
        assert (
            t.to_pylist() == _expected(raw, {"topic": "orders"}).select(t.schema.names).to_pylist()
        )


def test_to_pandas_takes_the_same_filter(filled: Path) -> None:
    pytest.importorskip("pandas")
    with litemq.Queue(filled, read_only=True) as q:
        df = q.to_pandas(topic="audit", columns=["seq", "topic", "queue_id"])
        assert df["seq"].tolist() == [i for i in range(N) if _shape(i).get("topic") == "audit"]
        assert set(df["topic"]) == {"audit"}
        assert set(df["queue_id"]) == {3}
