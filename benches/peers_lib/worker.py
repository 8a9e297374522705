"""Child-process side: one store, one variant, one fresh process.

A fresh process per (store, variant) keeps the peaks of memory apart and
gives every store the same starting conditions: same interpreter, same
payloads, an empty directory, a warm page cache for what it just wrote.
The result is one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from .phases import current_rss, disk_usage, peak_rss, reset_peak, run_append, run_read
from .stores import BY_KEY, LitemqAppend, Unavailable


def payload_pool(size: int, count: int = 1000, seed: int = 8) -> list[bytes]:
    """``count`` distinct random payloads of ``size`` bytes (no store compresses them)."""
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


def run_store(spec: dict[str, Any]) -> dict[str, Any]:
    """Append then read one store in one variant; see ``peers.py`` for ``spec``."""
    store_cls = BY_KEY[spec["store"]]
    durable = spec["variant"] == "durable"
    n, size, cap = spec["n"], spec["size"], spec["cap"]
    base = Path(tempfile.mkdtemp(prefix=f"peers-{store_cls.key}-", dir=spec.get("dir")))
    pool = payload_pool(size)
    result: dict[str, Any] = {"store": store_cls.key, "variant": spec["variant"]}
    try:
        store_cls.check()
        store = store_cls(spec.get("options", {}))
        path = base / "store"
        reset_peak()
        store.open(path, durable)
        result["base_rss"] = current_rss()
        append = run_append(store, pool, n, cap)
        result["data_bytes"] = store.data_bytes()
        store.close()
        allocated, apparent = disk_usage(store.data_dir())
        result["append"] = append.as_dict()
        result["disk_allocated"] = allocated
        result["disk_apparent"] = apparent
        store = store_cls(spec.get("options", {}))
        store.open(path, durable)
        read = run_read(store, append.count, size, cap)
        store.close()
        result["read"] = read.as_dict()
        result["peak_rss"] = max(append.peak_rss, read.peak_rss)
    except Unavailable as exc:
        result["unavailable"] = str(exc)
    except Exception as exc:  # a peer that breaks is reported, not fatal
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return result


def run_lookups(spec: dict[str, Any]) -> dict[str, Any]:
    """litemq random ``get`` and key ``find`` on a queue of ``n`` messages."""
    n, size, cap = spec["n"], spec["size"], spec["cap"]
    keys = spec.get("keys", 10_000)
    base = Path(tempfile.mkdtemp(prefix="peers-litemq-lookups-", dir=spec.get("dir")))
    result: dict[str, Any] = {"store": "litemq_lookups", "variant": "default"}
    try:
        LitemqAppend.check()
        import litemq

        pool = payload_pool(size)
        key_names = [f"customer-{i}" for i in range(keys)]
        with litemq.Queue(str(base / "store")) as q:
            app = q.appender()
            written = 0
            append = app.append
            deadline = time.perf_counter() + 4 * cap
            while written < n and time.perf_counter() < deadline:
                for i in range(written, min(n, written + 1000)):
                    append(pool[i % 1000], key=key_names[i % keys])
                written = min(n, written + 1000)
            app.flush()
            result["messages"] = written
            result["keys"] = keys
            rng = random.Random(3)

            reset_peak()
            seqs = [rng.randrange(written) for _ in range(200_000)]
            get = q.get
            count = 0
            start = time.perf_counter()
            deadline = start + cap
            while count < len(seqs) and time.perf_counter() < deadline:
                for seq in seqs[count : count + 1000]:
                    get(seq)
                count += len(seqs[count : count + 1000])
            seconds = time.perf_counter() - start
            result["get"] = {"count": count, "seconds": seconds, "rate": count / seconds}

            result["peak_rss"] = peak_rss()
            if not hasattr(q, "find"):
                result["find"] = {"error": "Queue.find is not in this build of litemq"}
                return result
            find = q.find
            calls = found = 0
            start = time.perf_counter()
            deadline = start + cap
            while time.perf_counter() < deadline and calls < 100_000:
                found += len(find(key_names[rng.randrange(keys)]))
                calls += 1
            seconds = time.perf_counter() - start
            result["find"] = {
                "calls": calls,
                "messages": found,
                "seconds": seconds,
                "rate": calls / seconds,
                "messages_per_call": found / calls if calls else 0,
            }
            result["peak_rss"] = peak_rss()
    except Unavailable as exc:
        result["unavailable"] = str(exc)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    if spec["store"] == "random_get":
        from .random_get import run as run_random_get

        result = run_random_get(spec)
        result["pid"] = os.getpid()
        sys.stdout.write("\n" + json.dumps(result) + "\n")
        sys.stdout.flush()
        return 0
    run = run_lookups if spec["store"] == "litemq_lookups" else run_store
    result = run(spec)
    result["pid"] = os.getpid()
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0
