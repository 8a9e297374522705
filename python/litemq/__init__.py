"""litemq: an embedded, persistent, append-only message queue (a journal).

>>> import litemq
>>> with litemq.Queue("/tmp/orders") as q:
...     app = q.appender()
...     app.append(b"order 1")
...     for msg in q.tailer():
...         print(msg.seq, msg.payload)
0
0 b'order 1'

Named tailers resume where they last committed, in this or a later process
(``q.tailer(name="billing")``, then ``t.commit()``); ``retention=litemq.Retention(...)``
bounds disk use (see `litemq.Retention`); `litemq.archive_queue` copies sealed files to shared
storage, `litemq.open_archive` reads them back and `litemq.restore` rebuilds a queue from
them; work queues hand each message to exactly one of many workers, with acks and redelivery
(``wq = q.work_queue("thumbnails")``, ``job = wq.get()``, ``wq.ack(job)``).

Errors form one tree under `LiteMQError`; OS failures are `OSError`
subclasses (with errno), bad argument types `TypeError`, bad values
`ValueError`.
"""

from litemq._litemq import (
    MAX_HEADER_NAME_LEN,
    MAX_HEADER_VALUE_LEN,
    MAX_HEADERS,
    MAX_KEY_LEN,
    Appender,
    ClosedError,
    CompactedError,
    ConfigError,
    Consumer,
    CorruptedError,
    EncryptionError,
    Follow,
    ForkedError,
    InternalError,
    Job,
    LiteMQError,
    LockedError,
    MaybeStoredError,
    Message,
    NotFoundError,
    PoisonedError,
    ReadOnlyError,
    SchemaError,
    Tailer,
    UnsupportedVersionError,
    WorkQueue,
    WrongKeyError,
    __version__,
    release_memory,
)
from litemq.archive import Archive, ArchiveError, ArchiveReport, archive_queue, open_archive
from litemq.archive_restore import RestoreReport, restore
from litemq.compaction import CompactReport
from litemq.consumers import ConsumerInfo
from litemq.options import Batch
from litemq.queue import Queue
from litemq.retention import Retention, RetentionReport
from litemq.schema import Aliases
from litemq.stats import DataFileInfo, RecoveryReport, Stats
from litemq.topics import TopicInfo
from litemq.work_queue import WorkQueueInfo

__all__ = [
    "MAX_HEADERS",
    "MAX_HEADER_NAME_LEN",
    "MAX_HEADER_VALUE_LEN",
    "MAX_KEY_LEN",
    "Aliases",
    "Appender",
    "Archive",
    "ArchiveError",
    "ArchiveReport",
    "Batch",
    "ClosedError",
    "CompactReport",
    "CompactedError",
    "ConfigError",
    "Consumer",
    "ConsumerInfo",
    "CorruptedError",
    "DataFileInfo",
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
    "PoisonedError",
    "Queue",
    "ReadOnlyError",
    "RecoveryReport",
    "RestoreReport",
    "Retention",
    "RetentionReport",
    "SchemaError",
    "Stats",
    "Tailer",
    "TopicInfo",
    "UnsupportedVersionError",
    "WorkQueue",
    "WorkQueueInfo",
    "WrongKeyError",
    "__version__",
    "archive_queue",
    "open_archive",
    "release_memory",
    "restore",
]
