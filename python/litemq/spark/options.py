"""Options of the Spark source and sink, parsed once on the driver with errors that name them.

Spark hands options as a case-insensitive map of strings. Every option is parsed here so that a
typo or a bad value fails when the DataFrame is defined, before any task runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from litemq._litemq import LiteMQError

__all__ = ["OptionError", "ReadOptions", "StreamReadOptions", "WriteOptions", "parse_time_us"]

#: Rows per Spark partition when the engine cannot tell where data files start.
DEFAULT_ROWS_PER_PARTITION = 1_000_000
#: Rows per Arrow record batch handed to Spark.
DEFAULT_BATCH_ROWS = 65_536
#: Size of each data file of queues written by Spark. Data files are preallocated, and a
#: dataset has a queue per partition: the engine's 1 GiB default would reserve that much
#: for every partition, however small. A queue rolls to a new file when one is full.
DEFAULT_WRITE_FILE_SIZE = 16 * 1024 * 1024


class OptionError(LiteMQError, ValueError):
    """An option of the litemq Spark source or sink that does not parse; ``option`` names
    it when one option is at fault (None for a combination of options)."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


def _opt(options: Mapping[str, str], name: str) -> str | None:
    # Spark's CaseInsensitiveDict lower-cases keys; a plain dict (tests, write_partitions) may not.
    if name in options:
        return options[name]
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return None


def _int(options: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    raw = _opt(options, name)
    if raw is None or raw == "":
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"litemq: option {name}={raw!r} is not an integer", option=name) from None
    if value < minimum:
        raise OptionError(f"litemq: option {name}={raw!r} must be >= {minimum}", option=name)
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _opt(options, name)
    if raw is None or raw == "":
        return default
    v = str(raw).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(
        f"litemq: option {name}={raw!r} is not a boolean (true or false)", option=name
    )


