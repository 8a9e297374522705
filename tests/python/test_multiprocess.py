"""Several processes on one queue, fork(), and Ctrl-C, with real subprocesses."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, run_python, spawn_python

pytestmark = pytest.mark.multiprocess

WRITER = """
import sys, litemq
path, n = sys.argv[1], int(sys.argv[2])
with litemq.Queue(path, file_size=64 * 1024, roll="count:500") as q:
    app = q.appender()
    print("ready", flush=True)
    sys.stdin.readline()            # wait until the readers are started
    for i in range(n):
        app.append(f"msg {i}".encode(), key=f"k{i % 7}")
        if i % 100 == 0:
            app.flush()
    app.flush()
print("done", flush=True)
"""

FOLLOWER = """
import sys, json, litemq
path, n = sys.argv[1], int(sys.argv[2])
with litemq.Queue(path, read_only=True) as q:
    t = q.tailer()
    print("ready", flush=True)
    seen = []
    for msg in t.follow(idle_timeout=60):
        seen.append([msg.seq, msg.payload.decode(), msg.key])
        if len(seen) == n:
            break
print(json.dumps(seen), flush=True)
"""


def test_writer_and_tailers_in_other_processes(qpath: Path) -> None:
    n = 3000
    litemq.Queue(qpath, file_size=SMALL_FILE).close()  # create it, then let go
    readers = [spawn_python(FOLLOWER, str(qpath), str(n)) for _ in range(2)]
    for r in readers:
        assert r.stdout is not None
        assert r.stdout.readline().strip() == "ready"
    writer = spawn_python(WRITER, str(qpath), str(n))
    assert writer.stdout is not None
    assert writer.stdin is not None
    assert writer.stdout.readline().strip() == "ready"
    writer.stdin.write("go\n")
    writer.stdin.flush()
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert out.strip() == "done"
    expected = [[i, f"msg {i}", f"k{i % 7}"] for i in range(n)]
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == expected
    with litemq.Queue(qpath, read_only=True) as q:
        assert len(q) == n
        assert len(list(qpath.rglob("*.data"))) >= n // 500


HOLDER = """
import sys, litemq
with litemq.Queue(sys.argv[1], file_size=64 * 1024) as q:
    q.appender().append(b"held")
    q.appender().flush()
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_second_writer_process_is_refused_with_the_holders_pid(qpath: Path) -> None:
    holder = spawn_python(HOLDER, str(qpath))
    assert holder.stdout is not None
    assert holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        # The lock is taken at the first append (issue 33): that is where a second writer is refused.
        with (
            litemq.Queue(qpath, file_size=SMALL_FILE) as other,
            pytest.raises(litemq.LockedError) as info,
        ):
            other.appender()
        assert info.value.pid == holder.pid
        assert str(holder.pid) in str(info.value)
        assert litemq._litemq.writer_pid(qpath) == holder.pid
        # Readers are not blocked by the writer.
        with litemq.Queue(qpath, read_only=True) as q:
            assert q.get(0).payload == b"held"
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.communicate(timeout=60)
    assert holder.returncode == 0
    # Once the holder is gone, writing works again.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        assert q.appender().append(b"mine") == 1
    assert litemq._litemq.writer_pid(qpath) is None


def test_lock_of_a_killed_writer_does_not_block(qpath: Path) -> None:
    holder = spawn_python(HOLDER, str(qpath))
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.communicate(timeout=60)
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        assert q.get(0).payload == b"held"
        assert q.appender().append(b"after the crash") == 1


