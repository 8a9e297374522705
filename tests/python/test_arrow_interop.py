"""Arrow that plugs in: text keys and header values as strings, the Arrow
PyCapsule stream interface (pyarrow, polars, DuckDB read a queue directly),
the streaming `Queue.arrow_reader`, time ranges and damage skipping."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import litemq
from litemq import arrow


@pytest.fixture
def keyed(queue: litemq.Queue) -> litemq.Queue:
    app = queue.appender()
    app.append(b"plain")
    app.append(b"text", key="cust-2", headers={"region": "eu", "raw": b"\xff\x00"})
    app.append(b"bytes", key=b"\x00bin", headers={"region": "us"})
    app.flush()
    return queue


def test_text_keys_and_header_values_read_as_strings(keyed: litemq.Queue) -> None:
    batch = keyed.read_arrow(columns=["seq", "key", "key_text", "headers", "headers_text"])
    batch.validate(full=True)
    assert batch.schema.field("key_text").type == pa.string()
    assert batch.schema.field("headers_text").type == pa.map_(pa.string(), pa.string())
    # The binary columns keep every key and value as bytes...
    assert batch.column("key").to_pylist() == [None, b"cust-2", b"\x00bin"]
    # ... the text ones give what was given as str as str, and null for bytes.
    assert batch.column("key_text").to_pylist() == [None, "cust-2", None]
    assert batch.column("headers_text").to_pylist() == [
        None,
        [("region", "eu"), ("raw", None)],
        [("region", "us")],
    ]
    # As the Message does.
    assert keyed.get(1).key == "cust-2"
    assert keyed.get(2).key == b"\x00bin"
    df = keyed.to_pandas(columns=list(arrow.TEXT_FIELDS))
    assert list(df.columns) == list(arrow.TEXT_FIELDS)
    assert df["key_text"].tolist()[1] == "cust-2"


def test_text_fields_read_every_text_key_as_str(
    keyed: litemq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TEXT_FIELDS: the default columns with key_text and headers_text for key and headers.
    batch = keyed.read_arrow(columns=arrow.TEXT_FIELDS)
    assert batch.schema.names == list(arrow.TEXT_FIELDS)
    assert "key" not in batch.schema.names
    assert "key_text" in batch.schema.names
    assert batch.column("key_text").to_pylist() == [None, "cust-2", None]
    # Many reads joined into one batch keep the text columns.
    app = keyed.appender()
    for i in range(3000):
        app.append(b"x" * 40, key=f"k{i}", headers={"i": str(i)})
    app.flush()
    assert len(keyed.data_files()) > 2
    big = keyed.read_arrow(columns=["seq", "key_text", "headers_text"])
    big.validate(full=True)
    assert big.column("key_text").to_pylist()[:3] == [None, "cust-2", None]
    assert big.column("key_text").to_pylist()[3:] == [f"k{i}" for i in range(3000)]
    assert big.column("headers_text").to_pylist()[-1] == [("i", "2999")]
    # Parts read in parallel and joined keep every row's text bits.
    monkeypatch.setenv("LITEMQ_READ_THREADS", "2")
    joined = keyed.read_arrow(columns=["seq", "key_text", "headers_text"])
    joined.validate(full=True)
    assert joined.equals(big)


def test_pyarrow_polars_duckdb_read_a_queue(keyed: litemq.Queue) -> None:
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    table = pa.table(keyed)
    assert table.column("seq").to_pylist() == [0, 1, 2]
    assert table.schema.names == list(arrow.DEFAULT_FIELDS)
    # polars makes a DataFrame of a stream with pl.DataFrame (from_arrow: a struct Series).
    frame = polars.DataFrame(keyed)
    assert frame["payload"].to_list() == [b"plain", b"text", b"bytes"]
    assert polars.from_arrow(keyed).struct.unnest()["seq"].to_list() == [0, 1, 2]
    text = polars.from_arrow(keyed.arrow_reader(columns=arrow.TEXT_FIELDS))
    assert isinstance(text, polars.DataFrame)
    assert text["key_text"].to_list() == [None, "cust-2", None]
    q = keyed  # noqa: F841 - DuckDB finds the queue by its variable name
    assert duckdb.sql("select seq, payload from q where seq >= 1 order by seq").fetchall() == [
        (1, b"text"),
        (2, b"bytes"),
    ]
    reader = keyed.arrow_reader(batch_size=2, columns=["seq", "key_text"])  # noqa: F841
    assert duckdb.sql("select key_text from reader where key_text is not null").fetchall() == [
        ("cust-2",)
    ]


def test_arrow_reader_streams_in_batches(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i in range(250):
        app.append(b"p%d" % i, key=f"k{i}")
    app.flush()
    reader = queue.arrow_reader(batch_size=100, start=10, end=240, columns=["seq", "key_text"])
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["seq", "key_text"]
    sizes = []
    seqs = []
    for batch in reader:
        sizes.append(batch.num_rows)
        seqs += batch.column("seq").to_pylist()
    assert sizes == [100, 100, 30]
    assert seqs == list(range(10, 240))
    # An empty range: the schema, no batch.
    empty = queue.arrow_reader(start=300)
    assert empty.schema == arrow.schema()
    assert empty.read_all().num_rows == 0
    with pytest.raises(ValueError, match="batch_size"):
        queue.arrow_reader(batch_size=0)


def test_tailer_and_archive_export_the_stream(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=64 * 1024) as queue:
        app = queue.appender()
        for i in range(40):
            app.append(b"%d" % i * 1000, key=f"k{i}")
        app.flush()
        with queue.tailer(5) as t:
            assert pa.table(t).column("seq").to_pylist() == list(range(5, 40))
            # Reading the stream moved the tailer past what it read.
            assert t.next_seq == 40
            assert pa.table(t).num_rows == 0
            app.append(b"late")
            app.flush()
            got = arrow.tailer_reader(t, columns=("seq", "key_text")).read_all()
            assert got.column("seq").to_pylist() == [40]
        with queue.tailer(topic="orders") as t, pytest.raises(TypeError, match="arrow_reader"):
            pa.table(t)
    dest = tmp_path / "archive"
    litemq.archive_queue(qpath, dest)
    a = litemq.open_archive(dest)
    assert a.end_seq > a.first_seq
    assert pa.table(a).column("seq").to_pylist() == list(range(a.first_seq, a.end_seq))
    sizes = [b.num_rows for b in a.arrow_reader(batch_size=4)]
    assert max(sizes) == 4
    assert sum(sizes) == a.end_seq - a.first_seq


def test_read_arrow_by_time(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i in range(300):
        app.append(b"%d" % i)
        if i % 30 == 29:
            app.flush()
    app.flush()
    ts = [m.timestamp for m in queue.tailer()]
    lo, hi = ts[60], ts[200]
    want = [i for i, t in enumerate(ts) if lo <= t < hi]
    got = queue.read_arrow(start_time=lo, end_time=hi, columns=["seq"])
    assert got.column("seq").to_pylist() == want
    # A datetime as well as microseconds; with start/end the narrower bound wins.
    since = queue.get(want[-1]).datetime
    reader = queue.arrow_reader(batch_size=7, start_time=since, end=250, columns=["seq"])
    seqs = reader.read_all().column("seq").to_pylist()
    assert seqs == [i for i, t in enumerate(ts) if t >= ts[want[-1]] and i < 250]
    assert queue.read_arrow(start_time=ts[-1] + 1).num_rows == 0


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


def test_read_arrow_skips_damage_and_says_what_it_skipped(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=64 * 1024) as q:
        q.appender().append_batch([i.to_bytes(4, "little") * 25 for i in range(2000)])
        q.appender().flush()
    files = sorted(qpath.rglob("*.data"))
    assert len(files) >= 3
    # Frames of 128 bytes after a 4096-byte header: the 41st of the first
    # file and the 3rd of the last (active) one.
    _flip(files[0], 4096 + 128 * 40 + 50)
    _flip(files[-1], 4096 + 128 * 2 + 50)
    with litemq.Queue(qpath, read_only=True) as q:
        last_first = q.data_files()[-1].first_seq
        with pytest.raises(litemq.CorruptedError):
            q.read_arrow()
        # A streaming reader raises the typed error; the C stream interface
        # carries only a message, which names the file.
        with pytest.raises(litemq.CorruptedError):
            q.arrow_reader(batch_size=500).read_all()
        with pytest.raises(pa.ArrowInvalid, match=files[0].name):
            pa.table(q)
        batch = q.read_arrow(on_damage="skip", columns=["seq", "payload"])
        seqs = batch.column("seq").to_pylist()
        lost = sorted(set(range(2000)) - set(seqs))
        assert lost == [40, last_first + 2]
        assert batch.column("payload").to_pylist() == [s.to_bytes(4, "little") * 25 for s in seqs]
        report = arrow.skipped(batch)
        assert [(d.start, d.end) for d in report] == [(40, 41), (last_first + 2, last_first + 3)]
        assert [Path(d.file or "").name for d in report] == [files[0].name, files[-1].name]
        assert arrow.skipped(pa.table(batch)) == report
        # Nothing damaged in the range: an empty report, and the rows.
        clean = q.read_arrow(100, 200, on_damage="skip")
        assert clean.num_rows == 100
        assert arrow.skipped(clean) == []
        with pytest.raises(ValueError, match="on_damage"):
            q.read_arrow(on_damage="ignore")  # type: ignore[arg-type]
