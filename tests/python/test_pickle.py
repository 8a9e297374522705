"""Pickling and copies: messages travel (multiprocessing, Spark); handles say
why they cannot and what to pass instead. Errors say where the damage is."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE


def _payload_and_key(msg: litemq.Message) -> tuple[bytes, str | bytes | None]:
    return msg.payload, msg.key


@pytest.fixture
def three(queue: litemq.Queue) -> litemq.Queue:
    app = queue.appender()
    app.append(b"plain")
    app.append(b"keyed", key="customer-7", headers={"h": "text", "b": b"\x00\x01"})
    app.append(b"\xff" * 100, key=b"\x00bytes")
    return queue


def test_a_message_pickles_to_an_equal_message(three: litemq.Queue) -> None:
    for msg in three.tailer():
        for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(msg, protocol=protocol))
            assert back == msg
            assert (back.seq, back.timestamp, back.payload) == (msg.seq, msg.timestamp, msg.payload)
            assert back.key == msg.key
            assert type(back.key) is type(msg.key)
            assert back.headers == msg.headers
            assert back.position == msg.position
            assert bytes(back.payload_view()) == msg.payload
    got = three.get(1)
    assert copy.copy(got) == got
    assert copy.deepcopy(got) == got


def test_messages_cross_to_worker_processes(three: litemq.Queue) -> None:
    msgs = list(three.tailer())
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        got = pool.map(_payload_and_key, msgs)
    assert got == [(m.payload, m.key) for m in msgs]


def test_position_names_the_data_file_and_frame_offset(three: litemq.Queue) -> None:
    msgs = list(three.tailer())
    files = three.data_files()
    for m in msgs:
        assert m.position is not None
        path, offset = m.position
        assert path == files[0].path
        assert offset >= 4096  # after the data file's header
    # Frames in order, each after the one before.
    offsets = [m.position[1] for m in msgs if m.position is not None]
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 3
    # `get` and `find` know it too.
    assert three.get(1).position == msgs[1].position
    assert three.find("customer-7")[0].position == msgs[1].position


def test_repr_shows_what_the_message_is(three: litemq.Queue) -> None:
    r = repr(three.get(1))
    assert r.startswith("Message(seq=1, timestamp=")
    assert "payload=b'keyed'" in r
    assert "key='customer-7'" in r
    long = repr(three.get(2))
    assert "(100 bytes)" in long


@pytest.mark.parametrize("what", ["queue", "tailer", "named", "appender", "follow"])
def test_handles_refuse_pickling_and_say_what_to_pass(three: litemq.Queue, what: str) -> None:
    handle = {
        "queue": lambda: three,
        "tailer": lambda: three.tailer(),
        "named": lambda: three.tailer(name="billing"),
        "appender": lambda: three.appender(),
        "follow": lambda: three.tailer().follow(),
    }[what]()
    with pytest.raises(TypeError, match="cannot be pickled") as info:
        pickle.dumps(handle)
    assert three.path in str(info.value)
    with pytest.raises(TypeError, match="cannot be pickled"):
        copy.copy(handle)


def test_corrupted_error_carries_file_and_offset_in_notes(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch([b"a" * 50, b"b" * 50, b"c" * 50])
        q.appender().flush()
        victim = q.get(1).position
    assert victim is not None
    path, offset = victim
    # Flip a payload byte of message 1: its CRC no longer matches.
    with open(path, "r+b") as f:
        f.seek(offset + 40)
        byte = f.read(1)
        f.seek(offset + 40)
        f.write(bytes([byte[0] ^ 0xFF]))
    with litemq.Queue(qpath, read_only=True) as q:
        t = q.tailer(start=1)
        with pytest.raises(litemq.CorruptedError) as info:
            t.read_next()
        err = info.value
        assert err.file == path
        assert err.offset == offset
        notes = err.__notes__
        assert f"file: {path}" in notes
        assert f"offset: {offset}" in notes
        assert "seq: 1" in notes
        assert any("skip_damaged" in n for n in notes)
        assert t.skip_damaged()
        msg = t.read_next()
        assert msg is not None
        assert msg.payload == b"c" * 50
