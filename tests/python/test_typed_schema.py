"""litemq.schema: what `Queue(schema=...)` accepts and the schema JSON it
becomes (docs/FORMAT.md, "Typed records (version 12)")."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from typing import Annotated, Optional

import msgspec
import pyarrow as pa
import pytest

import litemq
from litemq import schema as S


def fields(schema: object) -> list[tuple[str, str, bool, list[str]]]:
    doc = json.loads(S.to_json(schema))
    assert doc["version"] == 1
    return [(f["name"], f["type"], f["nullable"], f["aliases"]) for f in doc["fields"]]


@dataclasses.dataclass
class Trade:
    time: dt.datetime
    symbol: str
    price: float
    size: int
    side: Annotated[int, pa.int8()]
    id: int
    venue: str | None = None


class TradeStruct(msgspec.Struct):
    time: dt.datetime
    symbol: str
    price: float
    size: int
    side: Annotated[int, pa.int8()]
    id: int
    venue: Optional[str] = None  # noqa: UP045 - Optional[] spelled as users do


MARKET = [
    ("time", "timestamp_us", False, []),
    ("symbol", "string", False, []),
    ("price", "float64", False, []),
    ("size", "int64", False, []),
    ("side", "int8", False, []),
    ("id", "int64", False, []),
    ("venue", "string", True, []),
]


def test_a_dataclass_and_a_struct_map_to_the_same_fields() -> None:
    assert fields(Trade) == MARKET
    assert fields(TradeStruct) == MARKET


def test_every_python_annotation_maps_as_documented() -> None:
    @dataclasses.dataclass
    class Every:
        b: bool
        i: int
        f: float
        s: str
        y: bytes
        t: dt.datetime
        d: dt.date
        n: Annotated[decimal.Decimal, pa.decimal128(12, 2)]
        u: Annotated[int, pa.uint16()]
        o: Optional[Annotated[int, pa.int32()]]  # noqa: UP045

    assert [(n, t, null) for n, t, null, _ in fields(Every)] == [
        ("b", "bool", False),
        ("i", "int64", False),
        ("f", "float64", False),
        ("s", "string", False),
        ("y", "binary", False),
        ("t", "timestamp_us", False),
        ("d", "date32", False),
        ("n", "decimal128(12,2)", False),
        ("u", "uint16", False),
        ("o", "int32", True),
    ]


def test_a_pyarrow_schema_keeps_nullability_and_aliases() -> None:
    schema = pa.schema(
        [
            pa.field("time", pa.timestamp("ns", tz="America/New_York"), nullable=False),
            pa.field("qty", pa.int32(), metadata={b"aliases": b"size, amount"}),
            pa.field("sym", pa.large_string()),
            pa.field("day", pa.date64()),
            pa.field("px", pa.float32()),
        ]
    )
    assert fields(schema) == [
        ("time", "timestamp_us", False, []),
        ("qty", "int32", True, ["size", "amount"]),
        ("sym", "string", True, []),
        ("day", "date32", True, []),
        ("px", "float32", True, []),
    ]


def test_aliases_on_a_dataclass_field() -> None:
    @dataclasses.dataclass
    class Renamed:
        qty: Annotated[int, litemq.Aliases("size")]

    assert fields(Renamed) == [("qty", "int64", False, ["size"])]


@pytest.mark.parametrize(
    ("arrow_type", "shown"),
    [
        (pa.list_(pa.int8()), "list"),
        (pa.struct([("a", pa.int8())]), "struct"),
        (pa.map_(pa.string(), pa.int8()), "map"),
        (pa.time64("us"), "time64"),
        (pa.float16(), "halffloat"),
        (pa.duration("s"), "duration"),
    ],
)
def test_unsupported_arrow_types_are_refused_naming_the_field(
    arrow_type: pa.DataType, shown: str
) -> None:
    with pytest.raises(litemq.SchemaError, match=rf"field 'bad'.*{shown}"):
        S.to_json(pa.schema([("ok", pa.int64()), ("bad", arrow_type)]))


def test_unsupported_python_types_are_refused_naming_the_field() -> None:
    @dataclasses.dataclass
    class Listy:
        ok: int
        tags: list[str]

    with pytest.raises(litemq.SchemaError, match=r"field 'tags'.*list\[str\]"):
        S.to_json(Listy)

    @dataclasses.dataclass
    class Either:
        v: int | str

    with pytest.raises(litemq.SchemaError, match="field 'v'"):
        S.to_json(Either)

    @dataclasses.dataclass
    class Clock:
        at: dt.time

    with pytest.raises(litemq.SchemaError, match="field 'at'"):
        S.to_json(Clock)


def test_a_bare_decimal_needs_its_precision() -> None:
    @dataclasses.dataclass
    class Money:
        amount: decimal.Decimal

    with pytest.raises(litemq.SchemaError, match=r"field 'amount'.*decimal128\(P, S\)"):
        S.to_json(Money)


def test_schema_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="field 'l'"):
        S.to_json(pa.schema([("l", pa.list_(pa.int8()))]))


def test_anything_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"pyarrow\.Schema, a dataclass type or a msgspec\.Struct"):
        S.to_json({"a": int})
    with pytest.raises(TypeError):
        S.to_json(Trade(dt.datetime.now(dt.UTC), "A", 1.0, 1, 1, 1))  # an instance


def test_to_arrow_reads_back_the_documented_types() -> None:
    doc = json.loads(S.to_json(Trade))
    schema = S.to_arrow(doc)
    assert schema.field("time").type == pa.timestamp("us", tz="UTC")
    assert schema.field("side").type == pa.int8()
    assert not schema.field("symbol").nullable
    assert schema.field("venue").nullable
    assert schema.metadata == {b"litemq.version": b"1"}
    # A pyarrow schema given back as the schema maps to the same fields.
    assert fields(schema) == MARKET
