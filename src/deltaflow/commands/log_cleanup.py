"""Trim a table's Delta log to its ``delta.logRetentionDuration``, keeping each version a flow restarts from.

Delta deletes expired log entries itself after each checkpoint, but with a cutoff truncated to the start of
the day (UTC): a table that keeps an hour of log keeps, by evening, the whole day's commits (a stream that
commits every 10 s: 8,640 commit files and as many checksums, each listed again by every reader). The
``maintenance:`` block's vacuum step runs the same Delta routine with the cutoff truncated to the minute.
Delta deletes only the entries before a checkpoint that is itself past the cutoff, oldest first, so every
version still listed reads as before, and a cleanup stopped halfway has only deleted less.

A flow streaming the table reads its log, when it restarts, from the start of its newest batch
(:func:`restart_read`): the retention is extended until that version's entry is inside it, so a flow
stopped for longer than the table's log retention still restarts. Delta's own cleanup knows of no reader.

Examples:
    >>> clean_log(resolver, "bronze")  # doctest: +SKIP
    LogCleanup(table='bronze', retention=datetime.timedelta(seconds=3600), files=412, held_by=None)

"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from deltaflow.commands.horizons import LOG_RETENTION, table_retention
from deltaflow.commands.readers import log_restart_offsets
from deltaflow.commands.tables import open_table
from deltaflow.errors import ConfigError
from deltaflow.faults import crash_point
from deltaflow.runtime.jvm_names import java_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.resolve.resolver import Resolver
    from deltaflow.storage import FlowCheckpoint, StorageLayout

SLACK = timedelta(minutes=10)  # kept past the version a flow needs: clocks of writer and storage may differ


@dataclass(frozen=True)
class LogCleanup:
    """What a log cleanup of one table deleted, and the retention it kept (extended for ``held_by``).

    ``retention`` is None when ``held_by`` reads the whole log: nothing was deleted.
    """

    table: str
    retention: timedelta | None
    files: int
    held_by: str | None  # the flow whose restart version extended the retention


def restart_read(layout: StorageLayout, table_id: str, flows: Collection[str],
                 ) -> tuple[FlowCheckpoint, int | None] | None:
    """The oldest log version of table ``table_id`` a flow of ``flows`` reads on restart, and its checkpoint.

    None for the version: the flow reads the whole log (see
    :func:`~deltaflow.commands.readers.log_restart_offsets`). Read without Spark.
    """
    found = [(checkpoint, offsets[table_id]) for checkpoint in layout.current_checkpoints()
             if checkpoint.flow in flows and table_id in (offsets := log_restart_offsets(layout, checkpoint))]
    return min(found, key=lambda pair: -1 if pair[1] is None else pair[1], default=None)


def clean_log(resolver: Resolver, table: str) -> LogCleanup:
    """Delete the log entries of ``table`` past its log retention, never one a flow of the pipeline reads.

    Raises:
        ConfigError: A flow reads the table from a version its log no longer holds (it needs a full
            refresh; nothing is deleted meanwhile).

    """
    context = resolver.context
    layout, spark = context.layout, context.spark
    delta = open_table(layout, table)
    retention = table_retention(delta, LOG_RETENTION)
    reader = restart_read(layout, str(delta.metadata().id), resolver.graph.flows)
    if reader is not None and reader[1] is None:
        return LogCleanup(table, None, 0, reader[0].flow)
    none = java_class(spark, "scala.Option").empty()
    delta_log = java_class(spark, "org.apache.spark.sql.delta.DeltaLog")
    log = delta_log.forTable(spark._jsparkSession, layout.table(table))
    snapshot = log.update(False, none, none)
    held_by = None
    if reader is not None and (version := reader[1]) is not None and version <= snapshot.version():
        checkpoint = reader[0]
        age = _age(spark, log, layout.commit_file(table, version))
        if age is None:
            raise ConfigError(f"flow '{checkpoint.flow}' reads '{table}' from version {version}, which "
                              "its log no longer holds",
                              hint=f"full-refresh it: deltaflow run --full-refresh {checkpoint.dataset}")
        if age + SLACK > retention:  # Delta judges an entry by its file's time, as here
            retention, held_by = age + SLACK, checkpoint.flow
    before = _entries(layout, table)
    milliseconds = java_class(spark, "scala.collection.StringOps")(
        str(int(retention.total_seconds() * 1000))).toLongOption()
    granularity = java_class(spark, "org.apache.spark.sql.delta.TruncationGranularity$")
    minute = getattr(granularity, "MODULE$").MINUTE()
    log.cleanUpExpiredLogs(snapshot, none, milliseconds, minute)
    deleted = len(before - _entries(layout, table))
    if deleted:
        crash_point(f"log_cleaned:{table}")
    return LogCleanup(table, retention, deleted, held_by)


def _age(spark: SparkSession, log: Any, entry: str) -> timedelta | None:
    """How long ago the log entry at ``entry`` was written, by Delta's clock (None: it is gone)."""
    path = java_class(spark, "org.apache.hadoop.fs.Path")(entry)
    files = path.getFileSystem(log.newDeltaHadoopConf())
    if not files.exists(path):
        return None
    written = files.getFileStatus(path).getModificationTime()
    return timedelta(milliseconds=log.clock().getTimeMillis() - written)


def _entries(layout: StorageLayout, table: str) -> set[str]:
    """The files of the table's log named by version (not a local file system's hidden checksums)."""
    return {name for name in layout.fs.list(layout.delta_log(table)) if name[:20].isdigit()}