def parse_time_us(value: Any, name: str = "time") -> int:
    """A time as µs since the Unix epoch, UTC.

    Accepts an int (µs since the epoch), an ISO 8601 string (``2025-11-21T22:45:00Z``,
    ``2025-11-21 22:45:00+01:00``; without an offset it is UTC), or a datetime (naive = UTC).
    """
    if isinstance(value, bool):
        raise OptionError(f"litemq: option {name}={value!r} is not a time", option=name)
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        dt = value
    else:
        s = str(value).strip()
        if s.lstrip("-").isdigit():
            return int(s)
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise OptionError(
                f"litemq: option {name}={value!r} is not a time: use ISO 8601 "
                "(2025-11-21T22:45:00Z) or microseconds since the Unix epoch"
            ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _paths(options: Mapping[str, str]) -> list[str]:
    raw = _opt(options, "path")
    many = _opt(options, "paths")
    out: list[str] = []
    if many:
        # DataFrameReader.load([a, b]) passes a JSON array in "paths".
        try:
            parsed = json.loads(many)
        except ValueError:
            parsed = [p for p in many.split(",") if p]
        if isinstance(parsed, str):
            parsed = [parsed]
        out.extend(str(p) for p in parsed)
    if raw:
        out.append(raw)
    return out


@dataclass(frozen=True)
class ReadOptions:
    paths: list[str]
    start_seq: int | None = None
    end_seq: int | None = None
    start_time_us: int | None = None
    end_time_us: int | None = None
    key: bytes | None = None
    where: tuple[str, str] | None = None  # (indexed header, value as text)
    topic: str | None = None  # read only this topic's messages (through its topic index)
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION
    batch_rows: int = DEFAULT_BATCH_ROWS
    filter_pushdown: bool = False
    encryption_key_file: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        paths = _paths(options)
        if not paths:
            raise OptionError("litemq: no path given: use spark.read.format('litemq').load(path)")
        start_time = _opt(options, "startTime")
        end_time = _opt(options, "endTime")
        key = _opt(options, "key")
        where_raw = _opt(options, "where")
        where: tuple[str, str] | None = None
        if where_raw is not None:
            name, eq, value = where_raw.partition("=")
            if not eq or not name.strip():
                raise OptionError(
                    f"litemq: option where={where_raw!r} must be FIELD=VALUE on an indexed "
                    "header, e.g. where='customer=c7'"
                )
            where = (name.strip(), value)
        if where is not None and key is not None:
            raise OptionError("litemq: give key or where, not both")
        topic = _opt(options, "topic")
        if topic is not None and not 1 <= len(topic.encode("utf-8")) <= 255:
            raise OptionError(
                f"litemq: option topic={topic!r} must be a topic name (1 to 255 bytes of UTF-8)"
            )
        ro = cls(
            paths=paths,
            start_seq=_int(options, "startSeq"),
            end_seq=_int(options, "endSeq"),
            start_time_us=None if not start_time else parse_time_us(start_time, "startTime"),
            end_time_us=None if not end_time else parse_time_us(end_time, "endTime"),
            key=None if key is None else key.encode("utf-8"),
            where=where,
            topic=topic,
            rows_per_partition=_int(options, "rowsPerPartition", minimum=1)
            or DEFAULT_ROWS_PER_PARTITION,
            batch_rows=_int(options, "batchRows", minimum=1) or DEFAULT_BATCH_ROWS,
            filter_pushdown=_bool(options, "filterPushdown", False),
            encryption_key_file=_opt(options, "encryptionKeyFile"),
        )
        if ro.start_seq is not None and ro.end_seq is not None and ro.end_seq < ro.start_seq:
            raise OptionError(f"litemq: endSeq={ro.end_seq} is before startSeq={ro.start_seq}")
        if (
            ro.start_time_us is not None
            and ro.end_time_us is not None
            and ro.end_time_us < ro.start_time_us
        ):
            raise OptionError(f"litemq: endTime={end_time!r} is before startTime={start_time!r}")
        return ro


@dataclass(frozen=True)
class StreamReadOptions:
    paths: list[str]
    starting: str | dict[str, int] = "earliest"
    max_records_per_trigger: int | None = None
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION
    batch_rows: int = DEFAULT_BATCH_ROWS
    encryption_key_file: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = True) -> StreamReadOptions:
        """Parse; with ``streaming=False`` (a load that may be batch or stream), skip the
        check that batch-only options are absent."""
        paths = _paths(options)
        if not paths:
            raise OptionError(
                "litemq: no path given: use spark.readStream.format('litemq').load(path)"
            )
        for unsupported in ("key", "where", "topic", "startSeq", "endSeq", "startTime", "endTime"):
            if streaming and _opt(options, unsupported) is not None:
                raise OptionError(
                    f"litemq: option {unsupported} applies to batch reads only; a stream "
                    "starts at startingOffsets ('earliest', 'latest' or a JSON object)"
                )
        raw = (_opt(options, "startingOffsets") or "earliest").strip()
        starting: str | dict[str, int]
        if raw.lower() in ("earliest", "latest"):
            starting = raw.lower()
        else:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in parsed.items()
            ):
                raise OptionError(
                    f"litemq: option startingOffsets={raw!r} must be 'earliest', 'latest' or a "
                    'JSON object of queue name to sequence, e.g. {"part-00000": 42}'
                )
            starting = dict(sorted(parsed.items()))
        return cls(
            paths=paths,
            starting=starting,
            max_records_per_trigger=_int(options, "maxRecordsPerTrigger", minimum=1),
            rows_per_partition=_int(options, "rowsPerPartition", minimum=1)
            or DEFAULT_ROWS_PER_PARTITION,
            batch_rows=_int(options, "batchRows", minimum=1) or DEFAULT_BATCH_ROWS,
            encryption_key_file=_opt(options, "encryptionKeyFile"),
        )


@dataclass(frozen=True)
class WriteOptions:
    path: str
    file_size: int = DEFAULT_WRITE_FILE_SIZE
    sink_id: str = "stream"
    queue_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        paths = _paths(options)
        if len(paths) != 1:
            raise OptionError(
                "litemq: write needs exactly one dataset directory: .save(path)"
                if not paths
                else f"litemq: write takes one path, got {paths}"
            )
        if "://" in paths[0]:
            raise OptionError(
                f"litemq: cannot write to {paths[0]}: Spark writes queues to a local or shared "
                "POSIX file system; copy them to object storage with `litemq archive`"
            )
        sink_id = _opt(options, "sinkId") or "stream"
        if not sink_id.replace("-", "").replace("_", "").isalnum() or sink_id.startswith("_"):
            raise OptionError(
                f"litemq: option sinkId={sink_id!r} must be letters, digits, '-' or '_' "
                "and not start with '_'"
            )
        qopts: dict[str, Any] = {}
        ii = _int(options, "indexInterval", minimum=1)
        if ii is not None:
            qopts["index_interval"] = ii
        return cls(
            path=os.path.abspath(paths[0]),
            file_size=_int(options, "fileSize", minimum=64 * 1024) or DEFAULT_WRITE_FILE_SIZE,
            sink_id=sink_id,
            queue_options=qopts,
        )
