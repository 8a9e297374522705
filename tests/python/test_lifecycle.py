"""A queue's life cycle: interpreter exit with threads blocked in litemq calls,
`close()` releasing every handle, mapping, descriptor and lock, and `close()`
of a poisoned writer.

What a long-running service relies on: a normal exit keeps every appended
message (even with a daemon thread blocked in `follow()`, `read_next`, a
sync `append` or `flush()`), a closed queue leaves nothing of its directory
mapped or open (so deleted files free their space and a file system can be
unmounted), and a queue can be closed and reopened in the same process,
named tailers included, also after its writer failed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, run_python

# -- helpers -----------------------------------------------------------------


def held_under(path: Path) -> list[str]:
    """Mappings and open descriptors of this process on files under `path`."""
    root = str(path.resolve())
    inside = (root + "/", root + " ")
    found = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith(inside):
            found.append("map " + parts[5])
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor listdir itself used
        if target.startswith(inside):
            found.append("fd " + target)
    return found


def fill(q: litemq.Queue, n: int) -> None:
    app = q.appender()
    for i in range(n):
        app.append(b"m%d" % i, key=f"k{i % 3}", headers={"i": str(i)})
    app.flush()


# -- 1. interpreter exit with a daemon thread blocked in a call --------------

#: A child that appends 300k messages asynchronously and exits without
#: closing, while a daemon thread is blocked in one kind of call.
EXIT_CHILD = """
import sys, threading, time
import litemq

path, other, kind = sys.argv[1], sys.argv[2], sys.argv[3]
q = litemq.Queue(path, file_size="4MiB")
app = q.appender()
ready = threading.Event()

if kind == "follow":
    t = q.tailer(start="end")
    def run():
        ready.set()
        for _ in t.follow():
            pass
elif kind == "follow_named":
    t = q.tailer(name="worker", start="end", auto_commit=True)
    def run():
        ready.set()
        for _ in t.follow():
            pass
elif kind == "read_next":
    t = q.tailer(start="end")
    def run():
        ready.set()
        while True:
            t.read_next(timeout=1000.0)
elif kind == "flush":
    def run():
        ready.set()
        while True:
            app.flush()
elif kind == "sync_append":
    # A second queue in flush="sync" mode: its appends wait for the disk.
    sq = litemq.Queue(other, file_size=SMALL_FILE, flush="sync")
    s = sq.appender()
    def run():
        ready.set()
        while True:
            s.append(b"sync")

threading.Thread(target=run, daemon=True).start()
ready.wait()
time.sleep(0.05)
for i in range(300_000):
    app.append(i.to_bytes(4, "little"))
