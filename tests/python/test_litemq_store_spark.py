"""``spark.read.format("litemq-commitlog")`` on a real local Spark session (kept light)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")


from litemq.interop.litemq_store import LiteMQStore  # noqa: E402
from litemq.spark.commitlog import COMMITLOG_SCHEMA, LiteMQCommitLogDataSource  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402
from test_litemq_store import (  # noqa: E402
    FILE_SIZE,
    fixture_records,
    log_file,
    small_store,
    write_store,
)

pytestmark = SPARK_MARKS


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):
    yield from local_session(tmp_path_factory, "litemq-commitlog-tests")


def test_every_field_is_a_column_one_partition_per_file(spark, tmp_path: Path) -> None:
    written = write_store(tmp_path / "b", fixture_records())
    df = spark.read.format("litemq-commitlog").load(str(tmp_path / "b"))
    assert df.schema == COMMITLOG_SCHEMA
    files = os.listdir(tmp_path / "b" / "commitlog")
    assert df.rdd.getNumPartitions() == len(files) >= 3
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert len(rows) == len(written)
    with LiteMQStore(tmp_path / "b") as s:
        stored = list(s.records())
    for row, st, r in zip(rows, stored, written, strict=True):
        assert (row.file, row.offset, row.file_offset, row.size) == (
            st.file,
            st.offset,
            st.file_offset,
            st.size,
        )
        assert row.tags == list(r.tags)
        assert row.keys == list(r.keys)
        assert row.properties == dict(r.properties)
        assert row.body == r.body  # the 100 KiB bodies too
        for name in (
            "message_id",
            "topic",
            "message_type",
            "priority",
            "reliability",
            "delay_time",
            "transaction_id",
            "status",
            "sharding_key",
            "broadcast",
            "born_timestamp",
            "born_host",
            "store_host",
            "queue_id",
            "queue_offset",
            "commit_log_offset",
            "store_size",
            "store_timestamp",
            "consume_start_time",
            "consume_end_time",
            "consume_count",
            "trailing",
        ):
            assert getattr(row, name) == getattr(r, name), name
    by_topic = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert by_topic == {"orders": 4, "payments": 3, "notices": 1}
    assert FILE_SIZE in {os.path.getsize(tmp_path / "b" / "commitlog" / f) for f in files}


def test_damage_is_passed_over_unless_asked_to_fail(spark, tmp_path: Path) -> None:
    written = small_store(tmp_path / "b")
    f = log_file(tmp_path / "b")
    data = bytearray(f.read_bytes())
    at = written[1].commit_log_offset
    data[at : at + 4] = struct.pack(">I", 0xFFFF)
    f.write_bytes(bytes(data))
    df = spark.read.format("litemq-commitlog").load(str(tmp_path / "b"))
    assert sorted(r.message_id for r in df.select("message_id").collect()) == ["m0", "m2", "m3"]
    strict = spark.read.format("litemq-commitlog").option("failOnDamage", "true")
    with pytest.raises(Exception, match="failOnDamage"):
        strict.load(str(tmp_path / "b")).collect()


def test_a_path_without_a_store_fails_at_load(spark, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not a LiteMQ store"):
        spark.read.format("litemq-commitlog").load(str(tmp_path)).schema  # noqa: B018


def test_the_pyspark_package_exposes_the_source_for_discovery() -> None:
    import pyspark_litemq_commitlog

    assert pyspark_litemq_commitlog.DefaultSource is LiteMQCommitLogDataSource
    assert LiteMQCommitLogDataSource.name() == "litemq-commitlog"
