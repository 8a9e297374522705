"""Typed results of `Queue.stats()` and `Queue.data_files()`.

Frozen dataclasses with documented fields: the one Python declaration of
each; the native module builds them from the engine's structs
(``rust/python/results.rs``), so nothing converts them again here. They were dicts before; indexing
one like a dict (``q.stats()["files"]``) still works for now but raises a
``DeprecationWarning`` naming the attribute to use (``q.stats().files``);
``dataclasses.asdict`` gives a dict.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

__all__ = ["DataFileInfo", "RecoveryReport", "Stats"]


class _DictAccess:
    """``obj["field"]`` for code written when these were dicts (deprecated)."""

    __slots__ = ()
    # Not iterable: without this, iter() would fall back on __getitem__(0).
    __iter__ = None

    def __getitem__(self, name: str) -> Any:
        if name not in {f.name for f in fields(self)}:  # type: ignore[arg-type]
            raise KeyError(name)
        warnings.warn(
            f"{type(self).__name__} is a dataclass now: use .{name} instead of [{name!r}]",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, name)


@dataclass(frozen=True)
class RecoveryReport(_DictAccess):
    """What recovery found when the queue was opened (`Stats.recovery`).

    - ``cut_bytes``: bytes of a torn or invalid tail that were zeroed;
    - ``cut_at``: offset in the last file where the tail was cut, if it was;
    - ``cut_reason``: why the tail was cut (None when it was not);
    - ``repaired_end_marker``: a missing end-of-file marker was written into
      the previous file;
    - ``index_entries_rebuilt``: sparse-index entries rewritten;
    - ``dense_entries_rebuilt``: dense-index entries rewritten;
    - ``frames_verified``: frames checked by ``verify_on_startup``;
    - ``dropped_files``: newer data files removed because an older one ends
      before they start (a machine crash lost its unsynced tail);
    - ``finished_seals``: sealed files whose footer or trim a crash
      interrupted, finished now;
    - ``restored_length``: always ``False`` from format version 11 (files grow
      with their data, and a last file trimmed by a crash that lost its
      end-of-file marker is written on as it is); older versions set it when
      they gave such a file its full length back.

    >>> q.stats().recovery.cut_bytes
    0
    """

    cut_bytes: int
    cut_at: int | None
    cut_reason: str | None
    repaired_end_marker: bool
    index_entries_rebuilt: int
    dense_entries_rebuilt: int
    frames_verified: int
    dropped_files: tuple[str, ...]
    finished_seals: int
    restored_length: bool


@dataclass(frozen=True)
class Stats(_DictAccess):
    """Figures describing a queue, for monitoring (`Queue.stats()`).

    - ``first_seq``, ``next_seq``: the oldest message kept, and the sequence
      the next message gets; ``messages``: how many are kept, as ``len(q)``
      counts them (``next_seq - first_seq`` less the sequences key
      compaction's holes stand for: the messages a tailer reads);
    - ``files``: data files on disk;
    - ``disk_bytes``: bytes of disk the queue's files hold (data,
      sparse-, dense- and key-index files), counted in allocated blocks;
    - ``data_bytes_written``: bytes of the data files that hold data;
    - ``data_bytes_allocated``, ``index_bytes_allocated``: disk the data
      files, and the index files, hold;
    - writer only (0 on a read-only handle): ``durable_seq`` (every
      sequence below it is msync'd), ``syncs``, ``rolls`` (files started
      since open), ``compactions`` and ``compaction_errors`` (key-compaction
      passes run after a roll with ``compact=``, completed and failed),
      ``bytes_written`` (record bytes since open),
      ``appender_writes`` (batches an appending thread wrote itself while
      the I/O thread slept), ``takeovers`` (append locks taken over from
      dead writer processes);
    - ``wake_word``: blocking reads of this handle sleep on ``wake.ctl``
      (False: they poll); ``waiters``: followers registered on it now, in
      every process; ``wake_calls``, ``woken``, ``waiter_resets``: this
      handle's writer's ``FUTEX_WAKE`` calls, the followers they woke, and
      stale counts it reset (docs/DESIGN.md, "Waiting for the writer");
    - ``read_only``: opened with ``read_only=True``;
    - ``recovery``: what recovery found at open, a `RecoveryReport`.

    >>> s = q.stats()
    >>> (s.messages, s.files)
    (3, 1)
    """

    first_seq: int
    next_seq: int
    messages: int
    files: int
    disk_bytes: int
    data_bytes_written: int
    data_bytes_allocated: int
    index_bytes_allocated: int
    durable_seq: int
    syncs: int
    rolls: int
    compactions: int
    compaction_errors: int
    bytes_written: int
    appender_writes: int
    takeovers: int
    wake_word: bool
    waiters: int
    wake_calls: int
    woken: int
    waiter_resets: int
    read_only: bool
    recovery: RecoveryReport


@dataclass(frozen=True)
class DataFileInfo(_DictAccess):
    """One data file of a queue, as `Queue.data_files()` lists it (oldest first).

    - ``path``: the data file;
    - ``file_number``: its number (the name without the date directories);
    - ``first_seq``: sequence of its first message; ``end_seq``: one past
      its last (the next file's first, or the queue's end);
    - ``created``: when it was created (an aware UTC datetime);
    - ``size``: the largest it may grow to (``file_size`` when created);
    - ``bytes_written``: bytes holding data (header and frames);
    - ``bytes_allocated``: disk the data file holds;
    - ``index_bytes_allocated``: disk its sparse and dense indexes hold.

    >>> [(f.first_seq, f.end_seq) for f in q.data_files()]
    [(0, 1000), (1000, 1500)]
    """

    path: str
    file_number: int
    first_seq: int
    end_seq: int
    created: datetime
    size: int
    bytes_written: int
    bytes_allocated: int
    index_bytes_allocated: int
