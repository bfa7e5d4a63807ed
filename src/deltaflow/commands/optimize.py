"""``deltaflow optimize``: compact a table's small files (optionally Z-ordered), while the pipeline runs.

Each micro-batch adds a few small files; compaction rewrites them into fewer large ones in one commit that
changes no data (``dataChange=false``), so the flows streaming the table skip it: they never see the
rewrite as new rows. It may run beside the pipeline: a compaction that loses its commit to a concurrent
writer (a MERGE that replaced some of its files) is run again, and so is a pipeline batch that loses to
the compaction (:mod:`deltaflow.sinks.conflicts`). The files it replaces stay on disk, for the readers
that still need them, until ``deltaflow vacuum``.

Examples:
    >>> optimize_table(context, "silver_readings", zorder=("sensor_id",))  # doctest: +SKIP
    OptimizeResult(table='silver_readings', files_removed=480, files_added=2, zorder=('sensor_id',))

"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltaflow.define.graph import suggest
from deltaflow.errors import ConfigError, first_line
from deltaflow.faults import crash_while_jobs_run
from deltaflow.sinks.conflicts import retry_conflicts

if TYPE_CHECKING:
    from deltaflow.define.context import PipelineContext


@dataclass(frozen=True)
class OptimizeResult:
    """What a compaction of one table did (``files_removed == 0``: nothing to compact, nothing committed)."""

    table: str
    files_removed: int
    files_added: int
    zorder: tuple[str, ...] = ()


def optimize_table(context: PipelineContext, table: str, zorder: Sequence[str] = (),
                   where: str | None = None) -> OptimizeResult:
    """Compact ``table`` (the partitions matching ``where``), clustering its files by ``zorder`` if given.

    Raises:
        ConfigError: No such table, a ``zorder`` column it does not have, or a ``where`` Delta refuses
            (it may only name partition columns).
        SinkError: The compaction lost its commit to concurrent writers too many times in a row.

    """
    from delta.tables import DeltaTable
    from pyspark.errors import AnalysisException

    from deltaflow.commands.tables import open_table

    path = context.layout.table(table)
    columns = open_table(context.layout, table).schema().to_arrow().names
    for column in zorder:
        if column not in columns:
            raise ConfigError(f"optimize '{table}' --zorder: no column '{column}'{suggest(column, columns)}",
                              hint="columns: " + ", ".join(columns))
    builder = DeltaTable.forPath(context.spark, path).optimize()

    def compact() -> dict[str, int]:
        chosen = builder.where(where) if where else builder
        with crash_while_jobs_run(f"compacting:{table}", context.spark):
            done = chosen.executeZOrderBy(*zorder) if zorder else chosen.executeCompaction()
        row = done.select("metrics.numFilesAdded", "metrics.numFilesRemoved").first()
        assert row is not None  # one row per table optimized
        return dict(row.asDict())

    try:
        metrics = retry_conflicts(compact, f"optimize '{table}'")
    except AnalysisException as exc:
        option = "--where" if where else "--zorder"
        raise ConfigError(f"optimize '{table}' {option}: {first_line(exc)}") from None
    return OptimizeResult(table, int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"]),
                          tuple(zorder))