FORK = """
import os, sys, litemq
q = litemq.Queue(sys.argv[1], file_size=64 * 1024)
app = q.appender()
app.append(b"parent")
app.flush()
t = q.tailer()
pid = os.fork()
if pid == 0:
    results = []
    for name, call in [
        ("append", lambda: app.append(b"child")),
        ("flush", lambda: app.flush()),
        ("tailer", lambda: q.tailer()),
        ("get", lambda: q.get(0)),
        ("read", lambda: t.read_next()),
        ("len", lambda: len(q)),
    ]:
        try:
            call()
            results.append(f"{name}:no error")
        except litemq.ForkedError as e:
            results.append(f"{name}:ForkedError:{'fork' in str(e)}")
    # A queue opened in the child works (read-only: the parent still writes).
    with litemq.Queue(sys.argv[1], read_only=True) as mine:
        results.append(f"reopen:{[m.payload for m in mine.tailer()]}")
    print(";".join(results), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
app.append(b"parent again")
app.flush()
print("parent:", [m.payload for m in q.tailer()], os.waitstatus_to_exitcode(status), flush=True)
q.close()
"""


def test_fork_child_gets_forked_error_and_can_reopen(qpath: Path) -> None:
    proc = run_python(FORK, str(qpath), timeout=60)
    lines = proc.stdout.strip().splitlines()
    child = lines[0].split(";")
    assert child[:6] == [
        "append:ForkedError:True",
        "flush:ForkedError:True",
        "tailer:ForkedError:True",
        "get:ForkedError:True",
        "read:ForkedError:True",
        "len:ForkedError:True",
    ]
    assert child[6] == "reopen:[b'parent']"
    assert lines[1] == "parent: [b'parent', b'parent again'] 0"


BLOCKED = """
import sys, litemq
with litemq.Queue(sys.argv[1], file_size=64 * 1024) as q:
    t = q.tailer()
    try:
        print("waiting", flush=True)
        for msg in t.{call}:
            pass
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
"""


@pytest.mark.parametrize("call", ["follow()", "read_next(timeout=None) or []"])
def test_ctrl_c_interrupts_a_blocking_read(qpath: Path, call: str) -> None:
    proc = spawn_python(BLOCKED.replace("{call}", call), str(qpath))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "waiting"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "interrupted", err
    assert proc.returncode == 3


FUTEX_BLOCKED = """
import sys, litemq
with litemq.Queue(sys.argv[1], read_only=True) as q:
    t = q.tailer(start="end")
    try:
        print("waiting", flush=True)
        for msg in t.follow():
            pass
    except KeyboardInterrupt:
        print("interrupted", q.stats().waiters, flush=True)
        sys.exit(3)
"""


def _until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def test_ctrl_c_interrupts_a_follower_asleep_on_the_wake_word(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        proc = spawn_python(FUTEX_BLOCKED, str(qpath))
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        # Registered on the wake-up word: asleep in FUTEX_WAIT, GIL released.
        _until(lambda: q.stats().waiters == 1, "the follower to sleep")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert out.strip() == "interrupted 0", err  # deregistered on the way out
        assert proc.returncode == 3
        assert q.stats().waiters == 0


FORK_FOLLOW = """
import os, sys, time, litemq
q = litemq.Queue(sys.argv[1], file_size=64 * 1024)
app = q.appender()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    got = []
    with litemq.Queue(sys.argv[1], read_only=True) as mine:
        for msg in mine.tailer().follow(idle_timeout=30):
            got.append(msg.payload)
            os.write(w, b"x")
            if len(got) == 3:
                break
        print("child", got, mine.stats().wake_word, flush=True)
    os._exit(0)
os.close(w)
for i in range(3):
    deadline = time.monotonic() + 30
    while q.stats().waiters != 1:
        assert time.monotonic() < deadline, "the child never slept on the word"
        time.sleep(0.002)
    app.append(b"m%d" % i)
    assert os.read(r, 1) == b"x"
_, status = os.waitpid(pid, 0)
s = q.stats()
# Wakes that woke the child (its 50 ms re-check may beat a wake call).
print("parent", os.waitstatus_to_exitcode(status), s.wake_calls >= s.woken >= 1, flush=True)
q.close()
"""


def test_a_forked_child_sleeps_on_the_wake_word_and_is_woken(qpath: Path) -> None:
    proc = run_python(FORK_FOLLOW, str(qpath), timeout=120)
    lines = proc.stdout.strip().splitlines()
    assert lines == ["child [b'm0', b'm1', b'm2'] True", "parent 0 True"], proc.stderr
