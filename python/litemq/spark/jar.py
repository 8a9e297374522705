"""Where the JVM reader's jar is: ``.config("spark.jars", litemq.spark.jar_path())``.

The jar (``java/`` in the repository, built by ``make jar``) is package data of the wheel.
With it on Spark's classpath, ``spark.read.format("litemq")`` and
``spark.readStream.format("litemq")`` read local queues and datasets in the JVM (columnar, no
Python worker per task; a stream keeps the Python source's offsets and checkpoints) and hand
everything else (writes, archives, encrypted queues read without a key, the
``key``/``where``/``topic`` options) to the Python source of the same name. See docs/SPARK.md, "The JVM reader".
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["JAR_NAME", "jar_path"]

#: File name of the jar inside the ``litemq.spark`` package.
JAR_NAME = "litemq-spark.jar"


def jar_path() -> str:
    """The absolute path of the JVM reader's jar shipped in the package.

    Raises :class:`FileNotFoundError` naming the path and how to build it when the jar is not
    there (a source checkout where ``make jar`` has not run).

    Example::

        spark = (SparkSession.builder
                 .config("spark.jars", litemq.spark.jar_path())
                 .getOrCreate())
    """
    path = Path(__file__).with_name(JAR_NAME)
    if not path.is_file():
        raise FileNotFoundError(
            f"litemq: the JVM reader's jar is not at {path}: run `make jar` in a litemq "
            "checkout (needs a JDK 17 and pyspark), or install the litemq wheel"
        )
    return str(path)
