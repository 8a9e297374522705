"""Structured Streaming through the JVM reader (``LiteMQStream`` in the jar) beside the Python
streaming source: the same offsets byte for byte, checkpoints that move from one to the other
in both directions, ``maxRecordsPerTrigger``, ``Trigger.AvailableNow``, a live writer in
another process, and damage as one error naming file and offset.

One Spark session with the jar on its classpath: ``readStream.format("litemq")`` is the JVM
stream there, and ``.option("reader", "python")`` hands the load to the Python source, so both
run in this session. Marked ``jvm``: ``make py-test`` runs it in its JVM pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from litemq.spark.source import _share  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = [*SPARK_MARKS, pytest.mark.jvm]

FEATURES = litemq.spark.features()
JVM = "litemq (JVM reader)"
FIXTURES_V10 = Path(__file__).resolve().parent.parent / "fixtures" / "queue-v10"
#: The smallest data file litemq allows: a few hundred messages roll files.
FILE_SIZE = 64 << 10


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-stream-jvm", reader="jvm")


def append(path: Path, start: int, n: int) -> None:
    """Append messages ``start .. start + n`` (payload ``m-<i>``) to the queue at ``path``."""
    with litemq.Queue(str(path), file_size=FILE_SIZE) as q:
        app = q.appender()
        for i in range(start, start + n):
            assert app.append(f"m-{i}".encode() + bytes(100)) == i
        app.flush()


class Run:
    """One streaming query into foreachBatch: the rows of every batch, by batch id, in order."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[tuple[str, int]]]] = []
        self.on_batch: Any = None

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted((r.queue, r.seq) for r in df.select("queue", "seq").collect())
        self.batches.append((batch_id, rows))
        if self.on_batch is not None:
            self.on_batch(batch_id)

    def rows(self) -> list[tuple[str, int]]:
        return sorted(r for _, rows in self.batches for r in rows)


def start(spark: Any, reader: str, src: Path, ckpt: Path, run: Run, **options: Any) -> Any:
    r = spark.readStream.format("litemq")
    if reader == "python":
        r = r.option("reader", "python")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(src)).writeStream.foreachBatch(run).option("checkpointLocation", str(ckpt))


def available_now(spark: Any, reader: str, src: Path, ckpt: Path, **options: Any) -> Run:
    run = Run()
    q = start(spark, reader, src, ckpt, run, **options).trigger(availableNow=True).start()
    assert q.awaitTermination(300), "an AvailableNow query stops by itself"
    assert q.exception() is None, q.exception()
    described = [s["description"] for p in q.recentProgress for s in p["sources"]]
    assert described, "the query reported its source"
    # Which source ran: the JVM stream says so; the Python one is Spark's Python wrapper.
    assert all((JVM in d) == (reader == "jvm") for d in described), described
    return run


def failure(writer: Any) -> str:
    """Start the query and return the error it fails with (it must fail)."""
    try:
        writer.start().awaitTermination(300)
    except Exception as e:  # StreamingQueryException, or an error of start()
        return str(e)
    raise AssertionError("the query did not fail")


