"""Child writer for tests/python/test_crash.py: appends until it is killed.

Usage: crash_writer.py PATH MODE FILE_SIZE SALT FLUSH_EVERY

Every message is a function of (seq, salt), so the parent knows what each
sequence must hold. Lines written to stdout (flushed at once):
``R n`` ready (next seq n), ``D n`` every seq below n is durable (a sync
append returned, or a flush() did).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Literal

import litemq


def payload(seq: int, salt: int) -> bytes:
    digest = hashlib.blake2b(f"{salt}:{seq}".encode(), digest_size=16).digest()
    length = digest[0] * 7 % 1500 if digest[1] % 4 else digest[0] % 24
    return seq.to_bytes(8, "little") + (digest * (length // 16 + 1))[:length]


def key(seq: int) -> str | None:
    return f"k{seq % 7}" if seq % 5 == 0 else None


def flush_spec(mode: str) -> Literal["async", "sync"] | litemq.Batch:
    if mode == "batch":
        return litemq.Batch(bytes=16384, interval=0.002)
    return "sync" if mode == "sync" else "async"


def main() -> None:
    path, mode, file_size, salt, flush_every = sys.argv[1:6]
    q = litemq.Queue(
        path,
        file_size=int(file_size),
        flush=flush_spec(mode),
        index_interval=8,
        key_index={"slots": 256, "items": 1024},
    )
    app = q.appender()
    seq = q.next_seq
    out = sys.stdout
    out.write(f"R {seq}\n")
    out.flush()
    every = int(flush_every)
    salt_i = int(salt)
    while True:
        got = app.append(payload(seq, salt_i), key=key(seq))
        assert got == seq, (got, seq)
        seq += 1
        if mode == "sync":
            out.write(f"D {seq}\n")
            out.flush()
        elif seq % every == 0:
            app.flush()
            out.write(f"D {seq}\n")
            out.flush()


if __name__ == "__main__":
    main()
