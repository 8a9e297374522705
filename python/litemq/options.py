"""Queue options: what `litemq.Queue(...)` accepts.

The options are checked and turned into the engine's types once, in Rust
(``rust/python/options.rs``), when the queue is opened: a wrong value raises
`ConfigError` (a `ValueError`) naming the option and its limits, a wrong
type `TypeError`. This module holds `Batch` (a plain data holder that checks
itself with the same parser), the type aliases of the option spellings, and
the ``parse_*`` functions, which return an option's normalised form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeAlias

from litemq import _litemq

__all__ = [
    "Batch",
    "FlushSpec",
    "RollSpec",
    "WaitSpec",
    "parse_flush",
    "parse_key_index",
    "parse_roll",
    "parse_size",
    "parse_wait",
]

#: Largest size or count any option takes: the engine holds them in 64 bits.
U64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class Batch:
    """Flush mode: force written bytes to disk (msync) once `bytes` are
    pending or `interval` seconds have passed since the last flush,
    whichever comes first.

    ``bytes`` is 0 to 2**64 - 1 (0: by time only). ``interval`` is seconds
    (a float, or a ``timedelta``) >= 0; ``float("inf")``, or any interval too
    long to represent (about 5.8e11 years), means by bytes only. One of the
    two must be able to fire, else `ConfigError`.

    >>> q = litemq.Queue("/tmp/q", flush=litemq.Batch(bytes=1 << 20, interval=0.01))
    """

    bytes: int = 1 << 20
    interval: float | timedelta = 0.01

    def __post_init__(self) -> None:
        _litemq._check_batch(self.bytes, self.interval)

    @property
    def seconds(self) -> float:
        """The interval in seconds."""
        return _litemq._check_batch(self.bytes, self.interval)[1]


RollRule: TypeAlias = str | int
RollSpec: TypeAlias = RollRule | Mapping[str, str | int] | Sequence[RollRule]
FlushSpec: TypeAlias = Literal["async", "sync"] | Batch
WaitSpec: TypeAlias = Literal["default", "busy-spin"]


def parse_size(value: str | int, what: str = "size", maximum: int | None = U64_MAX) -> int:
    """Bytes from an int or a string such as ``"64MiB"``, ``"1g"``, ``"4096"``,
    positive and at most `maximum` (None: the caller checks the bound).

    >>> parse_size("64MiB")
    67108864
    """
    return _litemq._parse_size(value, what, maximum)


def parse_roll(spec: RollSpec) -> list[tuple[str, int]]:
    """Normalises a roll option into ``[(kind, value), ...]`` (any rule rolls).

    Accepted spellings:

    - ``"daily"``, ``"hourly"``, ``"minutely"``: a new file each UTC period;
    - an int, ``"size:N"`` or ``"size:64MiB"``: once a file holds that many bytes;
    - ``"count:N"``: after N messages;
    - a dict ``{"period": "hourly", "size": "256MiB", "count": 1_000_000}``, or a
      list/tuple of rules: roll when any of them says so.

    A file is also rolled whenever it is full, whatever the rule.

    >>> parse_roll(["hourly", "count:1000"])
    [('hourly', 0), ('count', 1000)]
    """
    return _litemq._parse_roll(spec)


def parse_flush(spec: FlushSpec) -> tuple[str, int, float]:
    """Normalises a flush option into ``(mode, bytes, interval_seconds)``.

    ``"async"`` (default): the OS writes pages back when it likes;
    ``Appender.flush()`` forces it. ``"sync"``: every append returns once its
    bytes are on disk (appends waiting together share one msync).
    ``litemq.Batch(bytes=..., interval=...)``: msync in the background when
    either threshold is reached.

    >>> parse_flush("sync")
    ('sync', 0, 0.0)
    """
    return _litemq._parse_flush(spec)


def parse_wait(spec: WaitSpec) -> str:
    """Checks a wait option: ``"default"`` (spin a few µs, then sleep on the
    queue's wake-up word) or ``"busy-spin"`` (never sleeps, one core busy per
    waiting follower).
    """
    return _litemq._parse_wait(spec)


def parse_key_index(spec: Mapping[str, int]) -> tuple[int, int]:
    """Normalises ``{"slots": S, "items": I}`` (either may be left out) into
    ``(slots, items)`` for new key-index files.

    >>> parse_key_index({"slots": 1024})
    (1024, 2097152)
    """
    return _litemq._parse_key_index(spec)
