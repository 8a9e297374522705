"""Key compaction: what `Queue.compact` did.

>>> report = q.compact(grace="1d")
>>> report.records_dropped
9900
"""

from __future__ import annotations

from dataclasses import dataclass

from litemq._litemq import DEFAULT_COMPACT_GRACE_US

__all__ = ["DEFAULT_GRACE", "CompactReport"]


def _age_text(micros: int) -> str:
    """``"1d"``, ``"12h"``, ``"90s"``: an age as ``grace=`` and ``--grace`` take it
    (the largest unit that divides it; ``"0"`` for none)."""
    if micros == 0:
        return "0"
    for unit, size in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if micros % (size * 1_000_000) == 0:
            return f"{micros // (size * 1_000_000)}{unit}"
    return f"{micros / 1_000_000}s"


#: How long a tombstone that is its key's latest message survives compaction,
#: by default: a day (Kafka's ``delete.retention.ms``). The engine's value (the
#: one ``compact=True`` uses), written as ``grace=`` takes it: ``"1d"``.
DEFAULT_GRACE = _age_text(DEFAULT_COMPACT_GRACE_US)


@dataclass(frozen=True)
class CompactReport:
    """What a key-compaction pass did (`Queue.compact`, ``litemq compact``).

    - ``files_examined``: sealed data files looked at (the file being written
      is never compacted; version-3 files, which have no footer, are skipped);
    - ``files_rewritten``: files that had something to drop and were rewritten;
    - ``records_dropped``: messages this pass turned into holes (superseded by a
      later message with the same key, or tombstones past the grace period);
    - ``tombstones_dropped``: of those, tombstones past the grace period;
    - ``bytes_before`` / ``bytes_after``: disk space (allocated blocks) of the
      rewritten files before and after. Files keep their length: the space
      comes back as unallocated ranges (``du``, not ``ls``, shows it).

    >>> r = q.compact(grace=0)
    >>> r.bytes_after <= r.bytes_before
    True
    """

    files_examined: int = 0
    files_rewritten: int = 0
    records_dropped: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    @property
    def bytes_reclaimed(self) -> int:
        """``bytes_before - bytes_after``: disk space given back."""
        return self.bytes_before - self.bytes_after
