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


def local_session(tmp_path_factory: pytest.TempPathFactory, app: str) -> Iterator[SparkSession]:
    """A ``local[2,2]`` session (2 cores, a failed task retried twice) with
    litemq's sources registered, stopped when the generator closes."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")
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
