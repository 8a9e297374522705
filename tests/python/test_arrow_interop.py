"""Arrow that plugs in: text keys and header values as strings."""

from __future__ import annotations

import pyarrow as pa
import pytest

import litemq
from litemq import arrow


@pytest.fixture
def keyed(queue: litemq.Queue) -> litemq.Queue:
    app = queue.appender()
    app.append(b"plain")
    app.append(b"text", key="cust-2", headers={"region": "eu", "raw": b"\xff\x00"})
    app.append(b"bytes", key=b"\x00bin", headers={"region": "us"})
    app.flush()
    return queue


def test_text_keys_and_header_values_read_as_strings(keyed: litemq.Queue) -> None:
    batch = keyed.read_arrow(columns=["seq", "key", "key_text", "headers", "headers_text"])
    batch.validate(full=True)
    assert batch.schema.field("key_text").type == pa.string()
    assert batch.schema.field("headers_text").type == pa.map_(pa.string(), pa.string())
    # The binary columns keep every key and value as bytes...
    assert batch.column("key").to_pylist() == [None, b"cust-2", b"\x00bin"]
    # ... the text ones give what was given as str as str, and null for bytes.
    assert batch.column("key_text").to_pylist() == [None, "cust-2", None]
    assert batch.column("headers_text").to_pylist() == [
        None,
        [("region", "eu"), ("raw", None)],
        [("region", "us")],
    ]
    # As the Message does.
    assert keyed.get(1).key == "cust-2"
    assert keyed.get(2).key == b"\x00bin"
    df = keyed.to_pandas(columns=list(arrow.TEXT_FIELDS))
    assert list(df.columns) == list(arrow.TEXT_FIELDS)
    assert df["key_text"].tolist()[1] == "cust-2"


def test_text_fields_read_every_text_key_as_str(
    keyed: litemq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TEXT_FIELDS: the default columns with key_text and headers_text for key and headers.
    batch = keyed.read_arrow(columns=arrow.TEXT_FIELDS)
    assert batch.schema.names == list(arrow.TEXT_FIELDS)
    assert "key" not in batch.schema.names
    assert "key_text" in batch.schema.names
    assert batch.column("key_text").to_pylist() == [None, "cust-2", None]
    # Many reads joined into one batch keep the text columns.
    app = keyed.appender()
    for i in range(3000):
        app.append(b"x" * 40, key=f"k{i}", headers={"i": str(i)})
    app.flush()
    assert len(keyed.data_files()) > 2
    big = keyed.read_arrow(columns=["seq", "key_text", "headers_text"])
    big.validate(full=True)
    assert big.column("key_text").to_pylist()[:3] == [None, "cust-2", None]
    assert big.column("key_text").to_pylist()[3:] == [f"k{i}" for i in range(3000)]
    assert big.column("headers_text").to_pylist()[-1] == [("i", "2999")]
    # Parts read in parallel and joined keep every row's text bits.
    monkeypatch.setenv("LITEMQ_READ_THREADS", "2")
    joined = keyed.read_arrow(columns=["seq", "key_text", "headers_text"])
    joined.validate(full=True)
    assert joined.equals(big)
