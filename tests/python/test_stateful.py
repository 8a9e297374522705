"""A hypothesis state machine: appends, batches, reads, seeks, close and
reopen, checked against a plain list of payloads."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import litemq

payloads = st.binary(max_size=300)
keys = st.none() | st.text(max_size=8) | st.binary(max_size=8)
header_maps = st.none() | st.dictionaries(
    st.text(min_size=1, max_size=5), st.text(max_size=5) | st.binary(max_size=5), max_size=3
)


class QueueMachine(RuleBasedStateMachine):
    """The queue must behave like an append-only list."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="litemq-stateful-"))
        self.path = self.dir / "q"
        self.model: list[tuple[bytes, str | bytes | None, dict[str, str | bytes]]] = []
        self.queue: litemq.Queue | None = None
        self.app: litemq.Appender | None = None
        self.tailer: litemq.Tailer | None = None
        self.position = 0  # what self.tailer reads next, per the model

    @initialize(roll=st.sampled_from(["daily", "count:7", "size:70000"]))
    def open(self, roll: str) -> None:
        self.roll = roll
        self._open()

    def _open(self) -> None:
        self.queue = litemq.Queue(self.path, file_size=64 * 1024, roll=self.roll, index_interval=4)
        self.app = self.queue.appender()
        self.tailer = self.queue.tailer()
        self.position = 0

    @rule(payload=payloads, key=keys, headers=header_maps)
    def append(
        self, payload: bytes, key: str | bytes | None, headers: dict[str, str | bytes] | None
    ) -> None:
        assert self.app is not None
        seq = self.app.append(payload, key=key, headers=headers)
        assert seq == len(self.model)
        self.model.append((payload, key, headers or {}))

    @rule(batch=st.lists(payloads | st.tuples(payloads, keys), max_size=20))
    def append_batch(self, batch: list[bytes | tuple[bytes, str | bytes | None]]) -> None:
        assert self.app is not None
        r = self.app.append_batch(batch)
        assert r == range(len(self.model), len(self.model) + len(batch))
        for item in batch:
            if isinstance(item, tuple):
                self.model.append((item[0], item[1], {}))
            else:
                self.model.append((item, None, {}))

    @rule()
    def flush(self) -> None:
        assert self.app is not None
        self.app.flush()

    @rule(n=st.integers(min_value=1, max_value=30))
    def read(self, n: int) -> None:
        assert self.app is not None
        assert self.tailer is not None
        self.app.flush()
        for _ in range(n):
            msg = self.tailer.read_next()
            if self.position == len(self.model):
                assert msg is None
                break
            assert msg is not None
            payload, key, headers = self.model[self.position]
            assert msg.seq == self.position
            assert msg.payload == payload
            assert bytes(msg.payload_view()) == payload
            assert msg.key == key
            assert msg.headers == headers
            self.position += 1

    @rule(n=st.integers(min_value=1, max_value=30))
    def read_batch(self, n: int) -> None:
        assert self.app is not None
        assert self.tailer is not None
        self.app.flush()
        batch = self.tailer.read_batch(n, timeout=0)
        want = self.model[self.position : self.position + n]
        assert [m.seq for m in batch] == list(range(self.position, self.position + len(want)))
        assert [(m.payload, m.key, m.headers) for m in batch] == want
        self.position += len(batch)

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def seek(self, data: st.DataObject) -> None:
        assert self.app is not None
        assert self.tailer is not None
        self.app.flush()
        seq = data.draw(st.integers(min_value=0, max_value=len(self.model)))
        self.tailer.seek(seq)
        self.position = seq
        assert self.tailer.next_seq == seq

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        assert self.queue is not None
        assert self.app is not None
        self.app.flush()
        seq = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        msg = self.queue.get(seq)
        assert (msg.seq, msg.payload, msg.key) == (seq, self.model[seq][0], self.model[seq][1])

    @rule()
    def close_and_reopen(self) -> None:
        assert self.queue is not None
        assert self.tailer is not None
        self.tailer.close()
        self.queue.close()
        self._open()
        assert self.queue is not None
        assert len(self.queue) == len(self.model)

    @invariant()
    def tailer_stands_after_what_it_handed_out(self) -> None:
        # Reads of single messages read ahead: the position must not show it.
        if self.tailer is not None:
            assert self.tailer.next_seq == self.position

    @invariant()
    def sequences_match_the_model(self) -> None:
        if self.queue is None or self.app is None:
            return
        self.app.flush()
        assert self.queue.first_seq == 0
        assert self.queue.next_seq == len(self.model)
        assert len(self.queue) == len(self.model)

    def teardown(self) -> None:
        if self.queue is not None:
            if self.model:
                # A last full read agrees with the model.
                self.app.flush()  # type: ignore[union-attr]
                got = [(m.payload, m.key, m.headers) for m in self.queue.tailer()]
                assert got == self.model
            self.queue.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestQueueMachine = QueueMachine.TestCase
