"""The Spark source reads encrypted queues and archives (option encryptionKeyFile).

What a user relies on: the rows are the plaintext, key lookups work through the keyed
index, and a read without the key fails with the typed error instead of returning
ciphertext.
"""

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

KEY = bytes(range(32))


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-encryption-tests")


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, list[bytes]]:
    """An encrypted queue of several files, its archive, and the key file."""
    root = tmp_path_factory.mktemp("enc")
    key_file = root / "key.hex"
    key_file.write_text(KEY.hex())
    bodies = [b"secret %d " % i * 4 for i in range(2500)]
    with litemq.Queue(root / "orders", file_size=64 * 1024, encryption_key=KEY) as q:
        app = q.appender()
        for i, body in enumerate(bodies):
            app.append(body, key=f"k{i % 5}" if i % 10 == 0 else None)
        app.roll()
    dest = root / "archive" / "orders"
    litemq.archive_queue(root / "orders", dest, encryption_key=KEY)
    return root / "orders", dest, key_file, bodies


def test_batch_reads_with_the_key(spark: Any, encrypted: tuple[Path, Path, Path, list]) -> None:
    queue, archive, key_file, bodies = encrypted

    def reader() -> Any:  # a DataFrameReader's options stick: a new one per read
        return spark.read.format("litemq").option("encryptionKeyFile", str(key_file))

    df = reader().load(str(queue))
    got = sorted((r["seq"], bytes(r["payload"])) for r in df.select("seq", "payload").collect())
    assert got == list(enumerate(bodies))
    keyed = reader().option("key", "k2").load(str(queue)).select("seq").collect()
    assert sorted(r["seq"] for r in keyed) == [i for i in range(0, 2500, 10) if i % 5 == 2]
    arch = reader().load(str(archive)).select("seq", "payload").collect()
    assert len(arch) == litemq.open_archive(archive, encryption_key=KEY).end_seq > 0
    assert all(bytes(r["payload"]) == bodies[r["seq"]] for r in arch)


def test_without_the_key_the_read_fails(
    spark: Any, encrypted: tuple[Path, Path, Path, list]
) -> None:
    queue, _, _, _ = encrypted
    with pytest.raises(Exception, match="encrypted"):
        spark.read.format("litemq").load(str(queue)).count()
