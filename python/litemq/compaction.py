"""Key compaction: what `Queue.compact` did.

>>> report = q.compact(grace="1d")
>>> report.records_dropped
9900
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_GRACE", "CompactReport"]

#: How long a tombstone that is its key's latest message survives compaction,
#: by default: a day (Kafka's ``delete.retention.ms``).
DEFAULT_GRACE = "1d"


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
