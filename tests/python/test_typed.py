"""Typed journals (issue 35): a queue with a schema stores events as rows and
reads them back as dicts (`Message.value`) and typed Arrow columns."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import msgspec
import pyarrow as pa
import pytest

import litemq
from conftest import SMALL_FILE, cli, run_python

UTC = dt.UTC
T0 = dt.datetime(2026, 12, 2, 9, 30, tzinfo=UTC)

MARKET = pa.schema(
    [
        pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("price", pa.float64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("side", pa.int8(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
    ]
)


@dataclasses.dataclass
class Trade:
    time: dt.datetime
    symbol: str
    price: float
    size: int
    side: Annotated[int, pa.int8()]
    id: int


class TradeStruct(msgspec.Struct):
    time: dt.datetime
    symbol: str
    price: float
    size: int
    side: Annotated[int, pa.int8()]
    id: int


def trade(i: int) -> dict[str, object]:
    return {
        "time": T0 + dt.timedelta(microseconds=i),
        "symbol": ("AAPL", "MSFT", "GOOG")[i % 3],
        "price": 100.0 + i / 4,
        "size": 10 * i,
        "side": (-1, 1)[i % 2],
        "id": i,
    }


def batch(n: int, start: int = 0) -> pa.RecordBatch:
    rows = [trade(i) for i in range(start, start + n)]
    return pa.RecordBatch.from_pylist(rows, schema=MARKET)


def typed(path: Path, schema: object = MARKET, **options: object) -> litemq.Queue:
    options.setdefault("file_size", SMALL_FILE)
    return litemq.Queue(path, schema=schema, **options)


def plain_schema(q: litemq.Queue) -> list[tuple[str, pa.DataType, bool]]:
    assert q.schema is not None
    return [(f.name, f.type, f.nullable) for f in q.schema]


# -- the schema ----------------------------------------------------------------


@pytest.mark.parametrize(
    "given", [MARKET, Trade, TradeStruct], ids=["arrow", "dataclass", "msgspec"]
)
def test_each_way_to_give_a_schema_stores_it(qpath: Path, given: object) -> None:
    with typed(qpath, given) as q:
        assert plain_schema(q) == [(f.name, f.type, f.nullable) for f in MARKET]
        assert len(q.schema_versions()) == 1
    with litemq.Queue(qpath) as q:  # reopened without a schema: the stored one
        assert plain_schema(q) == [(f.name, f.type, f.nullable) for f in MARKET]
    meta = json.loads((qpath / "metadata.json").read_text())
    assert [f["name"] for f in meta["schema"]["versions"][0]["fields"]] == MARKET.names


def test_an_untyped_queue_has_no_schema_and_no_value(queue: litemq.Queue) -> None:
    queue.appender().append(b"bytes")
    assert queue.schema is None
    assert queue.schema_versions() == []
    [m] = list(queue)
    assert m.value is None
    assert queue.read_arrow().schema.names[:5] == ["seq", "timestamp", "key", "headers", "payload"]


# -- appending -----------------------------------------------------------------


def test_append_takes_a_dict_a_dataclass_and_a_struct(qpath: Path) -> None:
    with typed(qpath) as q:
        app = q.appender()
        assert app.append(trade(0)) == 0
        assert app.append(Trade(**trade(1))) == 1  # type: ignore[arg-type]
        assert app.append(TradeStruct(**trade(2))) == 2  # type: ignore[arg-type]
        assert app.append(trade(3), key="k3", headers={"src": "feed"}) == 3
        app.flush()
        msgs = list(q)
        assert [m.value for m in msgs] == [trade(i) for i in range(4)]
        assert msgs[3].key == "k3"
        assert msgs[3].headers == {"src": "feed"}
        # The payload stays the raw row: bitmap-less fixed part, then the var bytes.
        assert isinstance(msgs[0].payload, bytes)
        assert msgs[0].payload.endswith(b"AAPL")
        assert q.get(2).value == trade(2)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"size": "ten"}, r'field "size" \(int64\): expected an int, got str'),
        ({"side": 300}, r'field "side" \(int8\): out of range'),
        ({"extra": 1}, r'field "extra" is not in the queue\'s schema'),
        ({"symbol": None}, r'field "symbol" \(string\): is not nullable'),
        ({"time": dt.datetime(2026, 1, 1)}, r'field "time" \(timestamp_us\): a naive datetime'),
        ({"price": "1.5"}, r'field "price" \(float64\): expected a float'),
    ],
)
def test_a_bad_event_is_refused_by_field_name_and_nothing_stored(
    qpath: Path, change: dict[str, object], why: str
) -> None:
    with typed(qpath) as q:
        app = q.appender()
        with pytest.raises(litemq.SchemaError, match=why):
            app.append({**trade(0), **change})
        with pytest.raises(
            litemq.SchemaError, match=why.replace("field", "append_batch item 1: field")
        ):
            app.append_batch([trade(0), {**trade(1), **change}, trade(2)])
        assert app.append(trade(5)) == 0  # nothing was stored
        app.flush()
        assert [m.value for m in q] == [trade(5)]


def test_a_missing_field_is_refused(qpath: Path) -> None:
    with typed(qpath) as q:
        event = trade(0)
        del event["price"]
        with pytest.raises(litemq.SchemaError, match=r'field "price" \(float64\) is missing'):
            q.appender().append(event)
        assert len(q) == 0


def test_bytes_on_a_typed_queue_ask_for_an_event(qpath: Path) -> None:
    with typed(qpath) as q:
        with pytest.raises(litemq.SchemaError, match="stores events, not bytes"):
            q.appender().append(b"raw")
        with pytest.raises(ValueError, match="stores events"):
            q.appender().append_batch([b"raw"])


def test_append_batch_of_events_returns_their_range(qpath: Path) -> None:
    with typed(qpath) as q:
        app = q.appender()
        assert app.append_batch([trade(i) for i in range(5)]) == range(5)
        assert app.append_batch([TradeStruct(**trade(i)) for i in range(5, 7)]) == range(5, 7)  # type: ignore[arg-type]
        app.flush()
        assert [m.value for m in q] == [trade(i) for i in range(7)]
        assert q.get(6).value == trade(6)


def test_append_batch_of_a_record_batch_and_a_table(qpath: Path) -> None:
    with typed(qpath) as q:
        app = q.appender()
        assert app.append_batch(batch(1000)) == range(1000)
        table = pa.Table.from_batches([batch(3, 1000), batch(4, 1003)])
        assert app.append_batch(table) == range(1000, 1007)
        app.flush()
        got = q.read_arrow()
        assert got.schema.names == ["seq", "timestamp", *MARKET.names]
        assert got.select(MARKET.names).to_pylist() == [trade(i) for i in range(1007)]
        assert got.column("seq").to_pylist() == list(range(1007))


def test_a_record_batch_is_cast_to_the_schema_types(qpath: Path) -> None:
    with typed(qpath) as q:
        narrow = pa.RecordBatch.from_pydict(
            {
                "time": pa.array([1_000_000_000, 2_000_000_000], pa.timestamp("ns")),
                "symbol": pa.array(["A", "B"], pa.large_string()),
                "price": pa.array([1.5, 2.5], pa.float32()),
                "size": pa.array([1, 2], pa.int32()),
                "side": pa.array([1, -1], pa.int8()),
                "id": pa.array([7, 8], pa.uint16()),
            }
        )
        q.appender().append_batch(narrow)
        q.appender().flush()
        got = q.read_arrow(columns=["time", "symbol", "size", "id"]).to_pylist()
        assert got == [
            {
                "time": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
                "symbol": "A",
                "size": 1,
                "id": 7,
            },
            {
                "time": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC),
                "symbol": "B",
                "size": 2,
                "id": 8,
            },
        ]


def test_a_bad_record_batch_is_refused_by_field_and_nothing_stored(qpath: Path) -> None:
    with typed(qpath) as q:
        app = q.appender()
        extra = batch(3).append_column("venue", pa.array(["x", "y", "z"]))
        with pytest.raises(litemq.SchemaError, match="column 'venue' is not a field"):
            app.append_batch(extra)
        missing = batch(3).drop_columns(["price"])
        with pytest.raises(litemq.SchemaError, match="'price' is not nullable"):
            app.append_batch(missing)
        nulls = batch(3).set_column(3, "size", pa.array([1, None, 3], pa.int64()))
        with pytest.raises(litemq.SchemaError, match="'size' is not nullable"):
            app.append_batch(nulls)
        lossy = batch(2).set_column(3, "size", pa.array([1.5, 2.0]))
        with pytest.raises(litemq.SchemaError, match="field 'size'"):
            app.append_batch(lossy)
        assert app.append(trade(0)) == 0


def test_compress_together_compresses_row_batches(tmp_path: Path) -> None:
    sizes = {}
    for codec in ("zstd", None):
        path = tmp_path / str(codec)
        with typed(path, compression=codec, file_size=1 << 20) as q:
            app = q.appender()
            rows = [{**trade(i), "symbol": "SYMBOL-" * 8} for i in range(2000)]
            app.append_batch(rows, compress_together=codec is not None)
            app.flush()
            assert [m.value for m in q] == rows
            assert q.read_arrow(columns=["symbol"]).column(0).to_pylist() == [
                r["symbol"] for r in rows
            ]
            sizes[codec] = sum(f.bytes_written for f in q.data_files())
    assert sizes["zstd"] < sizes[None] / 2


def test_compress_together_needs_a_codec(qpath: Path) -> None:
    with typed(qpath) as q, pytest.raises(ValueError, match="compress_together needs a codec"):
        q.appender().append_batch([trade(0)], compress_together=True)


# -- reading -------------------------------------------------------------------

EVERY = pa.schema(
    [
        pa.field("flag", pa.bool_()),
        pa.field("small", pa.int16()),
        pa.field("big", pa.uint64()),
        pa.field("ratio", pa.float32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("name", pa.string()),
        pa.field("blob", pa.binary()),
    ]
)


def test_read_arrow_types_values_and_nulls(qpath: Path) -> None:
    full = {
        "flag": True,
        "small": -7,
        "big": 2**64 - 1,
        "ratio": 0.5,
        "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        "day": dt.date(2026, 12, 2),
        "amount": Decimal("-1234567890.12"),
        "name": "héllo",
        "blob": b"\x00\xff",
    }
    empty = dict.fromkeys(full)
    with typed(qpath, EVERY) as q:
        app = q.appender()
        app.append(full)
        app.append(empty)
        app.append_batch(pa.RecordBatch.from_pylist([full, empty], schema=EVERY))
        app.flush()
        got = q.read_arrow()
        assert got.schema.names == ["seq", "timestamp", *EVERY.names]
        for f in EVERY:
            assert got.schema.field(f.name).type == f.type
        assert got.select(EVERY.names).to_pylist() == [full, empty, full, empty]
        assert [m.value for m in q] == [full, empty, full, empty]
        assert got.column("amount").null_count == 2


def test_a_record_batch_of_the_schema_types_is_read_without_the_python_path(
    qpath: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RecordBatch whose columns are the schema's fields, of its types, is
    read through Arrow's C data interface: every type, nulls, a slice (its
    columns start past their buffers' first row) and large strings and
    binaries give the rows the events give, with the Python path gone."""
    rows = [
        {
            "flag": i % 3 == 0,
            "small": -i,
            "big": 2**64 - 1 - i,
            "ratio": i / 4,
            "at": dt.datetime(2026, 12, 2, 0, 0, i, tzinfo=UTC),
            "day": dt.date(2026, 1, 1 + i),
            "amount": Decimal(f"{i}.{i:02d}"),
            "name": "é" * i,
            "blob": bytes(range(i)),
        }
        if i % 4 != 1
        else dict.fromkeys(EVERY.names)
        for i in range(20)
    ]
    whole = pa.RecordBatch.from_pylist(rows, schema=EVERY)
    large = whole.cast(
        pa.schema(
            [
                f.with_type(pa.large_string() if f.name == "name" else pa.large_binary())
                if f.name in ("name", "blob")
                else f
                for f in EVERY
            ]
        )
    )
    with typed(qpath, EVERY) as q:
        app = q.appender()

        def no_python_path(*args: object) -> None:
            raise AssertionError("the batch took the Python path")

        monkeypatch.setattr(litemq._typed, "arrow_batches", no_python_path)
        app.append_batch(whole)
        app.append_batch(whole.slice(5, 11))
        app.append_batch(large.slice(3))
        app.flush()
        assert [m.value for m in q] == rows + rows[5:16] + rows[3:]
        monkeypatch.undo()
        # A column of another type still goes through the Python path, cast.
        app.append_batch(whole.set_column(1, "small", whole.column("small").cast(pa.int8())))
        app.flush()
        assert [m.value for m in q][-20:] == rows


