"""Child writer for tests/python/test_crash.py and test_typed_engine.py: appends
until it is killed.

Usage: crash_writer.py PATH MODE FILE_SIZE SALT FLUSH_EVERY [SHAPE]

SHAPE says what is appended: ``bytes`` (the default: `payload`, one message
at a time, keyed by `key`) or, on a typed queue of `event_schema`, ``rows``
(`event`s one at a time, keyed), ``batches`` (lists of events given to
``append_batch``: stored row batches) or ``zbatches`` (``pyarrow``
RecordBatches with ``compress_together=True``: compressed row batches).

Every message is a function of (seq, salt), so the parent knows what each
sequence must hold. Lines written to stdout (flushed at once):
``R n`` ready (next seq n), ``D n`` every seq below n is durable (a sync
append returned, or a flush() did).
"""

from __future__ import annotations

import hashlib
import sys
from typing import TYPE_CHECKING, Any, Literal

import litemq

if TYPE_CHECKING:
    import pyarrow as pa

#: The shapes of typed appends (SHAPE other than ``bytes``).
TYPED_SHAPES = ("rows", "batches", "zbatches")


def payload(seq: int, salt: int) -> bytes:
    digest = hashlib.blake2b(f"{salt}:{seq}".encode(), digest_size=16).digest()
    length = digest[0] * 7 % 1500 if digest[1] % 4 else digest[0] % 24
    return seq.to_bytes(8, "little") + (digest * (length // 16 + 1))[:length]


def key(seq: int) -> str | None:
    return f"k{seq % 7}" if seq % 5 == 0 else None


def event_schema() -> pa.Schema:
    """The schema of the typed shapes: fixed-width, variable-width and nullable fields."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("i", pa.int64(), nullable=False),
            pa.field("salt", pa.int64(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("n", pa.int32()),
        ]
    )


def event(seq: int, salt: int) -> dict[str, Any]:
    """The event stored at `seq`: a text of 0 to 64 hex digits (little to
    compress), a null in every fourth `n`."""
    digest = hashlib.blake2b(f"{salt}:{seq}".encode(), digest_size=32).digest()
    return {
        "i": seq,
        "salt": salt,
        "text": digest.hex()[: digest[0] % 65],
        "n": None if seq % 4 == 0 else seq % 1000 - 500,
    }


def batch_len(seq: int, salt: int) -> int:
    """How many events the batch appended at `seq` holds (1 to 60)."""
    return hashlib.blake2b(f"{salt}/{seq}".encode(), digest_size=1).digest()[0] % 60 + 1


def flush_spec(mode: str) -> Literal["async", "sync"] | litemq.Batch:
    if mode == "batch":
        return litemq.Batch(bytes=16384, interval=0.002)
    return "sync" if mode == "sync" else "async"


def typed_options(shape: str) -> dict[str, Any]:
    """The options that make a queue take `shape`'s appends."""
    if shape == "bytes":
        return {}
    options: dict[str, Any] = {"schema": event_schema()}
    if shape == "zbatches":
        options["compression"] = "lz4"
    return options


def append_some(app: litemq.Appender, shape: str, seq: int, salt: int) -> int:
    """Appends at `seq` in `shape`; returns the next seq."""
    if shape == "bytes":
        got = app.append(payload(seq, salt), key=key(seq))
        assert got == seq, (got, seq)
        return seq + 1
    if shape == "rows":
        got = app.append(event(seq, salt), key=key(seq))
        assert got == seq, (got, seq)
        return seq + 1
    events = [event(s, salt) for s in range(seq, seq + batch_len(seq, salt))]
    if shape == "batches":
        r = app.append_batch(events)
    else:
        import pyarrow as pa

        rb = pa.RecordBatch.from_pylist(events, schema=event_schema())
        r = app.append_batch(rb, compress_together=True)
    assert r == range(seq, seq + len(events)), (r, seq)
    return r.stop


def main() -> None:
    path, mode, file_size, salt, flush_every = sys.argv[1:6]
    shape = sys.argv[6] if len(sys.argv) > 6 else "bytes"
    q = litemq.Queue(
        path,
        file_size=int(file_size),
        flush=flush_spec(mode),
        index_interval=8,
        key_index={"slots": 256, "items": 1024},
        **typed_options(shape),
    )
    app = q.appender()
    seq = q.next_seq
    out = sys.stdout
    out.write(f"R {seq}\n")
    out.flush()
    every = int(flush_every)
    salt_i = int(salt)
    while True:
        before = seq
        seq = append_some(app, shape, seq, salt_i)
        if mode == "sync":
            out.write(f"D {seq}\n")
            out.flush()
        elif seq // every != before // every:
            app.flush()
            out.write(f"D {seq}\n")
            out.flush()


if __name__ == "__main__":
    main()
