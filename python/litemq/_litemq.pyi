# Type stubs for the native module litemq._litemq (rust/python/).
# Checked against the compiled module by `python -m mypy.stubtest litemq._litemq`.

from collections.abc import Callable, Coroutine, Iterable, Mapping
from datetime import datetime, timedelta
from os import PathLike
from types import TracebackType
from typing import Any, Literal, NoReturn, Self, final, overload

from typing_extensions import Buffer, disjoint_base

from litemq._aio import FollowAsync
from litemq.compaction import CompactReport
from litemq.consumers import ConsumerInfo
from litemq.options import FlushSpec, RollSpec, WaitSpec
from litemq.retention import Retention, RetentionReport
from litemq.stats import DataFileInfo, Stats
from litemq.topics import TopicInfo
from litemq.work_queue import WorkQueueInfo

__all__ = [
    "DEFAULT_COMPACT_GRACE_US",
    "MAX_HEADERS",
    "MAX_HEADER_NAME_LEN",
    "MAX_HEADER_VALUE_LEN",
    "MAX_KEY_LEN",
    "Appender",
    "ClosedError",
    "CompactedError",
    "ConfigError",
    "Consumer",
    "CorruptedError",
    "EncryptionError",
    "Follow",
    "ForkedError",
    "InternalError",
    "Job",
    "LiteMQError",
    "LockedError",
    "MaybeStoredError",
    "Message",
    "NotFoundError",
    "PayloadView",
    "PoisonedError",
    "Queue",
    "ReadOnlyError",
    "Tailer",
    "UnsupportedVersionError",
    "WorkQueue",
    "WrongKeyError",
    "_Notifier",
    "__version__",
    "_check_archive_key",
    "_check_batch",
    "_close_all_at_exit",
    "_crc32c",
    "_crc64",
    "_decode_frames",
    "_decode_sealed",
    "_dense_header",
    "_dense_offset",
    "_parse_age",
    "_parse_flush",
    "_parse_key_index",
    "_parse_roll",
    "_parse_size",
    "_parse_wait",
    "_restore_message",
    "_retention_tuple",
    "_sealed_ends",
    "_sealed_summary",
    "_verify_sealed",
    "reindex",
    "release_memory",
    "writer_pid",
]

__version__: str
MAX_KEY_LEN: int
#: How long ``compact=True`` keeps a key's last tombstone (µs): a day.
DEFAULT_COMPACT_GRACE_US: int
MAX_HEADERS: int
MAX_HEADER_NAME_LEN: int
MAX_HEADER_VALUE_LEN: int

_Key = str | Buffer
_HeaderValue = str | Buffer
_Compression = Literal["zstd", "lz4", "gzip", "none", False]
_BatchItem = (
    Buffer
    | tuple[Buffer, _Key | None]
    | tuple[Buffer, _Key | None, Mapping[str, _HeaderValue] | None]
    | Mapping[str, Any]
)

def writer_pid(path: str | PathLike[str]) -> int | None: ...
def release_memory() -> int: ...
def reindex(
    path: str | PathLike[str],
    progress: Callable[[int], object] | None = None,
    slots: int | None = None,
    items: int | None = None,
    encryption_key: bytes | None = None,
    encryption_key_file: str | PathLike[str] | None = None,
) -> int: ...
def _close_all_at_exit() -> None: ...
def _crc32c(data: Buffer) -> int: ...
def _restore_message(
    seq: int,
    timestamp: int,
    payload: bytes,
    key: str | bytes | None,
    headers: dict[str, str | bytes] | None,
    position: tuple[str, int] | None,
    fields: tuple[str | None, tuple[str, ...], int, int, int | None] | None = None,
    stored: tuple[int | None, bool] = ...,
) -> Message: ...

