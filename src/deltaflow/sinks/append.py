"""Append sink: the Delta streaming sink, exactly once.

Delta's streaming sink records the query id and batch id of every micro-batch it commits in the table's
transaction log, and skips a batch it already committed: a batch replayed after a crash adds nothing.
The table exists before the first batch (see :mod:`deltaflow.sinks.tables`), so readers and downstream
flows see a table as soon as the pipeline starts.

Example:
    >>> query = start_append(df, name="bronze", path=layout.table("bronze"),  # doctest: +SKIP
    ...                      checkpoint=layout.checkpoint("bronze", "bronze"), trigger=Trigger("once"))

"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint


def start_append(
    df: DataFrame, *, name: str, path: str, checkpoint: FlowCheckpoint, trigger: Trigger,
    partition_cols: tuple[str, ...] = (), merge_schema: bool = False,
) -> StreamingQuery:
    """Start the streaming query that appends ``df`` to the Delta table at ``path``."""
    writer = (df.writeStream.format("delta").outputMode("append").queryName(name)
              .option("checkpointLocation", checkpoint.path))
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if partition_cols:
        writer = writer.partitionBy(*partition_cols)
    return trigger.apply(writer).start(path)
