"""A typed queue's schema: from what a user gives to the JSON the engine keeps.

``Queue(path, schema=...)`` takes a ``pyarrow.Schema``, a dataclass type or a
``msgspec.Struct`` type; each is mapped to the schema JSON of docs/FORMAT.md
("Typed records (version 12)") by `to_json`. `to_arrow` maps a stored
version back to a ``pyarrow.Schema`` (``Queue.schema``).

Python annotations map to field types:

=====================  ===================  ==================================
annotation             field type           Arrow type read back
=====================  ===================  ==================================
``int``                ``int64``            ``int64``
``float``              ``float64``          ``double``
``bool``               ``bool``             ``bool``
``str``                ``string``           ``string``
``bytes``              ``binary``           ``binary``
``datetime``           ``timestamp_us``     ``timestamp[us, tz=UTC]``
``date``               ``date32``           ``date32``
``X | None``           X, nullable          X
``Annotated[X, T]``    T, a pyarrow type    T (as the table of FORMAT.md)
=====================  ===================  ==================================

``Decimal`` has no default precision: annotate it with its Arrow type,
``Annotated[Decimal, pa.decimal128(12, 2)]``. ``Annotated[int, pa.int8()]``
picks a narrower integer the same way. Renames: ``Annotated[int,
litemq.Aliases("size")]`` on a dataclass or Struct field, or the metadata
``{b"aliases": b"size"}`` (comma separated) on a pyarrow field, lists the
names the field had in earlier versions. A field of a dataclass or Struct
is nullable only when its annotation allows ``None``; a pyarrow field is as
its ``nullable`` says (pyarrow's default: nullable).

Anything else (lists, structs, maps, ``time``, ``timedelta``, unions of two
types, float16, dictionaries, ...) raises `litemq.SchemaError` naming the
field.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import types
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from litemq._litemq import SchemaError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Aliases", "SchemaLike", "from_json", "to_arrow", "to_json"]

#: What ``Queue(schema=...)`` takes.
SchemaLike = Any

_PYTHON_TYPES: dict[Any, str] = {
    bool: "bool",
    int: "int64",
    float: "float64",
    str: "string",
    bytes: "binary",
    dt.datetime: "timestamp_us",
    dt.date: "date32",
}

_SUPPORTED = (
    "int, float, bool, str, bytes, datetime, date, Decimal annotated with "
    "pa.decimal128(P, S), X | None, Annotated[X, <pyarrow type>]"
)


@dataclasses.dataclass(frozen=True, init=False)
class Aliases:
    """The names a field had in earlier versions of a schema, for a rename:
    ``qty: Annotated[int, litemq.Aliases("size")]`` reads the rows written
    while the field was ``size`` under ``qty``.

    >>> litemq.Aliases("size", "amount").names
    ('size', 'amount')
    """

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        for n in names:
            if not isinstance(n, str) or not n:
                raise TypeError(f"aliases are non-empty str names, not {n!r}")
        object.__setattr__(self, "names", tuple(names))


def to_json(schema: SchemaLike) -> str:
    """The schema JSON (FORMAT.md, version 1) of a ``pyarrow.Schema``, a
    dataclass type or a ``msgspec.Struct`` type; `SchemaError` naming the
    field for a type it cannot store.

    >>> litemq.schema.to_json(pa.schema([pa.field("px", pa.float64(), nullable=False)]))
    '{"version":1,"fields":[{"name":"px","type":"float64","nullable":false,"aliases":[]}]}'
    """
    fields = _fields_of(schema)
    if not fields:
        raise SchemaError("a schema has 1 to 1024 fields, not 0")
    doc = {"version": 1, "fields": fields}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def from_json(text: str | bytes) -> dict[str, Any]:
    """One stored schema version (FORMAT.md's JSON object) as a dict."""
    doc: dict[str, Any] = json.loads(text)
    return doc


def to_arrow(version: dict[str, Any]) -> pa.Schema:
    """The ``pyarrow.Schema`` of one stored version: each field's Arrow type
    (FORMAT.md's table), its ``nullable``, its aliases as the field metadata
    ``b"aliases"``; the schema metadata ``b"litemq.version"`` is the version."""
    import pyarrow as pa

    out = []
    for f in version["fields"]:
        meta = {b"aliases": ",".join(f["aliases"]).encode()} if f.get("aliases") else None
        out.append(pa.field(f["name"], arrow_type(f["type"]), f["nullable"], metadata=meta))
    return pa.schema(out, metadata={b"litemq.version": str(version["version"]).encode()})


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type a field type reads back as (FORMAT.md's table)."""
    import pyarrow as pa

    simple = {
        "bool": pa.bool_(),
        "int8": pa.int8(),
        "int16": pa.int16(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "uint8": pa.uint8(),
        "uint16": pa.uint16(),
        "uint32": pa.uint32(),
        "uint64": pa.uint64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "timestamp_us": pa.timestamp("us", tz="UTC"),
        "date32": pa.date32(),
        "string": pa.string(),
        "binary": pa.binary(),
    }
    if name in simple:
        return simple[name]
    if name.startswith("decimal128(") and name.endswith(")"):
        p, s = name[len("decimal128(") : -1].split(",")
        return pa.decimal128(int(p), int(s))
    raise SchemaError(f"unknown field type {name!r}")


def _fields_of(schema: SchemaLike) -> list[dict[str, Any]]:
    if _is_arrow_schema(schema):
        return [_arrow_field(f) for f in schema]
    if isinstance(schema, type) and dataclasses.is_dataclass(schema):
        names = [f.name for f in dataclasses.fields(schema)]
        return _annotated_fields(schema, names)
    names_of_struct = _struct_field_names(schema)
    if names_of_struct is not None:
        return _annotated_fields(schema, names_of_struct)
    raise TypeError(
        "schema must be a pyarrow.Schema, a dataclass type or a msgspec.Struct type, "
        f"not {schema!r}"
    )


def _is_arrow_schema(obj: object) -> bool:
    mod = type(obj).__module__
    if not mod.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(obj, pa.Schema)


def _struct_field_names(obj: object) -> Sequence[str] | None:
    """A msgspec.Struct type's field names; None for anything else (msgspec
    is imported only when the object may be one)."""
    if not isinstance(obj, type) or not hasattr(obj, "__struct_fields__"):
        return None
    import msgspec

    if not issubclass(obj, msgspec.Struct):
        return None
    names: tuple[str, ...] = obj.__struct_fields__
    return names


def _annotated_fields(cls: type, names: Sequence[str]) -> list[dict[str, Any]]:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as e:  # a name the annotation uses is not importable
        raise SchemaError(f"{cls.__name__}: cannot resolve its annotations: {e}") from e
    return [_python_field(n, hints[n]) for n in names]


def _python_field(name: str, hint: Any) -> dict[str, Any]:
    aliases: list[str] = []
    arrow: Any = None
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        for e in extras:
            if isinstance(e, Aliases):
                aliases.extend(e.names)
            elif _is_arrow_type(e):
                arrow = e
        hint = base
    hint, nullable = _strip_none(name, hint)
    if typing.get_origin(hint) is typing.Annotated:  # Optional[Annotated[...]]
        inner = _python_field(name, hint)
        inner["nullable"] = True
        inner["aliases"] = aliases + inner["aliases"]
        return inner
    if arrow is not None:
        ty = _arrow_type_name(name, arrow)
    elif hint is decimal.Decimal:
        raise SchemaError(
            f"field {name!r}: a Decimal needs its precision and scale: "
            f"Annotated[Decimal, pa.decimal128(P, S)]"
        )
    elif hint in _PYTHON_TYPES:
        ty = _PYTHON_TYPES[hint]
    else:
        raise SchemaError(
            f"field {name!r}: type {_show(hint)} is not supported (supported: {_SUPPORTED})"
        )
    return {"name": name, "type": ty, "nullable": nullable, "aliases": aliases}


def _strip_none(name: str, hint: Any) -> tuple[Any, bool]:
    """``X | None`` / ``Optional[X]`` → ``(X, True)``; ``X`` → ``(X, False)``."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise SchemaError(
                f"field {name!r}: type {_show(hint)} is not supported: a field holds one "
                f"type (or that type or None)"
            )
        return args[0], True
    return hint, False


def _show(hint: Any) -> str:
    if typing.get_origin(hint) is not None:
        return repr(hint)  # list[str], not list
    return getattr(hint, "__name__", None) or repr(hint)


def _is_arrow_type(obj: object) -> bool:
    if not type(obj).__module__.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(obj, pa.DataType)


def _arrow_field(f: pa.Field) -> dict[str, Any]:
    aliases: list[str] = []
    meta = f.metadata or {}
    raw = meta.get(b"aliases")
    if raw:
        aliases = [a.strip() for a in raw.decode().split(",") if a.strip()]
    return {
        "name": f.name,
        "type": _arrow_type_name(f.name, f.type),
        "nullable": bool(f.nullable),
        "aliases": aliases,
    }


def _arrow_type_name(name: str, t: pa.DataType) -> str:
    """The field type a pyarrow type is stored as; SchemaError naming the
    field for one it cannot store."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_boolean(t):
        return "bool"
    if pt.is_integer(t):
        return str(t)  # int8 ... uint64: pyarrow spells them as FORMAT.md does
    if pt.is_float32(t):
        return "float32"
    if pt.is_float64(t):
        return "float64"
    if pt.is_timestamp(t):
        return "timestamp_us"
    if pt.is_date32(t) or pt.is_date64(t):
        return "date32"
    if isinstance(t, pa.Decimal128Type):
        return f"decimal128({t.precision},{t.scale})"
    if pt.is_string(t) or pt.is_large_string(t):
        return "string"
    if pt.is_binary(t) or pt.is_large_binary(t):
        return "binary"
    raise SchemaError(
        f"field {name!r}: Arrow type {t} is not supported (supported: bool, int8..int64, "
        f"uint8..uint64, float32, float64, timestamp, date32, decimal128, string, binary)"
    )
