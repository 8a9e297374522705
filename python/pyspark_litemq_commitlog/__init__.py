"""Lets Spark find the ``litemq-commitlog`` data source with no ``litemq.spark.register(spark)``.

PySpark 4 registers the ``DefaultSource`` of installed ``pyspark_*`` packages under its
``name()``; one package holds one source, hence this one beside ``pyspark_litemq``::

    spark.read.format("litemq-commitlog").load("data/broker")
"""

from litemq.spark.commitlog import LiteMQCommitLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
