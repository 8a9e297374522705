"""Kill -9 at any moment, through the public Python API.

A child process (tests/python/crash_writer.py) appends in one flush mode and
reports what it was told is durable; the test SIGKILLs it at a random
moment, reopens the queue and checks: every message reported durable is
present and intact, no reader returns a partial message, sequences are
dense, the next append continues the sequence, and the key index finds
every surviving keyed message. Each queue is killed several times in a row.

CI runs ``CRASH_KILLS`` kills (default 40; the Rust harness in
tests/rust/crash.rs runs 210 more); ``SOAK=1`` runs 1000. ``CRASH_SEED`` replays.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import litemq

sys.path.insert(0, str(Path(__file__).parent))
from crash_writer import flush_spec, key, payload

WRITER = Path(__file__).parent / "crash_writer.py"
SOAK = os.environ.get("SOAK") == "1"
KILLS = int(os.environ.get("CRASH_KILLS", "1000" if SOAK else "40"))
SEED = int(os.environ.get("CRASH_SEED", str(time.time_ns())))


class Writer:
    """A crash_writer.py process and what it reported."""

    def __init__(
        self, path: Path, mode: str, file_size: int, salt: int, every: int, shape: str = "bytes"
    ) -> None:
        self.ready = threading.Event()
        self.durable = 0
        args = [str(path), mode, str(file_size), str(salt), str(every), shape]
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            tag, _, n = line.partition(" ")
            if tag == "R":
                self.ready.set()
            elif tag == "D":
                self.durable = max(self.durable, int(n))

    def kill(self) -> None:
        if self.proc.poll() is not None:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"writer exited by itself ({self.proc.returncode}): {err}")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.thread.join()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


def open_queue(path: Path, mode: str, file_size: int, **kw: object) -> litemq.Queue:
    return litemq.Queue(
        path,
        file_size=file_size,
        flush=flush_spec(mode),
        index_interval=8,
        key_index={"slots": 256, "items": 1024},
        **kw,  # type: ignore[arg-type]
    )


def check(q: litemq.Queue, salt: int, start: int, ctx: str) -> None:
    nxt = q.next_seq
    expect = start
    for m in q.tailer(start):
        assert m.seq == expect, f"{ctx}: sequences must be dense"
        assert m.payload == payload(m.seq, salt), f"{ctx}: seq {m.seq} is not what was appended"
        assert m.key == key(m.seq), f"{ctx}: key of {m.seq}"
        expect += 1
        if expect == nxt:
            break
    assert expect == nxt, f"{ctx}: a tailer must reach next_seq ({expect} != {nxt})"


def check_keys(q: litemq.Queue, ctx: str) -> None:
    nxt = q.next_seq
    for k in range(7):
        found = [m.seq for m in q.find(f"k{k}")]
        model = [s for s in range(nxt) if key(s) == f"k{k}"]
        assert found == model, f"{ctx}: find('k{k}') after recovery"


@pytest.mark.multiprocess
@pytest.mark.timeout(900 if SOAK else 240)
def test_kill9_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    print(f"CRASH_SEED={SEED}, {KILLS} kills")
    kills = 0
    by_mode = {"async": 0, "sync": 0, "batch": 0}
    started = time.monotonic()
    while kills < KILLS:
        mode = rng.choice(["async", "sync", "batch"])
        file_size = rng.choice([64 * 1024, 128 * 1024])
        salt = rng.getrandbits(32)
        every = rng.randint(1, 200)
        path = tmp_path / f"q{kills}"
        prev_next = 0
        for rnd in range(5):
            ctx = f"CRASH_SEED={SEED} mode={mode} file_size={file_size} round={rnd}"
            w = Writer(path, mode, file_size, salt, every)
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0, 0.15))  # during start-up and recovery
            else:
                assert w.ready.wait(30), f"{ctx}: writer never got ready"
                time.sleep(rng.uniform(0, 0.06))
            w.kill()
            kills += 1
            by_mode[mode] += 1
            with open_queue(path, mode, file_size) as q:
                nxt = q.next_seq
                assert nxt >= w.durable, f"{ctx}: {w.durable} durable, {nxt} recovered"
                assert nxt >= prev_next, f"{ctx}: lost messages closed cleanly before"
                check(q, salt, max(0, prev_next - 200), ctx)
                check_keys(q, ctx)
                prev_next = nxt
                if rnd == 4:
                    assert q.appender().append(payload(nxt, salt), key=key(nxt)) == nxt
        with open_queue(path, mode, file_size, verify_on_startup=True) as q:
            check(q, salt, 0, f"CRASH_SEED={SEED} final verify")
    print(f"{kills} kills {by_mode} in {time.monotonic() - started:.1f} s")
