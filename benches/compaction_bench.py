"""Key compaction: throughput and space reclaimed on an update-heavy keyed workload.

    nice .venv/bin/python benches/compaction_bench.py [N] [KEYS] [FILE_SIZE_MIB]

N messages (default 10,000,000) with a key drawn uniformly from KEYS keys (default
100,000; seeded, so every run writes the same queue) and a 24-byte payload; one in 200
is a tombstone (``app.delete(key)``) instead. Files of FILE_SIZE_MIB (default 64 MiB).

1. Append the queue (timed, for scale only).
2. ``q.compact(grace=0)``, timed: messages examined per second (every message of the
   queue is read twice: once for the latest sequence of each key, once in the file being
   rewritten), MB/s of data file, files rewritten, messages and tombstones dropped.
3. Space: disk blocks of the data files (``st_blocks``) before and after, and the
   report's ``bytes_before``/``bytes_after`` (the rewritten files only).
4. Checks (asserted): the survivors read by a tailer are exactly the latest message of
   each key (tombstones at the end of their key dropped) plus the active file, and
   ``get_latest`` of a sample of keys returns the right sequence. Then a forward read of
   the compacted queue is timed (it steps over the holes).
5. Counting what is there: ``len(q)`` of a new read-only handle leaves the holes out
   (asserted equal to the survivors), timed for the first call (each sealed file's
   footer read: ``hole_seqs``, format 11) and the next ones (one ``stat`` per sealed
   file).

Disk: about N x 60 B in a temp dir, removed at the end (even on failure).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import litemq

PAYLOAD = b"v" * 24


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*.data"))


def apparent_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.data"))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    file_size = (int(sys.argv[3]) if len(sys.argv) > 3 else 64) << 20
    rng = random.Random(20)
    draws = [rng.randrange(keys) for _ in range(n)]
    tomb = [rng.randrange(200) == 0 for _ in range(n)]
    tmp = Path(tempfile.mkdtemp(prefix="litemq-compaction-bench-"))
    try:
        path = tmp / "q"
        print(f"N={n:,} keys={keys:,} payload={len(PAYLOAD)} B file_size={file_size >> 20} MiB")
        t0 = time.perf_counter()
        with litemq.Queue(path, file_size=file_size) as q:
            app = q.appender()
            batch = 10_000
            for start in range(0, n, batch):
                stop = min(start + batch, n)
                run: list[tuple[bytes, str]] = []
                for i in range(start, stop):
                    if tomb[i]:
                        if run:
                            app.append_batch(run)
                            run = []
                        app.delete(f"key-{draws[i]}")
                    else:
                        run.append((PAYLOAD, f"key-{draws[i]}"))
                if run:
                    app.append_batch(run)
            app.flush()
            t_append = time.perf_counter() - t0
            files = q.data_files()
            active_from = files[-1].first_seq
        print(f"append: {t_append:.1f} s ({n / t_append:,.0f} msg/s), {len(files)} files")

        disk_before, size_before = disk_bytes(path), apparent_bytes(path)
        with litemq.Queue(path, read_only=True) as q:
            t0 = time.perf_counter()
            r = q.compact(grace=0)
            t_compact = time.perf_counter() - t0
        disk_after, size_after = disk_bytes(path), apparent_bytes(path)
        print(
            f"compact: {t_compact:.2f} s, {n / t_compact:,.0f} msg/s examined, "
            f"{size_before / t_compact / 1e6:,.0f} MB/s of data file; "
            f"{r.files_rewritten}/{r.files_examined} sealed files rewritten, "
            f"{r.records_dropped:,} dropped ({r.tombstones_dropped:,} tombstones)"
        )
        print(
            f"space (all data files, disk blocks): {disk_before / 1e6:,.1f} MB -> "
            f"{disk_after / 1e6:,.1f} MB ({100 * (1 - disk_after / disk_before):.1f} % reclaimed); "
            f"apparent size {size_before / 1e6:,.1f} MB -> {size_after / 1e6:,.1f} MB"
        )
        print(
            f"report (rewritten files): {r.bytes_before / 1e6:,.1f} MB -> "
            f"{r.bytes_after / 1e6:,.1f} MB"
        )

        # Checks against a model.
        latest: dict[int, int] = {}
        for i, k in enumerate(draws):
            latest[k] = i
        kept = sorted(
            i for i in range(n) if i >= active_from or (latest[draws[i]] == i and not tomb[i])
        )
        with litemq.Queue(path, read_only=True) as q:
            t0 = time.perf_counter()
            seqs = [m.seq for m in q.tailer()]
            t_read = time.perf_counter() - t0
            assert seqs == kept, (len(seqs), len(kept))
            for k in rng.sample(range(keys), 200):
                m = q.get_latest(f"key-{k}")
                if tomb[latest[k]]:
                    assert m is None
                else:
                    assert m is not None, k
                    assert m.seq == latest[k], k
        print(
            f"survivors: {len(kept):,} ({len(kept) - sum(1 for i in kept if i >= active_from):,} "
            f"in sealed files); forward read after compaction: {t_read:.2f} s "
            f"({n / t_read:,.0f} sequences/s incl. holes)"
        )
        print("checks: survivors == model, get_latest of 200 keys exact")

        with litemq.Queue(path, read_only=True) as q:
            t0 = time.perf_counter()
            length = len(q)
            t_first = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(100):
                assert len(q) == length
            t_again = (time.perf_counter() - t0) / 100
        assert length == len(kept), (length, len(kept))
        print(
            f"len after compaction: {length:,} (== survivors), first call "
            f"{t_first * 1e3:.2f} ms, then {t_again * 1e6:,.0f} us per call "
            f"({len(files)} files)"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.sync()


if __name__ == "__main__":
    main()
