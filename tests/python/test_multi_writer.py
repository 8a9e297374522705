"""Several writer processes on one queue (``multi_writer=True``), through the Python API."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, spawn_python

pytestmark = pytest.mark.multiprocess

WRITER = """
import sys, json, litemq
path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seqs = []
with litemq.Queue(path, file_size=256 * 1024, multi_writer=True) as q:
    app = q.appender()
    i = 0
    while i < n:
        if i % 3 == 0:
            seqs.append(app.append(f"{w}:{i}".encode(), key=f"k{w}-{i}"))
            i += 1
        else:
            m = min(50, n - i)
            r = app.append_batch([f"{w}:{j}".encode() for j in range(i, i + m)])
            seqs.extend(r)
            i += m
    app.flush()
print(json.dumps(seqs), flush=True)
"""

FOLLOWER = """
import sys, litemq
path, total = sys.argv[1], int(sys.argv[2])
nxt = {}
with litemq.Queue(path, read_only=True) as q:
    for k, msg in enumerate(q.tailer().follow(idle_timeout=60)):
        assert msg.seq == k, (msg.seq, k)
        w, i = map(int, msg.payload.decode().split(":"))
        assert i == nxt.get(w, 0), (w, i)
        nxt[w] = i + 1
        if k + 1 == total:
            break
print("ok", sum(nxt.values()), flush=True)
"""


def test_four_writer_processes_and_two_tailers(qpath: Path) -> None:
    writers, n = 4, 5000
    litemq.Queue(qpath, file_size=256 * 1024, multi_writer=True).close()
    followers = [spawn_python(FOLLOWER, str(qpath), str(writers * n)) for _ in range(2)]
    procs = [spawn_python(WRITER, str(qpath), str(w), str(n)) for w in range(writers)]
    returned: dict[int, list[int]] = {}
    for w, p in enumerate(procs):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        returned[w] = json.loads(out)
    for f in followers:
        out, err = f.communicate(timeout=300)
        assert f.returncode == 0, err
        assert out.split() == ["ok", str(writers * n)]

    # Every sequence was handed out exactly once, in order per writer.
    all_seqs = sorted(s for seqs in returned.values() for s in seqs)
    assert all_seqs == list(range(writers * n))
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        for w, seqs in returned.items():
            assert seqs == sorted(seqs)
            for i in range(0, n, 97):
                assert q.get(seqs[i]).payload == f"{w}:{i}".encode()
            for i in (0, 51, 102):  # the keyed single appends (i % 3 == 0 between batches)
                found = q.find(f"k{w}-{i}")
                assert [m.seq for m in found] == [seqs[i]]


FLOOD = """
import sys, litemq
path = sys.argv[1]
with litemq.Queue(path, file_size=256 * 1024, multi_writer=True) as q:
    app = q.appender()
    print("ready", flush=True)
    i = 0
    while True:
        app.append_batch([f"9:{j}".encode() * 20 for j in range(i, i + 500)])
        i += 500
"""


def test_writer_killed_mid_write_does_not_block_the_others(qpath: Path) -> None:
    q = litemq.Queue(qpath, file_size=256 * 1024, multi_writer=True)
    app = q.appender()
    mine = 0
    for _ in range(4):
        flood = spawn_python(FLOOD, str(qpath))
        assert flood.stdout is not None
        assert flood.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        flood.send_signal(signal.SIGKILL)
        flood.communicate(timeout=30)  # reaps it and closes its pipes
        started = time.monotonic()
        for _ in range(20):
            app.append(f"0:{mine}".encode())
            mine += 1
        assert time.monotonic() - started < 2.0
    app.flush()
    q.close()
    with litemq.Queue(qpath, verify_on_startup=True) as q:
        mine_seen = [m.payload for m in q.tailer() if m.payload.startswith(b"0:")]
        assert mine_seen == [f"0:{i}".encode() for i in range(mine)]
        assert q.stats().next_seq > mine


def test_single_writer_and_multi_writers_exclude_each_other(qpath: Path) -> None:
    # The lock is taken at the first append (issue 33): that is where writers collide.
    with litemq.Queue(qpath, file_size=SMALL_FILE) as single:
        single.appender()
        with (
            litemq.Queue(qpath, file_size=SMALL_FILE, multi_writer=True) as multi,
            pytest.raises(litemq.LockedError),
        ):
            multi.appender()
    with litemq.Queue(qpath, file_size=SMALL_FILE, multi_writer=True) as a:
        with litemq.Queue(qpath, file_size=SMALL_FILE, multi_writer=True) as b:
            assert a.appender().append(b"a") == 0
            assert b.appender().append(b"b") == 1
            assert a.stats().takeovers == 0
        with (
            litemq.Queue(qpath, file_size=SMALL_FILE, multi_writer=False) as single,
            pytest.raises(litemq.LockedError),
        ):
            single.appender()
        # Remembered: a plain open joins the writers.
        with litemq.Queue(qpath, file_size=SMALL_FILE) as c:
            assert c.appender().append(b"c") == 2
    with pytest.raises(TypeError):
        litemq.Queue(qpath, multi_writer=1)  # type: ignore[arg-type]
