"""Run a function on every micro-batch of a flow, with every Delta write inside it idempotent.

Used for ``@dp.foreach_batch_sink`` functions, auto CDC flows and quarantine splits alike: before the
function runs, the batch's session gets the flow's ``txnAppId`` / ``txnVersion`` (see
:mod:`deltaflow.sinks.idempotent`), so a batch replayed after a crash commits nothing a second time,
whichever tables it writes. A batch whose commit loses to a concurrent one (a compaction running beside
the pipeline) is run again on the new snapshot (:mod:`deltaflow.sinks.conflicts`).

Examples:
    >>> query = start_foreach_batch(  # doctest: +SKIP
    ...     df, name="to_both", handler=two_locations, layout=layout, checkpoint=checkpoint,
    ...     trigger=Trigger("available_now"))

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deltaflow.faults import crash_point
from deltaflow.runtime.checkpoints import unfinished_batch
from deltaflow.runtime.jvm_sockets import no_delay
from deltaflow.sinks.conflicts import retry_conflicts
from deltaflow.sinks.idempotent import flow_app_id, idempotent_writes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.define.graph import BatchHandler
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint, StorageLayout


def start_foreach_batch(
    df: DataFrame, *, name: str, handler: BatchHandler, layout: StorageLayout, checkpoint: FlowCheckpoint,
    trigger: Trigger,
) -> StreamingQuery:
    """Start the streaming query handing each micro-batch of ``df`` to ``handler(batch, batch_id)``.

    The batch the query runs again first after a restart is read once before the handler
    (:func:`read_if_replayed`).
    """
    app_id: list[str] = []
    replay = unfinished_batch(layout.fs, checkpoint)

    def on_batch(batch: DataFrame, batch_id: int) -> None:
        no_delay()
        if not app_id:
            app_id.append(flow_app_id(layout, checkpoint))
        with read_if_replayed(batch, batch_id == replay) as read, \
                idempotent_writes(read.sparkSession, app_id[0], batch_id):
            retry_conflicts(lambda: handler(read, batch_id), f"flow '{name}' batch {batch_id}")
        crash_point(f"after_commit:{name}")

    writer = (df.writeStream.queryName(name).foreachBatch(on_batch)
              .option("checkpointLocation", checkpoint.path))
    return trigger.apply(writer).start()


@contextmanager
def read_if_replayed(batch: DataFrame, replayed: bool) -> Iterator[DataFrame]:
    """``batch``, read once into memory first when it is a batch run again after a restart.

    Such a batch (planned, not committed: :func:`~deltaflow.runtime.checkpoints.unfinished_batch`) may
    have committed its writes before the restart, and Delta then skips them without reading it. But
    Spark wants its stateful operators run again (it checks), and the run reports the rows a batch read
    (Spark counts the rows it scans).

    Examples:
        >>> with read_if_replayed(batch, batch_id == replay) as batch:  # doctest: +SKIP
        ...     batch.write.format("delta").mode("append").save(path)

    """
    if not replayed:
        yield batch
        return
    batch = batch.persist()
    try:
        batch.count()
        yield batch
    finally:
        batch.unpersist()