def offsets_log(ckpt: Path) -> list[str]:
    """The source offset of every batch in the checkpoint, as written (the JSON text)."""
    logs = sorted(
        (p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    return [p.read_text().splitlines()[-1] for p in logs]


def forget_last_commit(ckpt: Path) -> int:
    """Drop the last batch's commit, as a crash between the offsets and commit logs leaves it:
    a restarted query runs that batch again. Returns its id."""
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(last)).unlink()
    crc = ckpt / "commits" / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    return last


def test_jvm_stream_runs_with_the_python_sources_offsets(spark: Any, tmp_path: Path) -> None:
    """Both sources over one dataset write the same offsets, byte for byte (a non-ASCII queue
    name included), and maxRecordsPerTrigger shares each batch as ``_share`` does."""
    src = tmp_path / "in"
    append(src / "a", 0, 250)
    append(src / "ü", 0, 40)
    runs, logs = {}, {}
    for reader in ("jvm", "python"):
        ckpt = tmp_path / f"ckpt-{reader}"
        runs[reader] = available_now(spark, reader, src, ckpt, maxRecordsPerTrigger=100)
        logs[reader] = offsets_log(ckpt)
        want = [("a", i) for i in range(250)] + [("ü", i) for i in range(40)]
        assert runs[reader].rows() == sorted(want)
    assert logs["jvm"] == logs["python"]
    if not FEATURES["admission_control"]:
        return
    # The batches the Python source's water filling grants, 100 rows at a time.
    expected, at = [], {"a": 0, "ü": 0}
    while at != {"a": 250, "ü": 40}:
        grant = _share({"a": 250 - at["a"], "ü": 40 - at["ü"]}, 100)
        at = {n: at[n] + grant[n] for n in at}
        expected.append(json.dumps(dict(sorted(at.items()))))
    assert logs["jvm"] == expected
    assert [len(rows) for _, rows in runs["jvm"].batches] == [100, 100, 90]


@pytest.mark.parametrize(("first", "then"), [("jvm", "python"), ("python", "jvm")])
def test_a_checkpoint_resumes_in_the_other_reader(
    spark: Any, tmp_path: Path, first: str, then: str
) -> None:
    """A query restarted on the other source from the same checkpoint replays an unfinished
    batch with the same rows, then reads only what is new: every message once."""
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    append(src / "a", 0, 250)
    one = available_now(spark, first, src, ckpt, maxRecordsPerTrigger=100)
    assert one.rows() == [("a", i) for i in range(250)]
    replayed = forget_last_commit(ckpt)
    append(src / "a", 250, 60)
    append(src / "b", 0, 30)  # a queue that did not exist: read from 0
    two = available_now(spark, then, src, ckpt, maxRecordsPerTrigger=100)
    assert two.batches[0] == (replayed, dict(one.batches)[replayed])
    new = [r for bid, rows in two.batches[1:] for r in rows]
    assert sorted(new) == [("a", i) for i in range(250, 310)] + [("b", i) for i in range(30)]
    assert json.loads(offsets_log(ckpt)[-1]) == {"a": 310, "b": 30}
    # Back on the first source: nothing new, nothing read.
    three = available_now(spark, first, src, ckpt, maxRecordsPerTrigger=100)
    assert three.rows() == []


@pytest.mark.parametrize("reader", ["jvm", "python"])
def test_available_now_stops_at_the_end_present_at_start(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    """Messages appended while an AvailableNow query runs wait for the next run."""
    if not FEATURES["trigger_available_now"]:
        pytest.skip("Spark's own AvailableNow wrapper on this PySpark")
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    append(src / "a", 0, 500)
    run = Run()
    run.on_batch = lambda batch_id: append(src / "a", 500, 300) if batch_id == 0 else None
    q = (
        start(spark, reader, src, ckpt, run, maxRecordsPerTrigger=100)
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    assert run.rows() == [("a", i) for i in range(500)]
    assert all(len(rows) <= 100 for _, rows in run.batches)
    assert available_now(spark, reader, src, ckpt).rows() == [("a", i) for i in range(500, 800)]


WRITER = textwrap.dedent(
    """
    import sys, time, litemq
    path, n, file_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with litemq.Queue(path, file_size=file_size) as q:
        app = q.appender()
        for i in range(n):
            app.append(f"m-{i}".encode() + bytes(100))
            if i % 200 == 199:
                app.flush()
                time.sleep(0.2)
        app.flush()
    """
)


def test_a_live_writer_is_followed(spark: Any, tmp_path: Path) -> None:
    """A writer in another process appends (rolling data files) while the JVM stream runs:
    the stream reads every message once, over several batches, up to the last."""
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    n = 4000
    append(src / "a", 0, 1)  # the queue exists when the stream starts
    run = Run()
    q = start(spark, "jvm", src, ckpt, run).trigger(processingTime="200 milliseconds").start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(src / "a"), str(n - 1), str(FILE_SIZE)], env=env
    )
    # The writer appends m-0.. again after the first message: sequences 1 .. n-1.
    try:
        deadline = time.monotonic() + 300
        while len(run.rows()) < n and time.monotonic() < deadline and q.isActive:
            time.sleep(0.5)
        assert writer.wait(60) == 0
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
        writer.kill()
    assert run.rows() == [("a", i) for i in range(n)]
    assert len([b for b in run.batches if b[1]]) >= 3, "followed in several batches"
    with litemq.Queue(str(src / "a"), read_only=True) as qq:
        assert len(qq.data_files()) >= 3, "the stream crossed sealed files"
    descriptions = {s["description"] for p in q.recentProgress for s in p["sources"]}
    assert all(JVM in d for d in descriptions), descriptions


def test_damage_is_one_error_naming_file_and_offset(spark: Any, tmp_path: Path) -> None:
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    append(src / "a", 0, 50)
    data = sorted((src / "a").glob("[0-9][0-9][0-9][0-9]/*/*/*.data"))[0]
    raw = bytearray(data.read_bytes())
    off = 4096
    (n,) = (int.from_bytes(raw[off : off + 4], "little"),)
    off += (4 + n + 8 + 7) // 8 * 8  # the second frame
    (n,) = (int.from_bytes(raw[off : off + 4], "little"),)
    raw[off + 4 + n - 1] ^= 0x55
    data.write_bytes(bytes(raw))
    with (
        pytest.raises(litemq.CorruptedError) as rust,
        litemq.Queue(str(src / "a"), read_only=True) as rq,
    ):
        list(rq.tailer(start=0))
    where = f"in {data} at offset {off} "
    rust_msg = str(rust.value)
    assert where in rust_msg, rust_msg
    msg = failure(start(spark, "jvm", src, ckpt, Run()).trigger(availableNow=True))
    assert "litemq: corrupted data " + rust_msg[rust_msg.index(where) :] in msg, msg


def test_batch_only_options_are_refused_as_the_python_source_does(
    spark: Any, tmp_path: Path
) -> None:
    src = tmp_path / "in"
    append(src / "a", 0, 5)
    for reader in ("jvm", "python"):
        writer = start(spark, reader, src, tmp_path / f"ckpt-{reader}", Run(), startSeq=2)
        msg = failure(writer.trigger(availableNow=True))
        assert "option startSeq applies to batch reads only" in msg, msg


def test_every_fixture_queue_streams_to_the_rust_readers_rows(spark: Any, tmp_path: Path) -> None:
    """The committed fixture queues (versions 3 to 10, every record kind) through the JVM
    stream, one AvailableNow query over all the plain ones and one over an encrypted one with
    its key: the Rust tailer's rows."""
    from test_spark_conformance import COLUMNS, QUEUES, key_file_for, norm, rust_rows

    def streamed(paths: list[Path], ckpt: Path, **options: Any) -> list[tuple]:
        got: list[tuple] = []

        def each(df: Any, batch_id: int) -> None:
            cols = ["queue", *COLUMNS.split(", ")]
            got.extend((r[0], norm(*r[1:])) for r in df.selectExpr(*cols).collect())

        r = spark.readStream.format("litemq").option("paths", json.dumps([str(p) for p in paths]))
        for k, v in options.items():
            r = r.option(k, v)
        q = (
            r.load()
            .writeStream.foreachBatch(each)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(300)
        assert q.exception() is None, q.exception()
        assert all(JVM in s["description"] for p in q.recentProgress for s in p["sources"])
        return sorted(got)

    plain = [p for p in QUEUES if key_file_for(p, tmp_path) is None]
    want = sorted((str(p.resolve()), row) for p in plain for row in rust_rows(p, None))
    assert streamed(plain, tmp_path / "ckpt-plain", maxRecordsPerTrigger=500) == want
    # The stream ends at each queue's next sequence as the Rust engine counts it (an active
    # file's published tail, past batch frames the sparse index points into).
    ends = {}
    for p in plain:
        with litemq.Queue(str(p), read_only=True) as q:
            ends[str(p.resolve())] = q.next_seq
    assert json.loads(offsets_log(tmp_path / "ckpt-plain")[-1]) == ends
    encrypted = FIXTURES_V10 / "encrypted"
    key = key_file_for(encrypted, tmp_path)
    assert key is not None
    want = sorted(("encrypted", row) for row in rust_rows(encrypted, key))
    got = streamed([encrypted], tmp_path / "ckpt-enc", encryptionKeyFile=str(key))
    assert got == want


@pytest.mark.parametrize("reader", ["jvm", "python"])
def test_a_batch_frame_at_the_start_of_the_active_file(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    """Messages compressed together in one frame at the start of the file being written, with
    sparse-index entries pointing into it: micro-batches start inside the frame, and the
    stream's end is the queue's next sequence (200), not an entry's sequence plus the count."""
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    with litemq.Queue(
        str(src / "a"), file_size=FILE_SIZE, index_interval=4, compression="zstd"
    ) as q:
        app = q.appender()
        app.append_batch([f"m-{i}".encode() * 5 for i in range(200)], compress_together=True)
        app.flush()
    one = available_now(spark, reader, src, ckpt, maxRecordsPerTrigger=50)
    assert one.rows() == [("a", i) for i in range(200)]
    assert offsets_log(ckpt)[-1] == '{"a": 200}'
    append(src / "a", 200, 10)
    assert available_now(spark, reader, src, ckpt).rows() == [("a", i) for i in range(200, 210)]


def test_a_sealed_file_over_2_gib_with_a_sparse_middle(spark: Any, tmp_path: Path) -> None:
    """A real data file of 2.2 GiB, sealed, whose middle key compaction turned into holes (so
    it keeps about a MiB of disk once compacted; 2.2 GiB are written first): the JVM reader
    maps it in moving 1 GiB windows, in a batch read and in a stream, and reads the Rust
    tailer's rows, the last message past 2 GiB."""
    path = tmp_path / "big"
    mib = 1 << 20
    with litemq.Queue(str(path), file_size=3 << 30) as q:
        app = q.appender()
        for i in range(100):
            app.append(f"head-{i}".encode())
        big = os.urandom(mib - 8)
        for i in range(2200):  # every one but the last superseded by the next: holes
            app.append(big + i.to_bytes(8, "little"), key="same")
        for i in range(100):
            app.append(f"tail-{i}".encode())
        app.flush()
        app.roll()
        app.flush()
    with litemq.Queue(str(path)) as q:
        assert q.compact(grace=0).records_dropped == 2199
    data = sorted(path.glob("[0-9][0-9][0-9][0-9]/*/*/*.data"))[0]
    st = data.stat()
    assert st.st_size > (2 << 30) + (100 << 20), st.st_size
    assert st.st_blocks * 512 < 64 << 20, "the compacted middle is sparse"
    with litemq.Queue(str(path), read_only=True) as q:
        want = [(m.seq, len(m.payload), bytes(m.payload[-8:])) for m in q.tailer(start=0)]
    assert len(want) == 201
    assert want[100] == (2299, mib, (2199).to_bytes(8, "little"))
    cols = ["seq", "length(payload) AS n", "substring(payload, -8, 8) AS t"]
    df = spark.read.format("litemq").load(str(path))
    assert JVM in df._jdf.queryExecution().executedPlan().toString()
    assert sorted((r.seq, r.n, bytes(r.t)) for r in df.selectExpr(*cols).collect()) == want
    got: list[tuple] = []

    def each(d: Any, batch_id: int) -> None:
        got.extend((r.seq, r.n, bytes(r.t)) for r in d.selectExpr(*cols).collect())

    q = (
        spark.readStream.format("litemq")
        .load(str(path))
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(600)
    assert q.exception() is None, q.exception()
    assert sorted(got) == want
    assert offsets_log(tmp_path / "ckpt")[-1] == '{"big": 2400}'