# Option parsers (rust/python/options.rs), for litemq.options and litemq.retention.
def _parse_size(value: object, what: str = "size", maximum: int | None = ...) -> int: ...
def _parse_roll(spec: object) -> list[tuple[str, int]]: ...
def _parse_flush(spec: object) -> tuple[str, int, float]: ...
def _parse_wait(spec: object) -> str: ...
def _parse_key_index(spec: object) -> tuple[int, int]: ...
def _parse_age(value: object, what: str = "max_age") -> int: ...
def _check_batch(bytes: object, interval: object) -> tuple[int, float]: ...
def _retention_tuple(policy: object) -> tuple[int | None, int | None, int | None, bool]: ...

# Archives (rust/python/archive.rs), for litemq.archive.
def _crc64(data: object, prev: int | None = None) -> int: ...
def _sealed_summary(data: object, name: str) -> dict[str, Any]: ...
def _verify_sealed(data: object, name: str) -> dict[str, Any]: ...
def _sealed_ends(head: object, tail: object, size: int, name: str) -> dict[str, Any]: ...
def _dense_header(data: object) -> tuple[int, int] | None: ...
def _decode_sealed(
    data: object,
    name: str,
    start: int,
    end: int,
    max_rows: int,
    columns: list[str] | None = None,
    raw: bool = False,
    unlock: tuple[bytes, bytes | None] | None = None,
) -> dict[str, Any]: ...
def _decode_frames(
    data: object,
    name: str,
    offset: int,
    first_seq: int,
    rows: int,
    columns: list[str] | None = None,
    raw: bool = False,
    unlock: tuple[bytes, bytes | None] | None = None,
) -> dict[str, Any]: ...
def _dense_offset(word: int, seq: int, data_len: int) -> int | None: ...
def _check_archive_key(metadata: bytes, key: bytes | None, name: str) -> bool: ...

class LiteMQError(Exception): ...

class CorruptedError(LiteMQError):
    file: str | None
    offset: int | None
    seq: int | None
    reason: str | None

class LockedError(LiteMQError):
    file: str | None
    pid: int | None

class ClosedError(LiteMQError): ...

class PoisonedError(LiteMQError):
    cause: BaseException | None

class MaybeStoredError(PoisonedError):
    seq: int | None

class ConfigError(LiteMQError, ValueError): ...

class UnsupportedVersionError(LiteMQError):
    file: str | None
    found: int | None
    supported: int | None

class ReadOnlyError(LiteMQError): ...

class NotFoundError(LiteMQError, IndexError):
    seq: int | None
    first: int | None
    next: int | None

class CompactedError(NotFoundError): ...
class ForkedError(LiteMQError): ...
class InternalError(LiteMQError): ...

class EncryptionError(LiteMQError):
    file: str | None

class WrongKeyError(EncryptionError): ...

