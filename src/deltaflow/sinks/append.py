"""Append sink: the Delta streaming sink, exactly once.

Delta's streaming sink records the query id and batch id of every micro-batch it commits in the table's
transaction log, and skips a batch it already committed: a batch replayed after a crash adds nothing.
The table is created before the first batch (empty, with its partitioning, properties and comment), so
readers and downstream flows see a table as soon as the pipeline starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from deltaflow.runtime.triggers import Trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

    from deltaflow.graph import Dataset


def ensure_table(spark: SparkSession, dataset: Dataset, path: str, schema: StructType,
                 properties: Mapping[str, str]) -> None:
    """Create the Delta table at ``path`` with ``schema`` and table ``properties`` unless it exists."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if dataset.partition_cols:
        builder = builder.partitionedBy(*dataset.partition_cols)
    for key, value in properties.items():
        builder = builder.property(key, value)
    if dataset.comment:
        builder = builder.comment(dataset.comment)
    builder.execute()


def start_append(
    df: DataFrame, *, name: str, path: str, checkpoint: str, trigger: Trigger,
    partition_cols: tuple[str, ...] = (),
) -> StreamingQuery:
    """Start the streaming query that appends ``df`` to the Delta table at ``path``."""
    writer = (df.writeStream.format("delta").outputMode("append").queryName(name)
              .option("checkpointLocation", checkpoint))
    if partition_cols:
        writer = writer.partitionBy(*partition_cols)
    return trigger.apply(writer).start(path)
