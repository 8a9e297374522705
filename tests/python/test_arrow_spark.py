"""The Spark source gives text keys and header values as strings in the ``key_text`` and
``headers_text`` columns, as ``read_arrow`` does. One ``local[2]`` session for the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")


import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-arrow-spark-tests")


def test_text_keys_and_header_values_read_as_strings(spark: Any, tmp_path: Path) -> None:
    qpath = tmp_path / "q"
    with litemq.Queue(qpath, file_size=64 * 1024) as q:
        app = q.appender()
        app.append(b"plain")
        app.append(b"text", key="cust-2", headers={"region": "eu", "raw": b"\xff"})
        app.append(b"bytes", key=b"\x00bin", headers={"region": "us"})
        app.flush()
    schema = "seq long, key binary, key_text string, headers_text map<string,string>"
    got = sorted(
        spark.read.format("litemq").schema(schema).load(str(qpath)).collect(),
        key=lambda r: r["seq"],
    )
    assert [r["key_text"] for r in got] == [None, "cust-2", None]
    assert [bytes(r["key"]) if r["key"] is not None else None for r in got] == [
        None,
        b"cust-2",
        b"\x00bin",
    ]
    assert [r["headers_text"] for r in got] == [
        None,
        {"region": "eu", "raw": None},
        {"region": "us"},
    ]
    with pytest.raises(Exception, match="cannot produce column 'key_text' as binary"):
        spark.read.format("litemq").schema("seq long, key_text binary").load(str(qpath)).collect()
