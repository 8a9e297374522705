"""``litemq index``: secondary indexes on header fields (and a typed queue's
schema fields), from a shell.

    litemq index add PATH NAME [--type str|int]
                                  declare an index and build it for every sealed
                                  file, with a progress bar (opens as the writer);
                                  NAME a schema field: its index (type the field's)
    litemq index drop PATH NAME   forget an index and delete its files
    litemq index list PATH        declared indexes and the state of each file's
    litemq where PATH FIELD OP VALUE... [--limit N]
                                  messages whose header FIELD matches: OP is =, >=, <=,
                                  between (two values), in (any number), prefix; on a
                                  typed queue FIELD may be a field of its schema (no
                                  index needed; also !=, <, >), VALUE read as its type

`verify` also checks every index file (`check_indexes`).
"""

from __future__ import annotations

import argparse
from datetime import date, datetime
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any

from litemq.cli.common import _Failure, _key_file, _open, _print_message, _ProgressCallback
from litemq.queue import Queue

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["check_indexes", "register"]


def check_indexes(q: Queue, out: IO[str]) -> int:
    """Writes a line per damaged or missing index file; returns how many are
    damaged (a missing one is built by the writer, not a failure)."""
    bad = 0
    for f in q._check_indexes():
        if f["state"] == "damaged":
            bad += 1
            out.write(f"BAD index file={f['file']} field={f['field']}: damaged (read around)\n")
        elif f["state"] == "missing":
            out.write(f"index file={f['file']} field={f['field']}: missing (not built yet)\n")
    return bad


def _cmd_add(args: argparse.Namespace, out: IO[str]) -> int:
    step = _ProgressCallback(f"indexing {args.name}")
    with Queue(args.path, encryption_key_file=_key_file()) as q:
        indexed = q.add_index(args.name, args.type, progress=step)
        kind = q.indexes[args.name]
    step.done()
    out.write(f"OK: index {args.name!r} ({kind}): {indexed} sealed files indexed\n")
    return 0


def _cmd_drop(args: argparse.Namespace, out: IO[str]) -> int:
    with Queue(args.path) as q:
        removed = q.drop_index(args.name)
    out.write(f"OK: index {args.name!r} dropped: {removed} index files deleted\n")
    return 0


def _cmd_list(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        states: dict[str, dict[str, int]] = {n: {} for n in q.indexes}
        for f in q._check_indexes():
            s = states.setdefault(f["field"], {})
            s[f["state"]] = s.get(f["state"], 0) + 1
        for name, kind in q.indexes.items():
            counts = ", ".join(f"{v} {k}" for k, v in sorted(states[name].items()))
            out.write(f"{name}\t{kind}\t{counts or 'no sealed files'}\n")
    return 0


def _schema_value(text: str, t: pa.DataType) -> Any:
    """A command-line value of a typed queue's field of type `t`, as its events hold it."""
    import pyarrow as pa  # a typed queue has a schema: pyarrow is there

    if pa.types.is_integer(t):
        return int(text)
    if pa.types.is_floating(t):
        return float(text)
    if pa.types.is_boolean(t):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() == "true"
    if pa.types.is_timestamp(t):
        return datetime.fromisoformat(text)
    if pa.types.is_date(t):
        return date.fromisoformat(text)
    if pa.types.is_decimal(t):
        return Decimal(text)
    if pa.types.is_binary(t):
        return text.encode()
    return text


def _converter(q: Queue, args: argparse.Namespace) -> Any:
    """How `where` reads its values: by the type of a typed queue's field (no index
    needed), else by the type of the declared index on the header."""
    schema = q.schema
    if schema is not None and args.field in schema.names:
        t = schema.field(args.field).type

        def conv(text: str) -> Any:
            try:
                return _schema_value(text, t)
            except (ValueError, ArithmeticError) as e:
                raise _Failure(f'{args.path}: field "{args.field}" ({t}): {e}') from None

        return conv
    kind = q.indexes.get(args.field)
    if kind is None and schema is not None:
        raise _Failure(
            f'{args.path}: "{args.field}" is not a field of the queue\'s schema '
            f"({', '.join(schema.names)})"
        )
    if kind is None:
        raise _Failure(
            f'{args.path}: no index on "{args.field}": declare it with '
            f"`litemq index add {args.path} {args.field}` (--type int for numbers)"
        )
    return int if kind == "int" else str


def _cmd_where(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        conv = _converter(q, args)
        values = [conv(v) for v in args.values]
        value: Any
        if args.op == "between":
            if len(values) != 2:
                raise SystemExit("litemq: error: between takes two values")
            value = tuple(values)
        elif args.op == "in":
            value = values
        else:
            if len(values) != 1:
                raise SystemExit(f"litemq: error: {args.op} takes one value")
            value = values[0]
        for m in q.where(args.field, args.op, value, limit=args.limit):
            _print_message(m, args.format, out)
    return 0


def register(sub: Any) -> None:
    """Adds ``index`` and ``where`` to the ``litemq`` parser's subparsers."""
    p = sub.add_parser("index", help="secondary indexes on header (or schema) fields")
    isub = p.add_subparsers(dest="index_command", required=True)
    a = isub.add_parser("add", help="declare an index and build it for every sealed file")
    a.add_argument("path", metavar="PATH", help="the queue's directory")
    a.add_argument("name", metavar="NAME", help="the header (or schema field) name")
    a.add_argument(
        "--type",
        choices=("str", "int"),
        default=None,
        help="default str; a schema field's own on a typed queue",
    )
    a.set_defaults(run=_cmd_add)
    d = isub.add_parser("drop", help="forget an index and delete its files")
    d.add_argument("path", metavar="PATH", help="the queue's directory")
    d.add_argument("name", metavar="NAME", help="the header name")
    d.set_defaults(run=_cmd_drop)
    ls = isub.add_parser("list", help="declared indexes and the state of their files")
    ls.add_argument("path", metavar="PATH", help="the queue's directory")
    ls.set_defaults(run=_cmd_list)

    w = sub.add_parser(
        "where",
        help="messages whose indexed header, or typed queue's field, matches (JSON Lines)",
    )
    w.add_argument("path", metavar="PATH", help="the queue's directory")
    w.add_argument("field", metavar="FIELD")
    w.add_argument("op", choices=("=", "!=", "<", ">", "between", "in", ">=", "<=", "prefix"))
    w.add_argument("values", nargs="+", metavar="VALUE")
    w.add_argument("--limit", type=int, metavar="N", help="at most N messages")
    w.add_argument(
        "--format",
        choices=("json", "text", "hex"),
        default="json",
        help="json (default: one object per line, as dump --format json), text, hex",
    )
    w.set_defaults(run=_cmd_where)
