"""One format, three readers, one truth: the Rust reader (``Queue.tailer``), the JVM reader
(the jar, ``java/``) and the Python Spark source read every committed fixture queue
(``tests/fixtures/queue-v3`` .. ``queue-v11``: plain, keys, headers, topics, tags, expiry,
priority, compression, batches, holes, tombstones, encryption) to the same rows, and damaged
copies to the same error at the same frame.

One Spark session with the jar on its classpath: ``format("litemq")`` is the JVM reader there,
and ``.option("reader", "python")`` makes it hand the load to the Python source.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = [*SPARK_MARKS, pytest.mark.jvm]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUEUES = sorted(
    p
    for p in FIXTURES.glob("queue-v*/*")
    if p.is_dir()
    and (p / "metadata.json").is_file()
    # A typed queue's DataFrame is its schema's columns, not the record columns compared here:
    # test_typed_spark_jvm.py compares typed queues with read_arrow and the Python source.
    and "schema" not in json.loads((p / "metadata.json").read_text())
)
COLUMNS = "seq, unix_micros(timestamp) AS ts, key, headers, payload, topic, queue_id, tags"


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-conformance", reader="jvm")


def key_file_for(queue: Path, tmp: Path) -> Path | None:
    """The key file of an encrypted fixture queue (its manifest holds the key), else None."""
    if "encryption" not in json.loads((queue / "metadata.json").read_text()):
        return None
    manifest = json.loads((queue.parent / "manifest.json").read_text())
    path = tmp / f"{queue.parent.name}-{queue.name}.key"
    path.write_text(manifest[queue.name]["key_hex"])
    return path


def norm(seq, ts, key, headers, payload, topic, queue_id, tags) -> tuple:
    def b(v: Any) -> bytes | None:
        return None if v is None else v.encode() if isinstance(v, str) else bytes(v)

    hs = tuple(sorted((k, b(v)) for k, v in dict(headers or {}).items())) or None
    return (seq, ts, b(key), hs, b(payload), topic or None, queue_id, tuple(tags or ()))


def rust_rows(queue: Path, key_file: Path | None) -> list[tuple]:
    with litemq.Queue(str(queue), read_only=True, encryption_key_file=key_file) as q:
        return [
            norm(m.seq, m.timestamp, m.key, m.headers, m.payload, m.topic, m.queue_id, m.tags)
            for m in q.tailer(start=q.first_seq)
        ]


def spark_rows(spark: Any, queue: Path, reader: str, key_file: Path | None) -> list[tuple]:
    r = spark.read.format("litemq").option("reader", reader)
    if key_file is not None:
        r = r.option("encryptionKeyFile", str(key_file))
    rows = r.load(str(queue)).selectExpr(*COLUMNS.split(", ")).collect()
    return sorted(norm(*row) for row in rows)


def plan_text(spark: Any, queue: Path, key_file: Path | None = None) -> str:
    r = spark.read.format("litemq")
    if key_file is not None:
        r = r.option("encryptionKeyFile", str(key_file))
    return r.load(str(queue))._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("queue", QUEUES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_three_readers_read_the_same_rows(spark: Any, queue: Path, tmp_path: Path) -> None:
    key_file = key_file_for(queue, tmp_path)
    want = rust_rows(queue, key_file)
    assert want, f"fixture {queue} holds messages"
    assert spark_rows(spark, queue, "jvm", key_file) == sorted(want)
    assert spark_rows(spark, queue, "python", key_file) == sorted(want)
    # The JVM reader ran (an encrypted queue too: it decrypts with the key file).
    expected = "litemq (JVM reader)"
    assert expected in plan_text(spark, queue, key_file)


def frames(data: bytes) -> list[tuple[int, int]]:
    """(offset, record length) of each frame of a data file, by the length words."""
    out, off = [], 4096
    while off + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, off)
        if n in (0, 0xFFFFFFFF):
            break
        out.append((off, n))
        off += (4 + n + 8 + 7) // 8 * 8
    return out


def damage_copy(queue: Path, dest: Path) -> tuple[Path, int]:
    """Copy ``queue`` to ``dest`` and flip the last record byte of the second frame of its
    first data file holding two; return the file and the frame's offset."""
    shutil.copytree(queue, dest)
    for f in sorted(dest.glob("[0-9][0-9][0-9][0-9]/*/*/*.data")):
        data = bytearray(f.read_bytes())
        fs = frames(bytes(data))
        if len(fs) >= 2:
            off, n = fs[1]
            data[off + 4 + n - 1] ^= 0x55
            f.write_bytes(bytes(data))
            return f, off
    raise AssertionError(f"no data file of {queue} has two frames")


