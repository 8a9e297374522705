"""Lets Spark find litemq's data source with no ``litemq.spark.register(spark)`` call.

PySpark 4 looks up Python data sources in installed packages whose names start with
``pyspark_`` and registers their ``DefaultSource`` under its ``name()`` (``"litemq"``)::

    spark.read.format("litemq").load("/data/orders")
"""

from litemq.spark.source import LiteMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
