"""Typed journals through the JVM reader: a typed queue's DataFrame is ``seq``, ``timestamp`` and
one column per schema field, read in the JVM straight from the rows (docs/SPARK.md, "Typed
queues in the JVM reader"), with the same values as Rust's ``read_arrow``.

One Spark session with the jar on its classpath: ``format("litemq")`` is the JVM reader there
(each test checks the plan names it). Marked ``jvm``: ``make py-test`` runs it in its JVM pass.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")

import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = [*SPARK_MARKS, pytest.mark.jvm]

JVM = "litemq (JVM reader)"
#: Small data files: a few hundred rows roll a file, so every read crosses files.
FILE_SIZE = 64 << 10

#: Every field type of FORMAT.md's table, nullable and not.
EVERY = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("flag", pa.bool_()),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("u8", pa.uint8()),
        pa.field("u16", pa.uint16()),
        pa.field("u32", pa.uint32()),
        pa.field("u64", pa.uint64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("big", pa.decimal128(38, 6)),
        pa.field("name", pa.string()),
        pa.field("blob", pa.binary()),
        pa.field("tag", pa.string(), nullable=False),
    ]
)

#: The Spark type of each field type (docs/SPARK.md): unsigned integers in the next wider
#: signed type, uint64 as decimal(20,0).
SPARK_TYPES = {
    "id": "bigint",
    "flag": "boolean",
    "i8": "tinyint",
    "i16": "smallint",
    "i32": "int",
    "u8": "smallint",
    "u16": "int",
    "u32": "bigint",
    "u64": "decimal(20,0)",
    "f32": "float",
    "f64": "double",
    "ts": "timestamp",
    "day": "date",
    "amount": "decimal(12,2)",
    "big": "decimal(38,6)",
    "name": "string",
    "blob": "binary",
    "tag": "string",
}

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def every_row(i: int) -> dict[str, Any]:
    """Row ``i``: extremes of each type, text beyond ASCII, and every nullable field null in
    every seventh row."""
    if i % 7 == 3:
        row: dict[str, Any] = {f.name: None for f in EVERY}
        row.update(id=i, tag=f"t{i}")
        return row
    sign = -1 if i % 2 else 1
    return {
        "id": i,
        "flag": i % 3 == 0,
        "i8": [-128, 127, 5][i % 3],
        "i16": sign * (i * 7 % 32768),
        "i32": [-(2**31), 2**31 - 1, sign * i][i % 3],
        "u8": [0, 255, i % 256][i % 3],
        "u16": [0, 65535, i][i % 3],
        "u32": [0, 2**32 - 1, i][i % 3],
        "u64": [0, 2**64 - 1, 2**63 + i][i % 3],
        "f32": [1.5, -0.25, float(i)][i % 3],
        "f64": [math.pi, -1e300, i / 3][i % 3],
        "ts": EPOCH + dt.timedelta(microseconds=1_700_000_000_000_000 + sign * i * 1_000_003),
        "day": dt.date(2024, 2, 29) + dt.timedelta(days=sign * i),
        "amount": decimal.Decimal(sign * i * 101) / 100,
        "big": decimal.Decimal(f"{sign}{i}12345678901234567890123456.123456"),
        "name": ["", "zürich ✓", f"name-{i}"][i % 3],
        "blob": [b"", b"\x00\xff", bytes([i % 256]) * (i % 5)][i % 3],
        "tag": f"t{i}",
    }


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-typed-jvm", reader="jvm")


def plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def spark_values(df: Any, names: list[str]) -> list[tuple[Any, ...]]:
    """Columns ``names`` of ``df``, rows sorted, timestamps as µs, dates as days, uint64 as
    int."""
    cols = []
    for f in (df.schema[n] for n in names):
        t = f.dataType.simpleString()
        if t == "timestamp":
            cols.append(f"unix_micros(`{f.name}`) AS `{f.name}`")
        elif t == "date":
            cols.append(f"unix_date(`{f.name}`) AS `{f.name}`")
        else:
            cols.append(f"`{f.name}`")
    rows = df.selectExpr(*cols).collect()
    return sorted((tuple(normal(v) for v in r) for r in rows), key=repr)


def arrow_values(table: Any, names: list[str]) -> list[tuple[Any, ...]]:
    """The same of a pyarrow table (Rust's ``read_arrow``)."""
    cols = []
    for n in names:
        c = table.column(n)
        if pa.types.is_timestamp(c.type):
            c = c.cast(pa.int64())
        elif pa.types.is_date32(c.type):
            c = c.cast(pa.int32())
        cols.append(c.to_pylist())
    return sorted((tuple(normal(v) for v in r) for r in zip(*cols, strict=True)), key=repr)


def normal(v: Any) -> Any:
    """A value comparable across the two sides: decimals of scale 0 as int, NaN as a tag."""
    if isinstance(v, decimal.Decimal) and v == v.to_integral_value() and v.as_tuple().exponent == 0:
        return int(v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def fill_every(path: Path, n: int) -> None:
    """``n`` rows of EVERY: single events (plain records, zstd where it saves), a RecordBatch
    (stored row batches) and a Table compressed together (compressed row batches), over
    several files."""
    rows = [every_row(i) for i in range(n)]
    third = n // 3
    with litemq.Queue(
        str(path), schema=EVERY, file_size=FILE_SIZE, compression="zstd", roll="count:250"
    ) as q:
        app = q.appender()
        for r in rows[:third]:
            app.append(r)
        app.append_batch(pa.RecordBatch.from_pylist(rows[third : 2 * third], schema=EVERY))
        app.append_batch(
            pa.Table.from_pylist(rows[2 * third :], schema=EVERY), compress_together=True
        )
        app.flush()


def test_every_type_reads_as_rusts_read_arrow(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "every"
    fill_every(q, 900)
    files = list(q.glob("[0-9][0-9][0-9][0-9]/*/*/*.data"))
    assert len(files) > 2, "the rows span several data files"
    df = spark.read.format("litemq").load(str(q))
    assert JVM in plan(df)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("seq", "bigint"),
        ("timestamp", "timestamp"),
        ("queue", "string"),
        *SPARK_TYPES.items(),
    ]
    assert [f.nullable for f in df.schema.fields[3:]] == [f.nullable for f in EVERY]
    names = ["seq", "timestamp", *EVERY.names]
    with litemq.Queue(str(q), read_only=True) as r:
        want = arrow_values(r.read_arrow(), names)
    got = spark_values(df, names)
    assert len(got) == 900
    assert got == want
    # Values written are values read (not only Rust and the JVM agreeing).
    by_id = {row[2]: row for row in got}
    assert by_id[1][2 + EVERY.names.index("u64")] == 2**64 - 1
    assert by_id[3][3:-1] == (None,) * (len(EVERY) - 2)
    assert by_id[4][2 + EVERY.names.index("name")] == "zürich ✓"


def test_column_pruning_reads_only_the_columns_named(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "every"
    fill_every(q, 300)
    df = spark.read.format("litemq").load(str(q)).select("u32", "name", "seq")
    text = plan(df)
    assert JVM in text
    scan = next(line for line in text.splitlines() if "BatchScan" in line)
    for name in ("u32", "name", "seq"):
        assert name in scan, scan
    for name in ("amount", "blob", "i8"):
        assert name not in scan, scan
    with litemq.Queue(str(q), read_only=True) as r:
        want = arrow_values(r.read_arrow(), ["u32", "name", "seq"])
    assert spark_values(df, ["u32", "name", "seq"]) == want
    # A schema naming a subset, in another order, with a record column too.
    sub = (
        spark.read.format("litemq")
        .schema("name string, seq bigint, payload binary, i8 tinyint")
        .load(str(q))
    )
    assert JVM in plan(sub)
    rows = sub.collect()
    assert len(rows) == 300
    by_seq = {r.seq: r for r in rows}
    with litemq.Queue(str(q), read_only=True) as r:
        msgs = {m.seq: m for m in r.tailer(start=0)}
        first = by_seq[0]
        assert bytes(first.payload) == bytes(msgs[0].payload)
        assert (first.name, first.i8) == ("", -128)


def test_a_wrong_type_in_a_read_schema_is_not_read_by_the_jvm(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "every"
    fill_every(q, 20)
    df = spark.read.format("litemq").schema("seq bigint, u8 int").load(str(q))
    assert JVM not in plan(df)


def fill_evolved(path: Path) -> None:
    """Three versions, a file each at least: v1 (qty int32, sym string, px float32, u uint16);
    v2 widens qty to int64, px to float64 and u to int32, renames sym to symbol and adds
    venue; v3 drops px and renames symbol to ticker (aliases sym and symbol)."""
    v1 = pa.schema(
        [
            pa.field("qty", pa.int32(), nullable=False),
            pa.field("sym", pa.string(), nullable=False),
            pa.field("px", pa.float32()),
            pa.field("u", pa.uint16()),
        ]
    )
    v2 = pa.schema(
        [
            pa.field("qty", pa.int64(), nullable=False),
            pa.field("symbol", pa.string(), nullable=False, metadata={b"aliases": b"sym"}),
            pa.field("venue", pa.string()),
            pa.field("px", pa.float64()),
            pa.field("u", pa.int32()),
        ]
    )
    v3 = pa.schema(
        [
            pa.field("qty", pa.int64(), nullable=False),
            pa.field("ticker", pa.string(), nullable=False, metadata={b"aliases": b"sym,symbol"}),
            pa.field("venue", pa.string()),
            pa.field("u", pa.int32()),
        ]
    )
    with litemq.Queue(str(path), schema=v1, file_size=FILE_SIZE) as q:
        app = q.appender()
        for i in range(50):
            app.append({"qty": -i, "sym": f"S{i}", "px": i / 4, "u": 65535 - i})
        app.append_batch(
            pa.RecordBatch.from_pylist(
                [{"qty": 2**31 - 1, "sym": "MAX", "px": None, "u": 65535}], schema=v1
            )
        )
        app.flush()
    with litemq.Queue(str(path), schema=v2, file_size=FILE_SIZE) as q:
        app = q.appender()
        for i in range(50):
            app.append({"qty": 2**40 + i, "symbol": f"T{i}", "venue": "X", "px": 1e300, "u": -i})
        app.flush()
    with litemq.Queue(str(path), schema=v3, file_size=FILE_SIZE) as q:
        app = q.appender()
        batch = [{"qty": i, "ticker": f"U{i}", "venue": None, "u": i} for i in range(40)]
        app.append_batch(pa.RecordBatch.from_pylist(batch, schema=v3))
        app.flush()


def test_evolution_reads_every_file_in_the_current_version(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "evolved"
    fill_evolved(q)
    df = spark.read.format("litemq").load(str(q))
    assert JVM in plan(df)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("seq", "bigint"),
        ("timestamp", "timestamp"),
        ("queue", "string"),
        ("qty", "bigint"),
        ("ticker", "string"),
        ("venue", "string"),
        ("u", "int"),
    ]
    names = ["seq", "timestamp", "qty", "ticker", "venue", "u"]
    with litemq.Queue(str(q), read_only=True) as r:
        assert len(r.schema_versions()) == 3
        want = arrow_values(r.read_arrow(), names)
    got = spark_values(df, names)
    assert got == want
    seq = {row[0]: row[2:] for row in got}
    assert seq[0] == (0, "S0", None, 65535), "v1: renamed twice, venue absent, uint16 widened"
    assert seq[50] == (2**31 - 1, "MAX", None, 65535)
    assert seq[51] == (2**40, "T0", "X", 0), "v2: renamed once, px dropped since"
    assert seq[101 + 39] == (39, "U39", None, 39)


#: Filters on schema columns (SQL), each run with and without pushdown.
FILTERS = [
    "price > 100.5",
    "price = double('NaN')",
    "price >= double('NaN')",
    "price < 0.0",
    "side = 1",
    "side IN (-1, 3)",
    "size <= 10 AND side = -1",
    "size < 5 OR symbol = 'CCC'",
    "symbol IN ('AAA', 'CCC', 'zz')",
    "symbol < 'B'",
    "symbol >= 'ČA'",
    "symbol LIKE 'C%'",
    "symbol LIKE '%A'",
    "symbol LIKE '%AS%' OR symbol LIKE 'Č%'",
    "venue IS NULL",
    "venue IS NOT NULL",
    "venue = 'XNAS'",
    "venue <=> NULL",
    "time >= 1700000000000500 AND time < 1700000000001500",
    "id IN (5, 77, 600, 9999)",
]


def fill_market(path: Path, n: int) -> None:
    """The issue's 6-field market data (and a nullable venue), prices with NaN and -0.0."""
    schema = pa.schema(
        [
            pa.field("time", pa.int64(), nullable=False),
            pa.field("symbol", pa.string(), nullable=False),
            pa.field("price", pa.float64(), nullable=False),
            pa.field("size", pa.int64(), nullable=False),
            pa.field("side", pa.int8(), nullable=False),
            pa.field("id", pa.int64(), nullable=False),
            pa.field("venue", pa.string()),
        ]
    )
    symbols = ["AAA", "BBB", "CCC", "ČAS", "B"]
    prices = [100.0, 100.5, 101.25, float("nan"), -0.0, 0.0, -3.5]
    rows = [
        {
            "time": 1_700_000_000_000_000 + i,
            "symbol": symbols[i % 5],
            "price": prices[i % 7],
            "size": i % 13,
            "side": [1, -1, 3][i % 3],
            "id": i,
            "venue": None if i % 4 == 0 else ["XNAS", "XLON"][i % 2],
        }
        for i in range(n)
    ]
    with litemq.Queue(str(path), schema=schema, file_size=FILE_SIZE) as q:
        app = q.appender()
        for r in rows[:100]:
            app.append(r)
        for at in range(100, n, 700):
            app.append_batch(pa.RecordBatch.from_pylist(rows[at : at + 700], schema=schema))
        app.flush()


def _scan_rows(df: Any) -> int:
    """Rows the litemq scan handed Spark in the last run of ``df`` (the ``numOutputRows``
    metric of its BatchScan node)."""
    found = []

    def walk(node: Any) -> None:
        if node.nodeName().startswith("BatchScan"):
            found.append(int(node.metrics().apply("numOutputRows").value()))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("cond", FILTERS)
def test_pushdown_returns_what_spark_would(spark: Any, tmp_path_factory: Any, cond: str) -> None:
    q = tmp_path_factory.getbasetemp() / "market"
    if not q.exists():
        fill_market(q, 2000)
    plain = spark.read.format("litemq").load(str(q)).where(cond)
    pushed = spark.read.format("litemq").option("filterPushdown", "true").load(str(q)).where(cond)
    assert JVM in plan(pushed)
    want = sorted(tuple(r) for r in plain.select("seq", "id", "symbol", "venue").collect())
    got = sorted(tuple(r) for r in pushed.select("seq", "id", "symbol", "venue").collect())
    assert got == want
    assert 0 < len(want) < 2000
    # The reader applied the filter: the scan handed Spark only the rows that pass.
    collected = pushed.select("seq", "id")
    assert len(collected.collect()) == len(want)
    assert _scan_rows(collected) == len(want)


def test_pushdown_on_every_type(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "every"
    fill_every(q, 400)
    conds = [
        "flag = true",
        "i8 < 0",
        "u64 > 9223372036854775807",
        "u32 = 4294967295",
        "f32 >= float(1.5)",
        "amount > 1.00",
        "big < 0",
        "day >= date'2024-03-01'",
        "ts < timestamp'2023-11-14 22:13:20'",
        "blob = X'00FF'",
        "name = ''",
        "name IS NULL AND tag > 't2'",
    ]
    for cond in conds:
        plain = spark.read.format("litemq").load(str(q)).where(cond).select("id")
        pushed = (
            spark.read.format("litemq")
            .option("filterPushdown", "true")
            .load(str(q))
            .where(cond)
            .select("id")
        )
        want = sorted(r.id for r in plain.collect())
        got = sorted(r.id for r in pushed.collect())
        assert got == want, cond
        assert 0 < len(want) < 400, cond
        assert _scan_rows(pushed) == len(want), cond


def rewrite_frame(path: Path, at: int, edit: Any) -> None:
    """Apply ``edit`` to the record of the frame at ``at`` and store its CRC again, so only
    the row checks can tell."""
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack_from("<I", data, at)
    record = bytearray(data[at + 4 : at + 4 + n])
    edit(record)
    data[at + 4 : at + 4 + n] = record
    crc = litemq._litemq._crc64(bytes(data[at : at + 4 + n]))
    data[at + 4 + n : at + 12 + n] = crc.to_bytes(8, "little")
    path.write_bytes(bytes(data))


def test_a_damaged_row_is_one_line_naming_file_offset_and_seq(spark: Any, tmp_path: Path) -> None:
    """A row batch whose CRC checks out but whose row breaks a rule (a string that is not
    UTF-8): the JVM reader fails the read naming the file, the frame and the row's sequence."""
    schema = pa.schema([pa.field("n", pa.int32(), nullable=False), pa.field("s", pa.string())])
    q = tmp_path / "damaged"
    with litemq.Queue(str(q), schema=schema, file_size=FILE_SIZE) as w:
        app = w.appender()
        app.append_batch(
            pa.RecordBatch.from_pylist([{"n": i, "s": f"r{i}"} for i in range(10)], schema=schema)
        )
        app.roll()
        app.flush()
    data_file = sorted(q.glob("[0-9][0-9][0-9][0-9]/*/*/*.data"))[0]
    at = 4096
    # The block starts 25 bytes into the record; each row is bitmap (1), n (4), s's end (4),
    # then its bytes: row 3's string is at 3 * 11 + 9 (every "rN" is 2 bytes).
    row3 = 25 + 3 * 11 + 9

    def bad(record: bytearray) -> None:
        assert record[9] == 0x18, "a row batch"
        record[row3] = 0xFF

    rewrite_frame(data_file, at, bad)
    df = spark.read.format("litemq").load(str(q))
    assert JVM in plan(df)
    with pytest.raises(Exception, match="typed row's string is not UTF-8") as e:
        df.collect()
    text = str(e.value)
    line = next(ln for ln in text.splitlines() if "litemq: corrupted data in" in ln)
    # The same file, frame, sequence and reason as Rust's read_arrow.
    with litemq.Queue(str(q), read_only=True) as r, pytest.raises(litemq.CorruptedError) as rust:
        r.read_arrow()
    assert str(rust.value) in line
    assert (
        f"corrupted data in {data_file} at offset {at} (seq 3): typed row's string is not UTF-8"
        in line
    )


def test_a_load_mixing_typed_and_untyped_queues_is_refused(spark: Any, tmp_path: Path) -> None:
    fill_every(tmp_path / "ds" / "typed", 10)
    with litemq.Queue(str(tmp_path / "ds" / "plain")) as q:
        q.appender().append(b"x")
    with pytest.raises(Exception, match="cannot hold untyped queues"):
        spark.read.format("litemq").load(str(tmp_path / "ds")).collect()


def test_a_stream_of_a_typed_queue_has_the_same_columns(spark: Any, tmp_path: Path) -> None:
    q = tmp_path / "every"
    fill_every(q, 200)
    batches: list[Any] = []
    stream = spark.readStream.format("litemq").load(str(q))
    assert stream.columns == ["seq", "timestamp", "queue", *EVERY.names]
    names = ["seq", "timestamp", *EVERY.names]
    query = (
        stream.writeStream.foreachBatch(lambda df, _id: batches.append(spark_values(df, names)))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert JVM in query.lastProgress["sources"][0]["description"]
    got = sorted((r for b in batches for r in b), key=repr)
    with litemq.Queue(str(q), read_only=True) as r:
        want = arrow_values(r.read_arrow(), names)
    assert got == want


def test_keys_headers_and_tombstones_of_a_typed_queue(spark: Any, tmp_path: Path) -> None:
    """Single events keep their key and headers (named in a read schema); a tombstone has no
    row, so it is no row of the DataFrame, as in Rust's read_arrow."""
    schema = pa.schema([pa.field("n", pa.int32(), nullable=False), pa.field("s", pa.string())])
    q = tmp_path / "keyed"
    with litemq.Queue(str(q), schema=schema, file_size=FILE_SIZE) as w:
        app = w.appender()
        app.append({"n": 1, "s": "a"}, key="k1", headers={"h": "v1"})
        app.delete("k1")
        app.append({"n": 2, "s": None}, key="k2")
        app.append_batch(pa.RecordBatch.from_pylist([{"n": 3, "s": "c"}], schema=schema))
        app.flush()
    df = (
        spark.read.format("litemq")
        .schema("seq bigint, n int, s string, key_text string, headers_text map<string,string>")
        .load(str(q))
    )
    assert JVM in plan(df)
    got = sorted(tuple(r) for r in df.collect())
    assert got == [
        (0, 1, "a", "k1", {"h": "v1"}),
        (2, 2, None, "k2", None),
        (3, 3, "c", None, None),
    ]
    with litemq.Queue(str(q), read_only=True) as r:
        assert r.read_arrow().column("seq").to_pylist() == [0, 2, 3]
    assert spark.read.format("litemq").load(str(q)).count() == 3


def test_an_encrypted_typed_queue(spark: Any, tmp_path: Path) -> None:
    """Single events of an encrypted typed queue: each row decrypted with the key file, then
    read as columns."""
    key = bytes(range(32))
    key_file = tmp_path / "key"
    key_file.write_bytes(key)
    schema = pa.schema([pa.field("n", pa.int64(), nullable=False), pa.field("s", pa.string())])
    q = tmp_path / "sealed"
    with litemq.Queue(str(q), schema=schema, file_size=FILE_SIZE, encryption_key=key) as w:
        app = w.appender()
        for i in range(300):
            app.append({"n": i * i, "s": None if i % 10 == 0 else f"secret {i}"})
        app.flush()
    df = spark.read.format("litemq").option("encryptionKeyFile", str(key_file)).load(str(q))
    assert JVM in plan(df)
    with litemq.Queue(str(q), read_only=True, encryption_key=key) as r:
        want = arrow_values(r.read_arrow(), ["seq", "n", "s"])
    assert spark_values(df, ["seq", "n", "s"]) == want
    assert len(want) == 300


def test_a_running_stream_stops_at_a_schema_change(spark: Any, tmp_path: Path) -> None:
    """A query keeps the columns it started with: when the queue's schema evolves under it,
    its next micro-batch fails saying so (a restart reads the new columns)."""
    v1 = pa.schema([pa.field("n", pa.int64(), nullable=False)])
    v2 = pa.schema([pa.field("n", pa.int64(), nullable=False), pa.field("note", pa.string())])
    q = tmp_path / "evolving"
    with litemq.Queue(str(q), schema=v1, file_size=FILE_SIZE) as w:
        w.appender().append_batch(pa.RecordBatch.from_pylist([{"n": i} for i in range(5)], v1))
    seen: list[int] = []
    query = (
        spark.readStream.format("litemq")
        .load(str(q))
        .writeStream.foreachBatch(lambda df, _id: seen.extend(r.n for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        assert sorted(seen) == [0, 1, 2, 3, 4]
        with litemq.Queue(str(q), schema=v2, file_size=FILE_SIZE) as w:
            w.appender().append({"n": 5, "note": "new"})
        with pytest.raises(Exception, match="restart it to read the new schema"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_the_python_source_gives_the_same_schema_and_rows(spark: Any, tmp_path: Path) -> None:
    """``.option("reader", "python")`` hands the load to the Python source: both readers give
    a typed queue the same columns, types and rows."""
    q = tmp_path / "every"
    fill_every(q, 300)
    jvm = spark.read.format("litemq").load(str(q))
    py = spark.read.format("litemq").option("reader", "python").load(str(q))
    assert JVM in plan(jvm)
    assert JVM not in plan(py)
    assert jvm.schema == py.schema
    names = ["seq", "timestamp", "queue", *EVERY.names]
    assert spark_values(jvm, names) == spark_values(py, names)


def test_the_committed_typed_fixture_reads_as_rusts_read_arrow(spark: Any, tmp_path: Path) -> None:
    """The committed format-12 fixture (tests/fixtures/queue-v12/typed: two schema versions,
    single rows keyed and compressed, stored and zstd row batches): the JVM reads every file of
    it in the current version as Rust's ``read_arrow`` does."""
    import shutil

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    typed = sorted(
        (d / "typed" for d in fixtures.glob("queue-v*") if (d / "typed").is_dir()),
        key=lambda p: int(p.parent.name.removeprefix("queue-v")),
    )
    assert typed, "a format-12 fixture has a typed queue"
    for committed in typed:
        q = tmp_path / committed.parent.name
        shutil.copytree(committed, q)
        df = spark.read.format("litemq").load(str(q))
        assert JVM in plan(df)
        with litemq.Queue(str(q), read_only=True) as r:
            names = ["seq", "timestamp", *r.schema.names]
            want = arrow_values(r.read_arrow(), names)
        got = spark_values(df, names)
        assert len(got) == len(want) > 1000
        assert got == want
