"""A MERGE's source computed once, by deltaflow, so that the batch is read once for everything it feeds.

Delta reads a MERGE's source twice (to find the target files it touches, then to rewrite them), so a
source that is not a plain Delta scan is first copied into a local checkpoint, by Delta. A writer that
reads the batch for something else as well (auto CDC's tombstones) would then compute it twice, or cache
it and have Delta copy the cache. :func:`on_materialized` takes the copy itself, the way Delta does (a
local checkpoint: the lineage is cut, so both passes of the MERGE see the same rows), hands it to the
writer, and lets the MERGEs inside read it as it is (``materializeSource=none``, on the batch's session
only). A block of the copy lost with its executor fails the attempt; it is started again from the batch,
as Delta does with its own copy.

Examples:
    >>> def write(source):  # doctest: +SKIP
    ...     deletes = source.where("op = 'delete'").toArrow()
    ...     DeltaTable.forPath(spark, path).merge(source.alias("s"), "t.id = s.id")...execute()
    >>> on_materialized(winners, write)  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from deltaflow.runtime.session import session_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

T = TypeVar("T")

MATERIALIZE = "spark.databricks.delta.merge.materializeSource"
LOST_BLOCK = "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"  # Spark's error class for a lost checkpoint block
ATTEMPTS = 4  # as many as Delta gives its own copy


def on_materialized(df: DataFrame, write: Callable[[DataFrame], T], attempts: int = ATTEMPTS) -> T:
    """Compute ``df`` once into a local checkpoint and run ``write`` on it, MERGEs reading it as it is.

    Raises:
        Exception: What ``write`` or the computation raised; a lost block only after ``attempts`` tries.

    """
    from pyspark import StorageLevel

    session = df.sparkSession
    for attempt in range(1, attempts + 1):
        source = df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)  # as Delta's
        try:
            with session_settings(session, {MATERIALIZE: "none"}):
                return write(source)
        except Exception as error:
            if attempt == attempts or LOST_BLOCK not in str(error):
                raise
        finally:
            release(source)
    raise AssertionError("unreachable")


def release(source: DataFrame) -> None:
    """Drop a local checkpoint's blocks now rather than when the JVM collects its RDD."""
    # The checkpointed RDD sits under the DataFrame's plan (a LogicalRDD); pyspark has no handle on it.
    source._jdf.queryExecution().analyzed().rdd().unpersist(False)
