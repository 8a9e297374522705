"""LiteMQ broker stores (``litemq.interop.litemq_store``, pure Python): records per second.

Writes a store of N records (100-byte bodies, 5 topics, 2 tags, a key and a property each),
then reads it back through the commit log and through the consume queues, imports it into a
litemq queue and exports that queue again, printing each rate. A measurement, not a test:
it asserts nothing but that the export is the same bytes.

    .venv/bin/python benches/litemq_store_bench.py [N]      # default 100,000
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from litemq.interop.litemq_store import (
    LiteMQRecord,
    LiteMQStore,
    StoreWriter,
    export_queue,
    import_store,
)

FILE_SIZE = 8 << 20
CQ_FILE_SIZE = 24 * 100_000


def main(n: int) -> None:
    d = tempfile.mkdtemp(prefix="litemq-store-bench-")
    try:
        records = [
            LiteMQRecord(
                message_id=f"id-{i}",
                topic=f"topic-{i % 5}",
                tags=("a", "b"),
                keys=(f"k{i}",),
                properties=(("p", "v"),),
                body=b"x" * 100,
                store_timestamp=i,
            )
            for i in range(n)
        ]
        store, copy, queue = (os.path.join(d, x) for x in ("store", "copy", "q"))

        def rate(what: str, count: int, t0: float) -> None:
            print(f"{what:<28} {count / (time.perf_counter() - t0):>12,.0f} records/s")

        t0 = time.perf_counter()
        with StoreWriter(store, file_size=FILE_SIZE, consume_queue_file_size=CQ_FILE_SIZE) as w:
            for r in records:
                w.append_new(r)
        rate("write (append_new)", n, t0)
        t0 = time.perf_counter()
        with LiteMQStore(store) as s:
            count = sum(1 for _ in s.records())
        rate("read: commit log", count, t0)
        t0 = time.perf_counter()
        with LiteMQStore(store) as s:
            count = sum(1 for t in s.topics() for _ in s.messages(t))
        rate("read: consume queues", count, t0)
        t0 = time.perf_counter()
        report = import_store(store, queue)
        rate("import-litemq", report.records, t0)
        t0 = time.perf_counter()
        count = export_queue(queue, copy, file_size=FILE_SIZE, consume_queue_file_size=CQ_FILE_SIZE)
        rate("export-litemq", count, t0)
        for name in os.listdir(os.path.join(store, "commitlog")):
            a, b = (os.path.join(x, "commitlog", name) for x in (store, copy))
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read(), name
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
