"""Retention: which old data files a queue deletes, and what a pass did.

>>> q = litemq.Queue("/tmp/orders", retention=litemq.Retention(max_age=timedelta(days=7)))
>>> q.apply_retention().deleted_files
[]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from litemq._litemq import ConfigError
from litemq.options import U64_MAX, parse_size

__all__ = ["Retention", "RetentionReport", "parse_age"]

#: Longest ``max_age``: the engine counts it in µs, in 64 bits (about 584,542 years).
MAX_AGE = timedelta(microseconds=U64_MAX)

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

#: ``(max_age_us, max_bytes, max_files, protect_unconsumed)``: what the native module takes.
PolicyTuple = tuple[int | None, int | None, int | None, bool]


def parse_age(value: timedelta | float | str, what: str = "max_age") -> timedelta:
    """A duration from a ``timedelta``, seconds (int or float) or a string such as
    ``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` (a bare number is seconds).

    >>> parse_age("7d")
    datetime.timedelta(days=7)
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a timedelta, seconds or a string like '7d', not bool")
    if isinstance(value, timedelta):
        age = value
    elif isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{what} must be a finite number of seconds, got {value}")
        age = _seconds(value, what)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smhdw]?)\s*", value.lower())
        if m is None:
            raise ConfigError(
                f"{what} must be a duration like '7d', '12h', '30m', '45s' or '2w', got {value!r}"
            )
        age = _seconds(float(m.group(1)) * _AGE_UNITS[m.group(2) or "s"], what)
    else:
        raise TypeError(
            f"{what} must be a timedelta, seconds or a string like '7d', not {type(value).__name__}"
        )
    if age <= timedelta(0):
        raise ConfigError(f"{what} must be positive, got {value!r}")
    return age


def _seconds(seconds: float, what: str) -> timedelta:
    try:
        age = timedelta(seconds=seconds)
    except OverflowError:
        age = timedelta.max
    if age // timedelta(microseconds=1) > U64_MAX:
        raise ConfigError(f"{what} must be at most {MAX_AGE}, got {seconds} seconds")
    return age


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
        age = None
        if self.max_age is not None:
            age = parse_age(self.max_age) // timedelta(microseconds=1)
            if age > U64_MAX:
                raise ConfigError(f"max_age must be at most {MAX_AGE}, got {self.max_age!r}")
        size = None if self.max_bytes is None else parse_size(self.max_bytes, "max_bytes")
        files = self.max_files
        if files is not None:
            if isinstance(files, bool) or not isinstance(files, int):
                raise TypeError(f"max_files must be an int, not {type(files).__name__}")
            if files < 1:
                raise ConfigError(
                    f"max_files must be at least 1 (the file being written stays), got {files}"
                )
            if files > U64_MAX:
                raise ConfigError(f"max_files must be at most {U64_MAX}, got {files}")
        if not isinstance(self.protect_unconsumed, bool):
            raise TypeError(
                "protect_unconsumed must be True or False, "
                f"not {type(self.protect_unconsumed).__name__}"
            )
        return (age, size, files, self.protect_unconsumed)


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