def test_decimals_with_more_digits_than_the_scale_are_refused(qpath: Path) -> None:
    with typed(qpath, EVERY) as q:
        with pytest.raises(litemq.SchemaError, match=r'"amount".*scale 2'):
            q.appender().append({"amount": Decimal("1.234")})
        q.appender().append({"amount": Decimal("1.2")})
        q.appender().flush()
        assert [m.value["amount"] for m in q] == [Decimal("1.20")]


def test_read_arrow_columns_max_rows_and_where(qpath: Path) -> None:
    with typed(qpath) as q:
        q.appender().append_batch(batch(300))
        q.appender().flush()
        got = q.read_arrow(columns=["id", "seq"], max_rows=5, start=10)
        assert got.schema.names == ["id", "seq"]
        assert got.column("id").to_pylist() == list(range(10, 15))
        msft = q.read_arrow(where=("symbol", "=", "MSFT"), columns=["id"], max_rows=3)
        assert msft.column("id").to_pylist() == [1, 4, 7]
        big = q.read_arrow(where=("size", ">=", 2950), columns=["id"])
        assert big.column("id").to_pylist() == list(range(295, 300))
        between = q.read_arrow(where=("price", "between", (100.0, 100.5)), columns=["id"])
        assert between.column("id").to_pylist() == [0, 1, 2]
        with pytest.raises(ValueError, match="unknown column 'payload'"):
            q.read_arrow(columns=["payload"])
        with pytest.raises(ValueError, match="'nope' is not a field"):
            q.read_arrow(where=("nope", "=", 1))
        assert [b.num_rows for b in q.arrow_reader(batch_size=128)] == [128, 128, 44]


