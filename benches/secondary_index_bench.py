"""Secondary indexes: build cost, size, and a selective query against the baselines
measured in the same run.

    nice .venv/bin/python benches/secondary_index_bench.py [N] [FILE_SIZE_MIB]

N messages (default 2,000,000) of 100 B payloads, each with a ``customer`` header
(``c0`` .. ``c999``, so one customer is 0.1 % of the messages), in files of N / 8 messages
(``roll="count:..."``, 64 MiB at most, or FILE_SIZE_MIB) and one message more, so that the
data is in 8 sealed, indexed files and the active file holds one message.

1. Build cost: the queue is written without an index, then ``q.add_index("customer")``
   builds it for every sealed file (one walk of each file); time per file, per message,
   and extrapolated per GiB of data.
2. Size: bytes of the ``*.field-customer`` files per message they index.
3. Selective query, ``q.where("customer", "=", "c7")`` (0.1 % of N), against reading every
   message and filtering in Python (``msg.headers.get("customer") == "c7"``) and against
   SQLite (same rows: seq, customer, payload; an index on customer;
   ``SELECT seq, payload ... WHERE customer = ? ORDER BY seq``). Best of 3 rounds (the full
   scan: best of 2), interleaved, files in the page cache for all three.
4. The active file has no index file: N / 8 more messages are appended to it and the query
   is timed again, first once (the handle's first query builds its in-memory index of the
   active file by reading it), then best of 3 (the in-memory index is only extended).

Prints figures and ratios; asserts only that the three return the same sequences. Disk:
about N x 300 B in a temp dir, removed at the end.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import litemq

PAYLOAD = b"x" * 100
FILE_SIZE = 64 << 20
CUSTOMERS = 1000


def fill(path: str, n: int, file_size: int, start_at: int = 0, roll: int = 0) -> None:
    roll = roll or max(n // 8, 1)
    with litemq.Queue(path, file_size=file_size, roll=f"count:{roll}") as q:
        app = q.appender()
        batch = 10_000
        for start in range(start_at, start_at + n, batch):
            app.append_batch(
                [
                    {"payload": PAYLOAD, "headers": {"customer": f"c{i % CUSTOMERS}"}}
                    for i in range(start, min(start + batch, start_at + n))
                ]
            )
        app.flush()


def fill_sqlite(path: str, n: int) -> float:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, customer TEXT, payload BLOB)")
    db.executemany(
        "INSERT INTO m VALUES (?, ?, ?)",
        ((i, f"c{i % CUSTOMERS}", PAYLOAD) for i in range(n)),
    )
    db.commit()
    t1 = time.perf_counter()
    db.execute("CREATE INDEX m_customer ON m (customer)")
    db.commit()
    db.close()
    return time.perf_counter() - t1


def best(f, rounds: int) -> tuple[float, list[int]]:  # type: ignore[no-untyped-def]
    out: list[int] = []
    t = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = f()
        t = min(t, time.perf_counter() - t0)
    return t, out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    file_size = int(sys.argv[2]) << 20 if len(sys.argv) > 2 else FILE_SIZE
    base = tempfile.mkdtemp(prefix="litemq-secidx-")
    try:
        path = os.path.join(base, "q")
        t0 = time.perf_counter()
        fill(path, n, file_size)
        with litemq.Queue(path) as q:
            q.appender().append(b"last")  # rolls: the N messages are in sealed files
        print(f"wrote {n:,} messages in {time.perf_counter() - t0:.1f} s")
        data = sorted(Path(path).rglob("*.data"))
        sealed = data[:-1]
        sealed_bytes = sum(p.stat().st_size for p in sealed)

        with litemq.Queue(path) as q:
            t0 = time.perf_counter()
            indexed = q.add_index("customer", "str")
            build = time.perf_counter() - t0
            in_sealed = q.data_files()[-1].first_seq  # messages in sealed files
        assert indexed == len(sealed)
        ix_bytes = sum(p.stat().st_size for p in Path(path).rglob("*.field-customer"))
        print(
            f"build: {len(sealed)} sealed files ({sealed_bytes / len(sealed) / 2**20:.0f} MiB, "
            f"{in_sealed / len(sealed):,.0f} messages each): {build / len(sealed) * 1e3:.0f} ms "
            f"per file, {build / in_sealed * 1e9:.0f} ns per message, "
            f"{build / sealed_bytes * 2**30:.1f} s per GiB of data"
        )
        print(
            f"size: {ix_bytes / in_sealed:.2f} index bytes per message "
            f"({ix_bytes / sealed_bytes * 100:.2f} % of the data files)"
        )

        db_path = os.path.join(base, "m.db")
        t_sql_ix = fill_sqlite(db_path, n)
        print(f"sqlite: index built in {t_sql_ix:.1f} s")
        db = sqlite3.connect(db_path)

        q = litemq.Queue(path, read_only=True)

        def where() -> list[int]:
            return [m.seq for m in q.where("customer", "=", "c7")]

        def scan() -> list[int]:
            return [m.seq for m in q.tailer() if m.headers.get("customer") == "c7"]

        def sql() -> list[int]:
            rows = db.execute(
                "SELECT seq, payload FROM m WHERE customer = ? ORDER BY seq", ("c7",)
            ).fetchall()
            return [r[0] for r in rows]

        t_where = t_scan = t_sql = float("inf")
        for r in range(3):
            t, a = best(where, 1)
            t_where = min(t_where, t)
            if r < 2:
                t, b = best(scan, 1)
                t_scan = min(t_scan, t)
            t, c = best(sql, 1)
            t_sql = min(t_sql, t)
        assert a == b == c, (len(a), len(b), len(c))
        assert len(a) == len(range(7, n, CUSTOMERS))
        q.close()
        db.close()
        # Into the active file (it holds one message: N / 8 more fit): no index file.
        fill(path, n // 8, file_size, start_at=n, roll=n // 8 + 1)
        with litemq.Queue(path, read_only=True) as q2:
            in_active = q2.next_seq - q2.data_files()[-1].first_seq
            t_first, got = best(lambda: [m.seq for m in q2.where("customer", "=", "c7")], 1)
            t_active, got = best(lambda: [m.seq for m in q2.where("customer", "=", "c7")], 3)
        assert got[: len(a)] == a
        print(f"query customer = 'c7': {len(a):,} of {n:,} messages ({len(a) / n:.2%})")
        print(f"  q.where            {t_where * 1e3:9.1f} ms")
        print(f"  scan + filter (Py) {t_scan * 1e3:9.1f} ms   ({t_scan / t_where:.0f}x slower)")
        print(
            f"  SQLite (indexed)   {t_sql * 1e3:9.1f} ms   (where / sqlite = {t_where / t_sql:.2f})"
        )
        print(
            f"  q.where with {n // 8:,} more messages ({in_active:,} in the active file, the "
            "rest in files the writer sealed and indexed): first query "
            f"(reads the active file) {t_first * 1e3:.1f} ms, then {t_active * 1e3:.1f} ms; "
            f"{len(got):,} found"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
