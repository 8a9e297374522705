"""Retention: which old data files a queue deletes, and what a pass did.

>>> q = litemq.Queue("/tmp/orders", retention=litemq.Retention(max_age=timedelta(days=7)))
>>> q.apply_retention().deleted_files
[]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from litemq import _litemq
from litemq.options import U64_MAX

__all__ = ["Retention", "RetentionReport", "parse_age"]

#: Longest ``max_age``: the engine counts it in µs, in 64 bits (about 584,542 years).
MAX_AGE = timedelta(microseconds=U64_MAX)

#: ``(max_age_us, max_bytes, max_files, protect_unconsumed)``: a policy's normalised form.
PolicyTuple = tuple[int | None, int | None, int | None, bool]


def parse_age(value: timedelta | float | str, what: str = "max_age") -> timedelta:
    """A duration from a ``timedelta``, seconds (int or float) or a string such as
    ``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` (a bare number is seconds).

    >>> parse_age("7d")
    datetime.timedelta(days=7)
    """
    return timedelta(microseconds=_litemq._parse_age(value, what))


@dataclass(frozen=True)
class Retention:
    """A retention policy: which old data files to delete.

    Every limit that is set holds after a pass, except that the file being
    written always stays and ``protect_unconsumed`` wins:

    - ``max_age``: delete a file once its newest message is older than this
      (a ``timedelta``, seconds, or a string like ``"7d"``; at most 2**64 - 1
      µs, about 584,542 years);
    - ``max_bytes``: keep at most this many bytes on disk: data, sparse-index,
      dense-index and key-index files, counted as the disk blocks they hold (an int or a
      string like ``"10GiB"``);
    - ``max_files``: keep at most this many data files (1 to 2**64 - 1);
    - ``protect_unconsumed``: never delete a file that a named tailer has not
      finished (its committed position is in or before the file).

    Deletion runs whenever the writer starts a new file, and on
    `Queue.apply_retention` / ``litemq retain PATH``.

    >>> q = litemq.Queue("/tmp/orders", retention=litemq.Retention(
    ...     max_age=timedelta(days=7), max_bytes="10GiB", protect_unconsumed=True))
    """

    max_age: timedelta | float | str | None = None
    max_bytes: int | str | None = None
    max_files: int | None = None
    protect_unconsumed: bool = False

    def __post_init__(self) -> None:
        self.to_tuple()  # checks every field

    def to_tuple(self) -> PolicyTuple:
        """The native form ``(max_age_us, max_bytes, max_files, protect_unconsumed)``.

        >>> Retention(max_files=3).to_tuple()
        (None, None, 3, False)
        """
        return _litemq._retention_tuple(self)


@dataclass(frozen=True)
class RetentionReport:
    """What a retention pass did (`Queue.apply_retention`).

    - ``deleted_files``: paths of the data files deleted, oldest first (their
      index files went too);
    - ``deleted_key_index_files``: key-index files deleted because every key
      in them pointed into deleted data files (the newest is always kept);
    - ``deleted_bytes``: bytes of disk all those files held (their blocks);
    - ``first_seq``: the first sequence still in the queue;
    - ``protected_files``: files a limit wanted gone but a named tailer has
      not consumed yet (only with ``protect_unconsumed=True``).

    >>> report = q.apply_retention()
    >>> report.first_seq == q.first_seq
    True
    """

    deleted_files: list[str] = field(default_factory=list)
    deleted_key_index_files: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    first_seq: int = 0
    protected_files: int = 0
