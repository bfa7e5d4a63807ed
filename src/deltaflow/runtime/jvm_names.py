"""JVM classes reached from Python by their full name, without py4j's search for a name.

py4j answers ``jvm.org`` by trying ``org`` as a class: alone, then in each package the view imports
whole (``java.lang`` and eight of pyspark's), each a failed lookup through every jar on the driver's class
path, and only then calls it a package. Every step of ``jvm.org.apache.spark.sql.delta.DeltaLog`` is a
round trip of its own: 1.6 ms to reach that one class on a 2-core machine, where :func:`java_class`,
naming the class whole, takes no round trip (then one per member used, 0.1 ms). In a recording of a test
run's driver, 5 % of its CPU samples were such failed lookups (``docs/benchmarks.md`` §
profile_pipeline.py).

Examples:
    >>> java_class(spark, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)
    ... # doctest: +SKIP

"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The top-level packages pyspark, Delta and deltaflow walk from ``jvm`` (``jvm.py4j.reflection.TypeUtil``
#: in every exception pyspark converts, fifteen times).
_ROOTS = ("org", "io", "java", "scala", "py4j", "sun")


def java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (its full name; ``Outer$Inner`` for a nested one), with no round trip.

    Examples:
        >>> java_class(spark, "java.util.HashMap")()  # doctest: +SKIP
        JavaObject id=o42

    """
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark.sparkContext._gateway._gateway_client)  # type: ignore[union-attr]


def known_roots(spark: SparkSession) -> None:
    """Let ``jvm.org``, ``jvm.java``, ... start from a known package instead of py4j's search.

    For the code deltaflow does not own (pyspark, Delta's Python API), which walks from ``jvm``: the
    first step of each walk, the one that searched every import, is then free, and
    ``jvm.py4j.reflection.TypeUtil`` takes 0.25 ms instead of about 1 ms.
    """
    from py4j.java_gateway import JavaPackage

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for root in _ROOTS:
        if root not in vars(jvm):
            setattr(jvm, root, JavaPackage(root, jvm._gateway_client, jvm_id=jvm._id))