@final
class Message:
    @property
    def seq(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def key(self) -> str | bytes | None: ...
    @property
    def headers(self) -> dict[str, str | bytes]: ...
    @property
    def topic(self) -> str | None: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def expires_at(self) -> int | None: ...
    @property
    def topic_offset(self) -> int | None: ...
    @property
    def compression(self) -> Literal["zstd", "lz4", "gzip"] | None: ...
    @property
    def tombstone(self) -> bool: ...
    @property
    def datetime(self) -> datetime: ...
    @property
    def position(self) -> tuple[str, int] | None: ...
    def payload_view(self) -> memoryview: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class _Notifier:
    def __new__(cls) -> Self: ...
    def fileno(self) -> int: ...
    def drain(self) -> list[tuple[int, BaseException | None]]: ...

@final
class PayloadView:
    def __len__(self) -> int: ...

@final
class Appender:
    def append(
        self,
        payload: Buffer,
        key: _Key | None = None,
        headers: Mapping[str, _HeaderValue] | None = None,
        *,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        priority: int | None = None,
        ttl: timedelta | float | str | None = None,
        expires_at: datetime | int | None = None,
        compress: bool | Literal["zstd", "lz4", "gzip"] | None = None,
    ) -> int: ...
    def append_batch(
        self, items: Iterable[_BatchItem], *, compress_together: bool = False
    ) -> range: ...
    def delete(self, key: _Key) -> int: ...
    def flush(self) -> None: ...
    def roll(self) -> None: ...
    def flush_async(self) -> Coroutine[Any, Any, None]: ...
    def __reduce__(self) -> NoReturn: ...
    def _flush_notify(self, notifier: _Notifier, token: int) -> None: ...

@disjoint_base
class Tailer:
    def __iter__(self) -> Self: ...
    def __next__(self) -> Message: ...
    def read_next(self, timeout: float | None = 0.0) -> Message | None: ...
    @overload
    def read_batch(
        self, max_messages: int, timeout: float | None = None, *, payloads: Literal[False] = False
    ) -> list[Message]: ...
    @overload
    def read_batch(
        self, max_messages: int, timeout: float | None = None, *, payloads: Literal[True]
    ) -> list[bytes]: ...
    @overload
    def read_batch(
        self, max_messages: int, timeout: float | None = None, *, payloads: bool
    ) -> list[Message] | list[bytes]: ...
    def follow(self, idle_timeout: float | None = None) -> Follow: ...
    def read_next_async(
        self, timeout: float | None = None
    ) -> Coroutine[Any, Any, Message | None]: ...
    def follow_async(self, idle_timeout: float | None = None) -> FollowAsync: ...
    def _watch(self, notifier: _Notifier, token: int) -> int: ...
    def _unwatch(self, id: int) -> None: ...
    def _read_columns(self, max_rows: int, columns: list[str] | None = None) -> dict[str, Any]: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def seek(self, seq: int) -> None: ...
    def __reduce__(self) -> NoReturn: ...
    def seek_time(self, when: datetime | int) -> None: ...
    def seek_topic_offset(self, offset: int) -> None: ...
    def seek_end(self) -> None: ...
    def skip_damaged(self) -> bool: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def direction(self) -> Literal["forward", "backward"]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class Consumer(Tailer):
    def commit(self, seq: int | None = None, *, durable: bool = False) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def committed_seq(self) -> int: ...
    @property
    def committed_at(self) -> datetime: ...
    @property
    def auto_commit(self) -> bool: ...

@final
class Follow:
    def __iter__(self) -> Self: ...
    def __next__(self) -> Message: ...
    def __reduce__(self) -> NoReturn: ...

@final
class Job:
    @property
    def message(self) -> Message: ...
    @property
    def deliveries(self) -> int: ...
    @property
    def id(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def group(self) -> str: ...

@final
class WorkQueue:
    def get(self, timeout: float | None = None) -> Job | None: ...
    def get_async(self, timeout: float | None = None) -> Coroutine[Any, Any, Job | None]: ...
    def _watch(self, notifier: _Notifier, token: int) -> int: ...
    def _unwatch(self, id: int) -> None: ...
    def ack(self, job: Job) -> bool: ...
    def nack(self, job: Job, delay: float | None = None) -> bool: ...
    def extend(self, job: Job, timeout: float | None = None) -> bool: ...
    def pending(self, limit: int | None = None) -> list[dict[str, Any]]: ...
    def claim(self, seq: int, *, force: bool = False) -> Job | None: ...
    def release(self, job: Job | int) -> bool: ...
    def stats(self) -> dict[str, Any]: ...
    def sync(self) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def visibility_timeout(self) -> float: ...
    @property
    def max_deliveries(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> None: ...

@disjoint_base
class Queue:
    def __new__(
        cls,
        path: str | PathLike[str],
        *,
        file_size: int | str | None = None,
        roll: RollSpec | None = None,
        flush: FlushSpec | None = None,
        index_interval: int | None = None,
        verify_on_startup: bool | None = None,
        read_only: bool | None = None,
        channel_capacity: int | None = None,
        wait: WaitSpec | None = None,
        key_index: Mapping[str, int] | None = None,
        retention: Retention | None = None,
        multi_writer: bool | None = None,
        indexes: Mapping[str, Literal["str", "int"]] | None = None,
        compression: _Compression | None = None,
        compression_level: int | None = None,
        compression_min_size: int | str | None = None,
        max_decompressed_size: int | str | None = None,
        compact: bool | timedelta | float | str | None = None,
        encryption_key: bytes | None = None,
        encryption_key_file: str | PathLike[str] | None = None,
    ) -> Self: ...
    def appender(self) -> Appender: ...
    def __reduce__(self) -> NoReturn: ...
    @overload
    def tailer(
        self,
        start: int | Literal["start", "end"] | None = None,
        *,
        name: None = None,
        auto_commit: Literal[False] = False,
        direction: Literal["forward", "backward"] = "forward",
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        skip_expired: bool = False,
    ) -> Tailer: ...
    @overload
    def tailer(
        self,
        start: int | Literal["start", "end"] | None = None,
        *,
        name: str,
        auto_commit: bool = False,
        direction: Literal["forward"] = "forward",
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        skip_expired: bool = False,
        reset: bool = False,
        auto_reset: Literal["earliest", "latest", "error"] = "error",
    ) -> Consumer: ...
    def seq_for_time(self, when: datetime | int) -> int: ...
    def _consumers(self) -> list[ConsumerInfo]: ...
    def _topics(self) -> list[TopicInfo]: ...
    def remove_consumer(self, name: str) -> bool: ...
    def work_queue(
        self,
        name: str,
        *,
        visibility_timeout: float | None = None,
        max_deliveries: int = 5,
        dead_letter: str | PathLike[str] | Queue | None = None,
        start: int | str | None = None,
        window: int | None = None,
        priority: bool = False,
        max_wait: float = 60.0,
        dead_letter_expired: bool = False,
        ordered_by: Literal["key"] | None = None,
    ) -> WorkQueue: ...
    def _work_queues(self) -> list[WorkQueueInfo]: ...
    def _work_queue_pending(self, name: str, limit: int | None = None) -> list[dict[str, Any]]: ...
    def remove_work_queue(self, name: str) -> bool: ...
    def _apply_retention(self, policy: Retention | None = None) -> RetentionReport: ...
    def _data_files(self) -> list[DataFileInfo]: ...
    def _delete_files_before(self, before: int) -> dict[str, Any]: ...
    def _compact(
        self, grace_us: int, progress: Callable[[int, int], object] | None = None
    ) -> CompactReport: ...
    def get(self, seq: int) -> Message: ...
    def get_latest(self, key: _Key) -> Message | None: ...
    def find(
        self,
        key: _Key,
        start: datetime | int | None = None,
        end: datetime | int | None = None,
        limit: int | None = None,
        *,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
    ) -> list[Message]: ...
    @property
    def indexes(self) -> dict[str, str]: ...
    def add_index(
        self,
        name: str,
        type: Literal["str", "int"] = "str",
        *,
        progress: Callable[[int, int], object] | None = None,
    ) -> int: ...
    def drop_index(self, name: str) -> int: ...
    def _check_indexes(self) -> list[dict[str, str]]: ...
    def where(
        self,
        field: str,
        op: Literal["=", "==", "between", "in", ">=", "<=", "prefix"],
        value: Any,
        *,
        start: datetime | int | None = None,
        end: datetime | int | None = None,
        limit: int | None = None,
    ) -> list[Message]: ...
    @property
    def first_seq(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def queue_id(self) -> str | None: ...
    @property
    def read_only(self) -> bool: ...
    def __len__(self) -> int: ...
    def _stats(self) -> Stats: ...
    def _read_batch(
        self,
        start: int,
        end: int,
        max_rows: int,
        columns: list[str] | None = None,
        raw: bool = False,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        fields: list[str] | None = None,
        where_: tuple[str, str, Any] | None = None,
    ) -> dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