print("appended", flush=True)
""".replace("SMALL_FILE", str(SMALL_FILE))


@pytest.mark.parametrize("kind", ["follow", "follow_named", "read_next", "flush", "sync_append"])
def test_exit_with_daemon_thread_blocked_keeps_every_message(tmp_path: Path, kind: str) -> None:
    path, other = tmp_path / "q", tmp_path / "sync"
    proc = run_python(EXIT_CHILD, str(path), str(other), kind, check=False)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout
    assert proc.stdout == "appended\n"
    with litemq.Queue(path, read_only=True) as q:
        assert (q.first_seq, q.next_seq) == (0, 300_000)
        for i, m in enumerate(q):
            assert (m.seq, m.payload) == (i, i.to_bytes(4, "little"))
    if kind == "sync_append":
        # Every sync append that returned is there, the interrupted one
        # too (close wrote it) or not at all; the queue is intact.
        with litemq.Queue(other, read_only=True) as s:
            assert s.next_seq > 0
            assert [m.payload for m in s] == [b"sync"] * s.next_seq


def test_exit_without_threads_still_keeps_every_message(tmp_path: Path) -> None:
    code = """
    import sys, litemq
    q = litemq.Queue(sys.argv[1], file_size="4MiB")
    app = q.appender()
    app.append_batch([b"x"] * 100_000)
    for i in range(100_000):
        app.append(b"y")
    """
    run_python(code, str(tmp_path / "q"))
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        assert len(q) == 200_000


# -- 5. close() closes every handle and releases every file ------------------


def test_close_closes_every_handle(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE, index_interval=4)
    fill(q, 300)
    app = q.appender()
    t = q.tailer()
    assert next(t).seq == 0
    named = q.tailer(name="billing")
    assert named.read_next() is not None
    q.close()

    calls: list[tuple[str, Callable[[], object]]] = [
        ("len", lambda: len(q)),
        ("first_seq", lambda: q.first_seq),
        ("next_seq", lambda: q.next_seq),
        ("stats", q.stats),
        ("consumers", q.consumers),
        ("data_files", q.data_files),
        ("append", lambda: app.append(b"x")),
        ("flush", app.flush),
        ("tailer next", lambda: next(t)),
        ("tailer read_next", lambda: t.read_next(timeout=0.01)),
        ("tailer seek", lambda: t.seek(0)),
        ("tailer next_seq", lambda: t.next_seq),
        ("named read_next", named.read_next),
        ("named commit", named.commit),
        ("named committed_seq", lambda: named.committed_seq),
    ]
    outcomes = {}
    for what, call in calls:
        try:
            call()
            outcomes[what] = "no error"
        except litemq.ClosedError:
            outcomes[what] = "ClosedError"
    assert outcomes == dict.fromkeys(outcomes, "ClosedError")
    assert t.closed
    assert named.closed
    assert "closed" in repr(q)
    # Closing them again is harmless.
    t.close()
    named.close()
    q.close()


def test_leaving_with_closes_tailers(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        fill(q, 10)
        t = q.tailer()
    with pytest.raises(litemq.ClosedError):
        t.read_next()


@pytest.mark.parametrize("read_only", [False, True])
def test_close_unmaps_and_closes_every_file(qpath: Path, read_only: bool) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, index_interval=4) as w:
        fill(w, 7000)  # several data files, sparse indexes, a key index
        w.tailer(name="billing").close()
    q = litemq.Queue(qpath, file_size=SMALL_FILE, index_interval=4, read_only=read_only)
    assert len(q.data_files()) > 3
    tailers = [q.tailer(), q.tailer(start=3500), q.tailer(start="end")]
    for t in tailers[:2]:
        assert t.read_next() is not None
    named = q.tailer(name="billing")
    assert named.read_next() is not None
    assert [m.seq for m in q.find("k1", limit=3)] == [1, 4, 7]
    assert q.get(6999).seq == 6999
    assert q.stats().files > 3
    assert held_under(qpath), "the test should see the queue's files while open"
    q.close()
    assert held_under(qpath) == []
    for t in tailers:
        assert t.closed


def test_close_frees_the_space_of_deleted_files(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    fill(q, 5000)
    t = q.tailer()
    assert t.read_next() is not None
    files = q.data_files()
    assert len(files) > 2
    # Retention (here: by hand) deletes a file a tailer is reading.
    os.unlink(files[0].path)
    assert any("(deleted)" in h for h in held_under(qpath))
    q.close()
    assert held_under(qpath) == []


def test_reopen_queue_and_named_tailer_in_the_same_process(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    fill(q, 10)
    t = q.tailer(name="billing")
    assert [m.seq for m in t][:3] == [0, 1, 2]
    t.commit()
    q.close()
    # `t` still exists, but its name and the writer lock are free again.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q2:
        with q2.tailer(name="billing") as t2:
            assert t2.next_seq == 10
        q2.appender().append(b"more")
    assert t.closed


def test_close_wakes_a_thread_blocked_in_follow(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    fill(q, 3)
    t = q.tailer(name="worker")
    seen: list[int] = []
    errors: list[type[BaseException]] = []
    started = threading.Event()

    def run() -> None:
        started.set()
        try:
            for m in t.follow():
                seen.append(m.seq)
        except BaseException as e:
            # Not `e`: its traceback holds the last message, which keeps
            # its file mapped (a message's payload view is zero-copy).
            errors.append(type(e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait()
    while len(seen) < 3:
        thread.join(0.01)
    q.close()
    thread.join(10)
    assert not thread.is_alive()
    assert seen == [0, 1, 2]
    assert errors == [litemq.ClosedError]
    assert held_under(qpath) == []
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q2:
        q2.tailer(name="worker").close()  # the name is free


# -- 6. close() of a poisoned writer -----------------------------------------

POISON_CHILD = """
import os, resource, signal, sys
from pathlib import Path
import litemq
from test_lifecycle import held_under

path = Path(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
q = litemq.Queue(path, file_size=SMALL_FILE)
app = q.appender()
app.append(b"before")
app.flush()
t = q.tailer()
assert t.read_next().payload == b"before"

# No file may grow past 1 KiB: the next data file cannot be preallocated.
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
try:
    for i in range(1000):
        app.append(b"x" * 1000)
    app.flush()
    raise SystemExit("the writer was not poisoned")
except litemq.PoisonedError:
    pass
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

try:
    q.close()
except litemq.PoisonedError:
    print("close raised PoisonedError")
assert held_under(path) == [], held_under(path)
assert t.closed

# The space is back: the same process reopens the queue and goes on.
with litemq.Queue(path, file_size=SMALL_FILE) as q2:
    first = q2.next_seq
    q2.appender().append(b"after")
    q2.appender().flush()
    assert q2.get(0).payload == b"before"
    assert q2.get(first).payload == b"after"
print("reopened")
""".replace("SMALL_FILE", str(SMALL_FILE))


def test_close_of_a_poisoned_writer_releases_everything(tmp_path: Path) -> None:
    proc = run_python(
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n" + POISON_CHILD,
        str(tmp_path / "q"),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "close raised PoisonedError\nreopened\n"


def test_a_queue_of_seven_messages_has_small_files(tmp_path):
    """Issue 33, "Default files": with the default 1 GiB ``file_size`` a queue of 7
    messages used to show a 1 GiB data file and a 341 MiB ``.offsets`` file in ``ls -l``
    (sparse files that ``cp``, ``tar`` or ``scp`` without sparse support copy whole).
    Format 11: files grow with their data (docs/FORMAT.md, "Data files"), 1 MiB here."""
    path = tmp_path / "q"
    with litemq.Queue(str(path)) as q:
        app = q.appender()
        for i in range(7):
            app.append(b"message %d" % i)
        app.flush()
        with litemq.Queue(str(path), read_only=True) as r:
            assert [m.payload for m in r.tailer()] == [b"message %d" % i for i in range(7)]
    sizes = {p.suffix: p.stat().st_size for p in path.rglob("*") if p.is_file()}
    assert 4096 < sizes[".data"] <= 1 << 20, sizes
    assert sizes[".offsets"] <= 16 << 10, sizes
    assert sizes[".index"] <= 16 << 10, sizes
    assert sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) <= 2 << 20