def test_where_on_a_schema_field(qpath: Path) -> None:
    with typed(qpath) as q:
        q.appender().append_batch(batch(30))
        q.appender().flush()
        found = q.where("symbol", "=", "GOOG", limit=3)
        assert [m.seq for m in found] == [2, 5, 8]
        assert [m.value["id"] for m in found] == [2, 5, 8]
        assert [m.seq for m in q.where("id", "in", [3, 29])] == [3, 29]
        assert [m.seq for m in q.where("price", "between", (105.0, 105.5))] == [20, 21, 22]
        with pytest.raises(ValueError, match=r"\"size\".*expected an int"):
            q.where("size", "=", "ten")
        with pytest.raises(ValueError, match="not a field"):
            q.where("nope", "=", 1)


def scan_where(
    rows: list[tuple[int, dict[str, object]]], field: str, op: str, value: object
) -> list[int]:
    """The sequences `where` must return, from `rows` (sequence, value)."""
    ops = {
        "=": lambda v: v == value,
        "!=": lambda v: v != value,
        "<": lambda v: v < value,
        "<=": lambda v: v <= value,
        ">": lambda v: v > value,
        ">=": lambda v: v >= value,
        "between": lambda v: value[0] <= v <= value[1],  # type: ignore[index]
        "in": lambda v: v in value,  # type: ignore[operator]
        "prefix": lambda v: v.startswith(value),
    }
    return [seq for seq, v in rows if v[field] is not None and ops[op](v[field])]


