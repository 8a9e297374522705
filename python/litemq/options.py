"""Queue options: what `litemq.Queue(...)` accepts, checked and normalised.

The native module takes a plain form of each option; this module turns the
friendly spellings into it and raises `ConfigError` (a `ValueError`) or
`TypeError` with a message that says what was expected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeAlias

from litemq._litemq import ConfigError

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

PERIODS = ("minutely", "hourly", "daily")

#: Largest size or count any option takes: the engine holds them in 64 bits.
U64_MAX = (1 << 64) - 1

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


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
        if isinstance(self.bytes, bool) or not isinstance(self.bytes, int):
            raise TypeError(f"Batch bytes must be an int, not {type(self.bytes).__name__}")
        if not 0 <= self.bytes <= U64_MAX:
            raise ConfigError(f"Batch bytes must be between 0 and {U64_MAX}, got {self.bytes}")
        seconds = self.seconds
        if not seconds >= 0.0:
            raise ConfigError(f"Batch interval must be a number of seconds >= 0, got {seconds}")
        if self.bytes == 0 and seconds in (0.0, float("inf")):
            raise ConfigError(
                f"Batch needs bytes > 0 or a finite interval > 0 (got bytes=0, interval={seconds})"
            )

    @property
    def seconds(self) -> float:
        """The interval in seconds."""
        if isinstance(self.interval, timedelta):
            return self.interval.total_seconds()
        if isinstance(self.interval, bool) or not isinstance(self.interval, int | float):
            raise TypeError(
                f"Batch interval must be seconds (float) or a timedelta, "
                f"not {type(self.interval).__name__}"
            )
        try:
            return float(self.interval)
        except OverflowError:  # an int beyond any float: as long as inf
            return math.inf if self.interval > 0 else -math.inf


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
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int or a string like '64MiB', not bool")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _UNITS:
            raise ConfigError(
                f"{what} must be a number of bytes like 4096 or '64MiB', got {value!r}"
            )
        n = int(m.group(1)) * _UNITS[unit]
    else:
        raise TypeError(
            f"{what} must be an int or a string like '64MiB', not {type(value).__name__}"
        )
    if n <= 0:
        raise ConfigError(f"{what} must be positive, got {value!r}")
    if maximum is not None and n > maximum:
        raise ConfigError(f"{what} must be at most {maximum} bytes, got {value!r}")
    return n


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{what} must be a whole number, got {value!r}") from None
    if not 0 < n <= U64_MAX:
        raise ConfigError(f"{what} must be between 1 and {U64_MAX}, got {value!r}")
    return n


def _rule(rule: object) -> tuple[str, int]:
    if isinstance(rule, bool):
        raise TypeError("roll must be a period name, a size, 'count:N', or a combination, not bool")
    if isinstance(rule, int):
        return ("size", parse_size(rule, "roll size"))
    if isinstance(rule, str):
        text = rule.strip().lower()
        if text in PERIODS:
            return (text, 0)
        kind, sep, value = text.partition(":")
        if sep and kind.strip() == "count":
            return ("count", _count(value.strip(), "roll count"))
        if sep and kind.strip() == "size":
            return ("size", parse_size(value.strip(), "roll size"))
        raise ConfigError(
            f"roll rule {rule!r} is not one of 'minutely', 'hourly', 'daily', "
            "'size:N', 'count:N' or an int (bytes)"
        )
    raise TypeError(
        f"roll must be a period name, a size, 'count:N', or a combination, not {type(rule).__name__}"
    )


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
    if isinstance(spec, Mapping):
        rules: list[tuple[str, int]] = []
        for key, value in spec.items():
            if key == "period":
                if not isinstance(value, str) or value.lower() not in PERIODS:
                    raise ConfigError(f"roll period must be one of {PERIODS}, got {value!r}")
                rules.append((value.lower(), 0))
            elif key == "size":
                rules.append(("size", parse_size(value, "roll size")))
            elif key == "count":
                rules.append(("count", _count(value, "roll count")))
            else:
                raise ConfigError(f"unknown roll key {key!r} (expected period, size, count)")
        if not rules:
            raise ConfigError("roll dict needs at least one of period, size, count")
        return rules
    if isinstance(spec, list | tuple):
        if not spec:
            raise ConfigError("roll needs at least one rule")
        return [_rule(r) for r in spec]
    return [_rule(spec)]


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
    if isinstance(spec, Batch):
        return ("batch", spec.bytes, spec.seconds)
    if isinstance(spec, str):
        if spec in ("async", "sync"):
            return (spec, 0, 0.0)
        raise ConfigError(f"flush must be 'async', 'sync' or litemq.Batch(...), got {spec!r}")
    raise TypeError(
        f"flush must be 'async', 'sync' or litemq.Batch(...), not {type(spec).__name__}"
    )


def parse_wait(spec: WaitSpec) -> str:
    """Checks a wait option: ``"default"`` (spin a few µs, then sleep on the
    queue's wake-up word) or ``"busy-spin"`` (never sleeps, one core busy per
    waiting follower).
    """
    if not isinstance(spec, str):
        raise TypeError(f"wait must be 'default' or 'busy-spin', not {type(spec).__name__}")
    if spec not in ("default", "busy-spin"):
        raise ConfigError(f"wait must be 'default' or 'busy-spin', got {spec!r}")
    return spec


def parse_key_index(spec: Mapping[str, int]) -> tuple[int, int]:
    """Normalises ``{"slots": S, "items": I}`` (either may be left out) into
    ``(slots, items)`` for new key-index files.

    >>> parse_key_index({"slots": 1024})
    (1024, 2097152)
    """
    if not isinstance(spec, Mapping):
        raise TypeError(f"key_index must be a dict with slots and items, not {type(spec).__name__}")
    unknown = set(spec) - {"slots", "items"}
    if unknown:
        raise ConfigError(f"unknown key_index keys {sorted(unknown)} (expected slots, items)")
    slots = _count(spec.get("slots", 1 << 20), "key_index slots")
    items = _count(spec.get("items", 1 << 21), "key_index items")
    if slots >= 1 << 32 or items >= 1 << 32:
        raise ConfigError("key_index slots and items must be below 2**32")
    return (slots, items)
