"""``deltaflow vacuum``: delete the files a table no longer needs, never one a flow still reads.

Delta's VACUUM deletes files removed from a table longer ago than the retention. A stream that is
stopped (or behind) may still need some of them: the seed's pitfall ("keep vacuum retention > longest
stream restart time"). Before it deletes anything, deltaflow asks every flow that streams the table where
it stands (:mod:`deltaflow.commands.readers`) and refuses a retention that would take a file one of them
needs, naming the flow. With no ``--retain``, the table's own ``delta.deletedFileRetentionDuration``
(Delta's default: 7 days) is kept.

A retention under :data:`MIN_RETENTION` is refused while the pipeline may be running: the files of a batch
being written are not in the log yet, and only their age protects them. ``--stopped`` says no run is
writing the table.

Examples:
    >>> vacuum_table(resolver, "bronze", retain=timedelta(days=2), dry_run=True)  # doctest: +SKIP
    VacuumResult(table='bronze', retention=datetime.timedelta(days=2), files=12, dry_run=True)

"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from deltaflow.commands.horizons import FILE_RETENTION, table_retention
from deltaflow.commands.readers import stream_positions
from deltaflow.commands.tables import open_table
from deltaflow.errors import ConfigError
from deltaflow.faults import crash_point
from deltaflow.runtime.session import session_settings
from deltaflow.spec.durations import human

if TYPE_CHECKING:
    from deltaflow.resolve.resolver import Resolver
    from deltaflow.storage import StorageLayout

MIN_RETENTION = timedelta(hours=1)
LISTING = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@dataclass(frozen=True)
class VacuumResult:
    """What a vacuum of one table deleted (or, in a dry run, would delete)."""

    table: str
    retention: timedelta
    files: int
    dry_run: bool


def vacuum_retention(layout: StorageLayout, flows: Collection[str], table: str,
                     retain: timedelta | None = None, stopped: bool = False) -> timedelta:
    """The retention a vacuum of ``table`` keeps, once no flow needs more; checked without a JVM.

    Reads only the table's Delta log and the checkpoints of the flows streaming it, so a refusal comes
    in a second, before Spark starts.

    Raises:
        ConfigError: A flow that streams the table still needs files the retention would delete, or the
            retention is under :data:`MIN_RETENTION` while a run may be writing.

    """
    delta = open_table(layout, table)
    retention = retain if retain is not None else table_retention(delta, FILE_RETENTION)
    for position in stream_positions(layout, {table: delta}, flows)[table]:
        age, dataset = position.age(), position.dataset
        if age is None and position.version <= delta.version():
            raise ConfigError(f"flow '{position.flow}' reads '{table}' from version {position.version}, "
                              "which its log no longer holds",
                              hint=f"full-refresh it: deltaflow run --full-refresh {dataset}")
        if age is not None and retention < age:
            raise ConfigError(
                f"vacuum '{table}' keeping {human(retention)}: flow '{position.flow}' still reads it from "
                f"version {position.version}, committed {human(age)} ago",
                hint=f"keep at least {human(age)} (--retain), or first run the flow (deltaflow run --refresh "
                f"{dataset}) or full-refresh it")
    if retention < MIN_RETENTION and not stopped:
        raise ConfigError(f"vacuum '{table}' keeping {human(retention)}: files of a batch being written now "
                          f"could go (under {human(MIN_RETENTION)})",
                          hint="stop the pipeline and pass --stopped, or keep more")
    return retention


def vacuum_table(resolver: Resolver, table: str, retain: timedelta | None = None, dry_run: bool = False,
                 stopped: bool = False) -> VacuumResult:
    """Vacuum ``table`` keeping ``retain`` (default: the table's own retention), if no flow needs more.

    Raises:
        ConfigError: See :func:`vacuum_retention` (checked again here, right before the delete).

    """
    layout = resolver.context.layout
    retention = vacuum_retention(layout, resolver.graph.flows, table, retain, stopped)
    deleted = _vacuum(resolver, table, retention, dry_run)
    if deleted and not dry_run:
        crash_point(f"vacuumed:{table}")
    return VacuumResult(table, retention, deleted, dry_run)


def _vacuum(resolver: Resolver, table: str, retention: timedelta, dry_run: bool) -> int:
    """Run Delta's VACUUM with exactly ``retention``; the number of files deleted (or listed)."""
    spark, path = resolver.context.spark, resolver.context.layout.table(table)
    # Delta 4.1+ ignores RETAIN unless this is off; its own blanket check gives way to the one above.
    settings = {"spark.databricks.delta.vacuum.retentionWindowIgnore.enabled": "false",
                "spark.databricks.delta.retentionDurationCheck.enabled": "false"}
    if LISTING not in resolver.context.spec.spark_conf:
        # Delta lists the table's folders in this many tasks, 10,000 by default: 100 s of scheduling for a
        # small table on two cores. A few tasks per core list as fast.
        settings[LISTING] = str(4 * spark.sparkContext.defaultParallelism)
    with session_settings(spark, settings):
        hours = retention.total_seconds() / 3_600
        if dry_run:
            return spark.sql(f"VACUUM delta.`{path}` RETAIN {hours:.6f} HOURS DRY RUN").count()
        spark.sql(f"VACUUM delta.`{path}` RETAIN {hours:.6f} HOURS").collect()
    ended = next(h for h in open_table(resolver.context.layout, table).history(5)
                 if h.get("operation") == "VACUUM END")
    return int((ended.get("operationMetrics") or {}).get("numDeletedFiles", 0))