WHERE_CASES = [
    ("symbol", "=", "GOOG"),
    ("symbol", "in", ["AAPL", "NOPE"]),
    ("symbol", "prefix", "MS"),
    ("symbol", "between", ("AAPL", "GOOG")),
    ("symbol", ">=", "GOOG"),
    ("symbol", "<=", "AAPL"),
    ("symbol", "<", "GOOG"),  # strings: "<" and ">" read the rows
    ("symbol", "!=", "MSFT"),
    ("size", "=", 120),
    ("size", "in", [0, 50, 130, 2**63 - 1]),
    ("size", "between", (995, 1_030)),
    ("size", ">", 79_960),
    ("size", "<", 30),
    ("size", ">=", -(2**63)),
    ("size", "<", -(2**63)),  # below every key: nothing
    ("size", "<=", -1),
    ("side", "=", -1),
    ("time", "<", T0 + dt.timedelta(microseconds=3)),
]


def test_an_index_on_a_schema_field_answers_where(qpath: Path) -> None:
    # An index named like a schema field indexes the field's values; where()
    # answers sealed files from their index files, and exactly as a scan.
    with typed(qpath, indexes={"symbol": "str"}) as q:
        app = q.appender()
        for k in range(8):
            app.append_batch(batch(1_000, start=1_000 * k))
        app.flush()
        rows = [(m.seq, m.value) for m in q]
        assert q.add_index("size") > 1  # type from the field: int
        q.add_index("side")
        q.add_index("time")
        assert q.indexes == {"symbol": "str", "size": "int", "side": "int", "time": "int"}
        sealed = len(q.data_files()) - 1
        assert sealed > 1
        states = q._check_indexes()
        assert len(states) == 4 * sealed
        assert {s["state"] for s in states} == {"ok"}
        for field, op, value in WHERE_CASES:
            got = [m.seq for m in q.where(field, op, value)]
            assert got == scan_where(rows, field, op, value), (field, op, value)
        tomorrow = dt.datetime.now(UTC) + dt.timedelta(days=1)
        assert q.where("size", ">=", 0, start=tomorrow) == []
        assert len(q.where("symbol", "=", "AAPL", limit=4)) == 4
        # The index files are what answer: without them (deleted), the same.
        for s in states:
            Path(s["file"]).unlink()
        assert {s["state"] for s in q._check_indexes()} == {"missing"}
        for field, op, value in WHERE_CASES[:3]:
            assert [m.seq for m in q.where(field, op, value)] == scan_where(rows, field, op, value)
        # The active file is indexed in memory as rows come, and afresh
        # once it is sealed and another one is active.
        for more in (batch(700, start=8_000), batch(50, start=8_700)):
            app.append_batch(more)
            app.flush()
            rows = [(m.seq, m.value) for m in q]
            for field, op, value in WHERE_CASES:
                got = [m.seq for m in q.where(field, op, value)]
                assert got == scan_where(rows, field, op, value), (field, op, value)
            app.roll()
    # Remembered; declaring one again builds what is missing.
    with typed(qpath) as q:
        assert q.indexes == {"symbol": "str", "size": "int", "side": "int", "time": "int"}
        sealed = len(q.data_files()) - 1
        assert q.add_index("symbol") == sealed
    with typed(qpath, read_only=True) as q:
        assert [s["state"] for s in q._check_indexes() if s["field"] == "symbol"] == ["ok"] * sealed