PLAIN = [q for q in QUEUES if q.name != "encrypted"]


@pytest.mark.parametrize("queue", PLAIN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_damage_is_the_same_error_at_the_same_frame(
    spark: Any, queue: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "q"
    damaged, off = damage_copy(queue, copy)
    with pytest.raises(litemq.CorruptedError) as rust:
        rust_rows(copy, None)
    rust_msg = str(rust.value)
    where = f"in {damaged} at offset {off} "
    assert where in rust_msg, rust_msg
    # The JVM reader names the same file, frame offset and sequence, and the same reason
    # (CRC mismatch with the same stored and computed values), as the Rust tailer.
    detail = rust_msg[rust_msg.index(where) :]
    with pytest.raises(Exception, match="corrupted data") as jvm:
        spark_rows(spark, copy, "jvm", None)
    assert "litemq: corrupted data " + detail in str(jvm.value), str(jvm.value)[:2000]
    # The Python source reads through read_arrow, which checks a sealed file's frames_crc
    # first: it names the damaged file (not always the frame).
    with pytest.raises(Exception, match="CorruptedError") as py:
        spark_rows(spark, copy, "python", None)
    assert str(damaged) in str(py.value)


def test_missing_file_is_one_clear_line(spark: Any, tmp_path: Path) -> None:
    """A data file deleted between planning and reading fails naming it (never no rows)."""
    copy = tmp_path / "q"
    shutil.copytree(FIXTURES / "queue-v11" / "queue", copy)
    df = spark.read.format("litemq").load(str(copy))
    first = sorted(copy.glob("[0-9][0-9][0-9][0-9]/*/*/*.data"))[0]
    plan = df._jdf.queryExecution().executedPlan()  # planned: the file is in a partition
    plan.toString()
    first.unlink()
    with pytest.raises(Exception, match="data file is missing"):
        df.collect()


VECTORS = FIXTURES.parent / "vectors" / "frames.json"


def test_jvm_walker_passes_the_frame_vectors(tmp_path: Path) -> None:
    """The JVM reader's frame walker against the shared frame vectors (tests/vectors/,
    written with the Rust walker): every case's events, in order, via io.litemq.spark.VectorCheck."""
    out = java("io.litemq.spark.VectorCheck", str(VECTORS))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert " cases pass" in out.stdout


def java(main: str, *args: str, props: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    return subprocess.run(
        ["java", *props, "-cp", f"{litemq.spark.jar_path()}{os.pathsep}{jars}", main, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_jvm_reader_maps_large_files_in_windows(tmp_path: Path) -> None:
    """Files larger than the mapping window (1 GiB; 8 KiB here through litemq.mapWindow) are
    read through windows that move with the reader, frames larger than a window included:
    the same messages as the Rust reader, without Spark (io.litemq.spark.Dump)."""
    rnd = random.Random(7)
    path = tmp_path / "winq"
    with litemq.Queue(str(path), file_size=1 << 20) as q:
        app = q.appender()
        for i in range(3000):
            body = rnd.randbytes(rnd.choice([10, 100, 3000, 9000]))
            app.append(body, key=f"k{i}" if i % 3 == 0 else None)
        app.flush()
    with litemq.Queue(str(path), read_only=True) as q:
        want = [
            f"winq {m.seq} {m.timestamp} {bytes(m.payload).hex()}"
            for m in q.tailer(start=q.first_seq)
        ]
    assert len(want) == 3000
    for window in ("8192", str(1 << 30)):
        out = java("io.litemq.spark.Dump", str(path), props=(f"-Dlitemq.mapWindow={window}",))
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.splitlines() == want


def test_topic_option_is_read_in_the_jvm_and_skips_files_without_the_topic(
    spark: Any, tmp_path: Path
) -> None:
    """``.option("topic", t)`` is served by the JVM reader: the same rows as a Rust topic
    tailer, and only the files that may hold the topic become tasks (a sealed file whose
    topic index lists no ``t``, or without topics at all, is skipped when planning)."""
    path = tmp_path / "q"
    with litemq.Queue(str(path), file_size=1 << 20, roll={"count": 100}) as q:
        app = q.appender()
        for i in range(600):  # six sealed files of 100: "orders" only in the 2nd and 5th
            f = i // 100
            if f in (1, 4) and i % 7 == 0:
                app.append(b"o%d" % i, topic="orders", tags=["paid"])
            elif f in (2, 4):
                app.append(b"a%d" % i, topic="audit")
            else:
                app.append(b"p%d" % i)
        app.append(b"tail", topic="orders")  # in the 7th, the active file
        app.flush()
    with litemq.Queue(str(path), read_only=True) as q:
        want = [(m.seq, m.payload) for m in q.tailer(topic="orders")]
    assert len(want) == 14 + 14 + 1
    df = spark.read.format("litemq").option("topic", "orders").load(str(path))
    assert "litemq (JVM reader)" in df._jdf.queryExecution().executedPlan().toString()
    assert sorted((r["seq"], bytes(r["payload"])) for r in df.collect()) == want
    # Files 2 and 5 (their topic indexes list "orders") and the active 7th: files 1, 4 and 6
    # (no topic record: the footer says so) and 3 (its topic index lists only "audit") are
    # never opened by a task.
    assert df.rdd.getNumPartitions() == 3
    none = spark.read.format("litemq").option("topic", "nobody").load(str(path))
    assert none.count() == 0
    assert none.rdd.getNumPartitions() == 1  # only the active file may hold it
    with pytest.raises(Exception, match="option topic"):
        spark.read.format("litemq").option("topic", "x" * 256).load(str(path)).collect()


def archive_of(tmp_path: Path, n: int = 2500) -> tuple[Path, Path]:
    """A queue of several 64 KiB files with keys and topics, and its archive on a path."""
    q = tmp_path / "q"
    with litemq.Queue(str(q), file_size=64 * 1024) as queue:
        app = queue.appender()
        for i in range(n):
            app.append(b"m%d " % i * 3, key=f"k{i % 7}", topic="t" if i % 4 == 0 else None)
        app.flush()
    dest = tmp_path / "archive"
    litemq.archive_queue(q, dest)
    return q, dest


def test_archives_on_a_path_are_read_in_the_jvm(spark: Any, tmp_path: Path) -> None:
    """An archive on a local or mounted path reads in the JVM (its data files are sealed data
    files), with the same rows and partitions as the Python source, options included."""
    q, dest = archive_of(tmp_path)
    end = litemq.open_archive(dest).end_seq
    want = sorted(r for r in rust_rows(q, None) if r[0] < end)
    assert len(want) == end > 1000  # the archive holds every file but the last
    assert "litemq (JVM reader)" in plan_text(spark, dest)
    assert spark_rows(spark, dest, "jvm", None) == want
    assert spark_rows(spark, dest, "python", None) == want
    for opts in (
        {"rowsPerPartition": "300"},
        {"startSeq": "100", "endSeq": "1700"},
        {"topic": "t"},
    ):
        jvm = spark.read.format("litemq").options(**opts).load(str(dest))
        py = spark.read.format("litemq").options(reader="python", **opts).load(str(dest))
        assert sorted(norm(*r) for r in jvm.selectExpr(*COLUMNS.split(", ")).collect()) == sorted(
            norm(*r) for r in py.selectExpr(*COLUMNS.split(", ")).collect()
        )
        assert jvm.rdd.getNumPartitions() == py.rdd.getNumPartitions()


def test_an_archive_whose_manifest_lies_fails_as_in_python(spark: Any, tmp_path: Path) -> None:
    """A manifest the JVM reader does not accept whole goes to the Python source, which raises
    ArchiveError naming it; a data file that is not the one listed fails the JVM read naming
    the file. Never rows."""
    _, dest = archive_of(tmp_path, 5000)
    manifest = dest / "_litemq_archive.json"
    good = json.loads(manifest.read_text())
    data = [f for f in good["files"] if f["kind"] == "data"]
    assert len(data) >= 2

    def broken(change: Any) -> None:
        m = json.loads(json.dumps(good))
        change(m)
        manifest.write_text(json.dumps(m))
        with pytest.raises(Exception, match="ArchiveError"):
            spark.read.format("litemq").load(str(dest)).collect()

    def overlap(m: dict) -> None:
        d = [f for f in m["files"] if f["kind"] == "data"]
        d[1]["first_seq"] = d[0]["end_seq"] - 1

    def gap(m: dict) -> None:
        m["files"] = [f for f in m["files"] if f["path"] != data[1]["path"]]
        m["gaps"] = []

    def as_bool(m: dict) -> None:
        next(f for f in m["files"] if f["kind"] == "data")["size"] = True

    def escape(m: dict) -> None:
        m["files"][0]["path"] = "../" + m["files"][0]["path"]

    for change in (overlap, gap, as_bool, escape):
        broken(change)
    manifest.write_text(json.dumps(good))
    # Two data files swapped on disk: each is a valid data file, not the listed one.
    a, b = dest / data[0]["path"], dest / data[1]["path"]
    ab, bb = a.read_bytes(), b.read_bytes()
    a.write_bytes(bb)
    b.write_bytes(ab)
    with pytest.raises(Exception, match="not the file the archive manifest lists"):
        spark.read.format("litemq").load(str(dest)).collect()
