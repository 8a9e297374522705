"""The local Spark session and marks the Spark test modules share.

Each module makes its own module-scoped ``spark`` fixture from
`local_session` (so a module's session stops when the module is done) and
uses `SPARK_MARKS` as (part of) its ``pytestmark``. Imported only by the
Spark modules, after ``pytest.importorskip("pyspark")``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import litemq.spark

#: The spark marker, and the warnings PySpark's own code raises.
SPARK_MARKS = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


#: Which reader ``format("litemq")`` uses in the Spark suites: ``python`` (the Python data
#: source, the default) or ``jvm`` (the jar from ``make jar`` on the classpath, which takes
#: the short name; `make py-test` runs the Spark suites once with each).
READER = os.environ.get("LITEMQ_SPARK_READER", "python").strip().lower()
if READER not in ("python", "jvm"):
    raise ValueError(f"LITEMQ_SPARK_READER={READER!r}: expected 'python' or 'jvm'")


def local_session(
    tmp_path_factory: pytest.TempPathFactory, app: str, *, reader: str | None = None
) -> Iterator[SparkSession]:
    """A ``local[2,2]`` session (2 cores, a failed task retried twice) with
    litemq's sources registered, stopped when the generator closes. With the JVM
    reader (``reader="jvm"``, or ``LITEMQ_SPARK_READER=jvm``) the jar is on the classpath."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder
    if (reader or READER) == "jvm":
        builder = builder.config("spark.jars", litemq.spark.jar_path())
    session = (
        builder.master("local[2,2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    litemq.spark.register(session)
    yield session
    session.stop()