def test_read_arrow_where_reads_only_the_rows_an_index_lists(
    qpath: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With an index on the field, a selective `where` reads only the rows the
    # index lists; the rows are those a read and filter of the range gives.
    read_at: list[int] = []

    def spy(q: litemq.Queue, seqs: list[int], fields: list[str]) -> dict[str, object]:
        read_at.append(len(seqs))
        return litemq._litemq.Queue._read_typed_seqs(q, seqs, fields)

    monkeypatch.setattr(litemq.Queue, "_read_typed_seqs", spy)
    cases: list[tuple[tuple[str, str, object], dict[str, object], bool]] = [
        (("id", "in", [3, 4_000, 7_999]), {}, True),
        (("size", "between", (100, 300)), {"columns": ["id", "symbol"]}, True),
        (("symbol", "prefix", "MS"), {}, False),  # a third of the rows: read and filtered
        (("id", ">=", 7_990), {"max_rows": 4}, True),
        (("symbol", "<", "B"), {}, False),  # "<" on strings: not through the index
        (("id", "=", -1), {"columns": ["seq"]}, True),
    ]
    with typed(qpath) as q:
        app = q.appender()
        for k in range(8):
            app.append_batch(batch(1_000, start=1_000 * k))
        app.flush()
        want = [q.read_arrow(where=w, **kw) for w, kw, _ in cases]
        assert read_at == []
        q.add_index("id")
        q.add_index("size")
        q.add_index("symbol")
        for (w, kw, indexed), expected in zip(cases, want, strict=True):
            read_at.clear()
            got = q.read_arrow(where=w, **kw)
            assert got.equals(expected), w
            assert bool(read_at) == (indexed and expected.num_rows > 0), w
        assert want[0].column("id").to_pylist() == [3, 4_000, 7_999]


def test_an_index_on_a_schema_field_reads_row_batches(qpath: Path) -> None:
    # Rows compressed together are indexed too (a header index refuses
    # them), by the writer's builder as files are sealed.
    with typed(qpath, compression="lz4", indexes={"symbol": "str"}, file_size=1 << 18) as q:
        app = q.appender()
        for k in range(12):
            app.append_batch(batch(1_000, start=1_000 * k), compress_together=True)
        app.roll()
        sealed = len(q.data_files()) - 1
        assert sealed > 1
        assert q.add_index("id") == sealed
    # Closing lets the builder finish the files handed to it.
    with typed(qpath, read_only=True) as q:
        assert [s["state"] for s in q._check_indexes()] == ["ok"] * 2 * sealed
        assert [m.seq for m in q.where("id", "in", [7, 4_321, 11_999])] == [7, 4_321, 11_999]
        assert [m.seq for m in q.where("symbol", "=", "MSFT")] == list(range(1, 12_000, 3))


def test_an_index_on_a_schema_field_takes_the_fields_type(qpath: Path) -> None:
    with pytest.raises(litemq.SchemaError, match=r'"size" \(int64\) is indexed as "int"'):
        litemq.Queue(qpath, schema=MARKET, indexes={"size": "str"})
    assert not qpath.exists()  # refused before anything was created
    with typed(qpath) as q:
        with pytest.raises(litemq.SchemaError, match=r'"symbol" \(string\) is indexed as "str"'):
            q.add_index("symbol", "int")
        with pytest.raises(litemq.SchemaError, match="float64, and float, decimal and uint64"):
            q.add_index("price")
        assert q.indexes == {}
        # An encrypted queue keeps its rows sealed: no index of their values.
        key = bytes(range(32))
        with pytest.raises(ValueError, match=r"encrypted.*in clear"):
            typed(qpath.parent / "sealed", encryption_key=key, indexes={"symbol": "str"})
        with typed(qpath.parent / "sealed", encryption_key=key) as sealed:
            with pytest.raises(ValueError, match=r"encrypted.*in clear"):
                sealed.add_index("symbol")
            assert sealed.indexes == {}
        # A header index of another name is still a header index.
        q.add_index("venue")
        q.appender().append(trade(0), headers={"venue": "X"})
        q.appender().flush()
        assert [m.seq for m in q.where("venue", "=", "X")] == [0]


def test_a_field_added_with_a_header_indexs_name_takes_the_index(qpath: Path) -> None:
    # An evolution can add a field named like a header index declared
    # before: the index then indexes the field (the header-built index
    # files are refused by their source byte and rebuilt from the rows).
    with typed(qpath, indexes={"venue": "str"}) as q:
        app = q.appender()
        app.append(trade(0), headers={"venue": "X"})
        app.roll()
        app.append(trade(1), headers={"venue": "X"})
        app.flush()
    later = MARKET.append(pa.field("venue", pa.string()))
    with typed(qpath, later) as q:
        app = q.appender()
        app.append({**trade(2), "venue": "X"})
        app.roll()
        app.append({**trade(3), "venue": "Y"})
        app.flush()
        assert q.where("venue", "=", "X") == [q.get(2)]  # the old rows: null
        q.add_index("venue")
        assert {s["state"] for s in q._check_indexes()} == {"ok"}
        assert [m.seq for m in q.where("venue", "in", ["X", "Y"])] == [2, 3]
    # Dropping an indexed field is refused until the index is dropped.
    without = later.remove(later.get_field_index("side"))
    with typed(qpath, later) as q:
        q.add_index("side")
    with pytest.raises(litemq.SchemaError, match='drops the field "side", which has an index'):
        typed(qpath, without)
    with typed(qpath, later) as q:
        q.drop_index("side")
    with typed(qpath, without) as q:
        assert "side" not in q.schema.names
        assert [m.seq for m in q.where("venue", "=", "Y")] == [3]
    wrong = MARKET.append(pa.field("venue", pa.int32()))
    with typed(qpath.parent / "other", indexes={"venue": "str"}) as q:
        q.appender().append(trade(0), headers={"venue": "X"})
    with pytest.raises(litemq.SchemaError, match='"venue" is declared as "str"'):
        typed(qpath.parent / "other", wrong)


# -- evolution ------------------------------------------------------------------


def test_evolution_adds_widens_and_renames(qpath: Path) -> None:
    v1 = pa.schema(
        [
            pa.field("sym", pa.string(), nullable=False),
            pa.field("size", pa.int32(), nullable=False),
        ]
    )
    v2 = pa.schema(
        [
            pa.field("sym", pa.string(), nullable=False),
            pa.field("qty", pa.int64(), nullable=False, metadata={b"aliases": b"size"}),
            pa.field("venue", pa.string()),
        ]
    )
    with typed(qpath, v1) as q:
        q.appender().append({"sym": "A", "size": 2**31 - 1})
    with typed(qpath, v2) as q:
        assert [s.metadata[b"litemq.version"] for s in q.schema_versions()] == [b"1", b"2"]
        assert q.schema is not None
        assert q.schema.names == ["sym", "qty", "venue"]
        q.appender().append({"sym": "B", "qty": 2**40, "venue": "XNYS"})
        q.appender().flush()
        want = [
            {"sym": "A", "qty": 2**31 - 1, "venue": None},
            {"sym": "B", "qty": 2**40, "venue": "XNYS"},
        ]
        assert [m.value for m in q] == want
        got = q.read_arrow()
        assert got.schema.field("qty").type == pa.int64()
        assert got.select(["sym", "qty", "venue"]).to_pylist() == want
    with litemq.Queue(qpath) as q:  # reopened without a schema: version 2
        assert [m.value for m in q] == want
        q.appender().roll()  # both files sealed: both archived
        whole = q.read_arrow()
    # An archive reads each file in its version, shown in the newest, as the queue does.
    archive = qpath.parent / "archive"
    litemq.archive_queue(qpath, archive)
    a = litemq.open_archive(archive)
    assert a.read_arrow().equals(whole)
    assert a.read_arrow(columns=["qty", "seq"]).to_pylist() == [
        {"qty": 2**31 - 1, "seq": 0},
        {"qty": 2**40, "seq": 1},
    ]
    reader = a.arrow_reader(batch_size=1)
    assert reader.schema == whole.schema
    assert pa.Table.from_batches(list(reader)).combine_chunks().to_batches()[0].equals(whole)
    empty = a.read_arrow(start=1, end=1)
    assert (empty.num_rows, empty.schema) == (0, whole.schema)


def test_an_incompatible_schema_is_refused_with_why(qpath: Path) -> None:
    with typed(qpath, MARKET) as q:
        q.appender().append(trade(0))
    narrowed = MARKET.set(3, pa.field("size", pa.int8(), nullable=False))
    with pytest.raises(litemq.SchemaError, match=r'"size" changes type from int64 to int8'):
        typed(qpath, narrowed)
    required = MARKET.append(pa.field("venue", pa.string(), nullable=False))
    with pytest.raises(litemq.SchemaError, match=r'"venue" is new and not nullable'):
        typed(qpath, required)
    with litemq.Queue(qpath) as q:
        assert len(q.schema_versions()) == 1
        assert [m.value for m in q] == [trade(0)]


# -- the CLI ---------------------------------------------------------------------


def test_litemq_info_shows_the_schema_and_its_versions(qpath: Path) -> None:
    with typed(qpath, MARKET) as q:
        q.appender().append(trade(0))
    with typed(qpath, MARKET.append(pa.field("venue", pa.string()))):
        pass
    proc = cli("info", str(qpath))
    assert proc.returncode == 0, proc.stderr
    assert "schema" in proc.stdout
    assert "version 2: time timestamp_us, symbol string" in proc.stdout
    assert "venue string?" in proc.stdout
    proc = cli("info", str(qpath), "--format", "json")
    info = json.loads(proc.stdout)
    versions = info["schema"]["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[1]["fields"][-1] == {
        "name": "venue",
        "type": "string",
        "nullable": True,
        "aliases": [],
    }


def test_an_encrypted_typed_queue_takes_batches_one_record_each(qpath: Path) -> None:
    with typed(qpath, encryption_key=b"k" * 32) as q:
        app = q.appender()
        assert app.append_batch([trade(0), trade(1)]) == range(2)
        assert app.append_batch(batch(3, 2)) == range(2, 5)
        app.flush()
        assert [m.value for m in q] == [trade(i) for i in range(5)]
        assert q.read_arrow(columns=["id"]).column("id").to_pylist() == list(range(5))
    raw = b"".join(p.read_bytes() for p in qpath.rglob("*.data"))
    assert b"AAPL" not in raw  # sealed: the rows are not in clear


def test_a_handle_opened_before_an_evolution_reads_the_new_version(qpath: Path) -> None:
    v1 = pa.schema([pa.field("sym", pa.string(), nullable=False)])
    with typed(qpath, v1) as q:
        q.appender().append({"sym": "A"})
    with litemq.Queue(qpath, read_only=True) as reader:
        assert [m.value for m in reader] == [{"sym": "A"}]
        # Another process evolves the schema and appends an event of version 2.
        run_python(
            """
            import sys, pyarrow as pa, litemq
            v2 = pa.schema([pa.field("sym", pa.string(), nullable=False),
                            pa.field("venue", pa.string())])
            with litemq.Queue(sys.argv[1], schema=v2) as q:
                q.appender().append({"sym": "B", "venue": "X"})
            """,
            str(qpath),
        )
        # This handle's schema is version 1: the new message shows its own fields.
        assert [m.value for m in reader] == [{"sym": "A"}, {"sym": "B", "venue": "X"}]


def test_value_needs_the_queue_open_in_this_process(qpath: Path) -> None:
    with typed(qpath) as q:
        q.appender().append(trade(0))
        q.appender().flush()
        [m] = list(q)
    del q
    import gc

    gc.collect()
    with pytest.raises(litemq.SchemaError, match="no handle in this process has open"):
        _ = m.value
