"""Append sink: each micro-batch appended once, as Delta's streaming sink does it, without its state replay.

Each batch's commit records the query id and the batch id in the table's transaction log, as Delta's
streaming sink does, and a batch already committed is skipped: a batch replayed after a crash adds
nothing. The check reads the table's checksum rather than replaying its state
(:mod:`deltaflow.sinks.txn_append`). A flow with schema evolution keeps Delta's own sink, which evolves the
table's schema batch by batch. The table exists before the first batch (see
:mod:`deltaflow.sinks.tables`), so readers and downstream flows see a table as soon as the pipeline starts.

Examples:
    >>> query = start_append(df, name="bronze", path=layout.table("bronze"), layout=layout,  # doctest: +SKIP
    ...                      checkpoint=layout.checkpoint("bronze", "bronze"), trigger=Trigger("once"))

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltaflow.faults import crash_point
from deltaflow.runtime.jvm_sockets import no_delay
from deltaflow.sinks.txn_append import append_once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint, StorageLayout


def start_append(
    df: DataFrame, *, name: str, path: str, layout: StorageLayout, checkpoint: FlowCheckpoint,
    trigger: Trigger, partition_cols: tuple[str, ...] = (), merge_schema: bool = False,
) -> StreamingQuery:
    """Start the streaming query that appends ``df`` to the Delta table at ``path``."""
    if merge_schema:  # Delta's sink: it evolves the table's schema batch by batch
        writer = (df.writeStream.format("delta").outputMode("append").queryName(name)
                  .option("checkpointLocation", checkpoint.path).option("mergeSchema", "true"))
        if partition_cols:
            writer = writer.partitionBy(*partition_cols)
        return trigger.apply(writer).start(path)
    query_id: list[str] = []

    def append(batch: DataFrame, batch_id: int) -> None:
        no_delay()
        if not query_id:  # in the checkpoint once the query has started; Delta's sink stamps it too
            query_id.append(layout.query_id(checkpoint))
        if not append_once(batch, path, app_id=query_id[0], batch_id=batch_id, partition_cols=partition_cols):
            batch.count()  # a batch replayed after its commit: Spark wants its stateful operators run again
        crash_point(f"after_commit:{name}")

    writer = df.writeStream.queryName(name).foreachBatch(append).option("checkpointLocation", checkpoint.path)
    return trigger.apply(writer).start()
