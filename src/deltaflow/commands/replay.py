"""``deltaflow quarantine replay TABLE``: re-feed quarantined rows once the schema or the rule is fixed.

The rows are taken again from the flow's input table, found by the Kafka position each quarantined row
carries, and go through the flow's current definition: parsing, expectations and all. Rows that pass now
are appended to the table; rows that still fail are quarantined again, with their new reasons; the
replayed quarantine rows are removed.

Exactly once: the replay is recorded first (``StorageLayout.replay_record``: an id, the quarantine
version it reads and the ``--where`` filter). Its writes carry the ``txnAppId``
``StorageLayout.replay_app_id`` (version 0 for the rows, version 1 for the removal), so a replay
interrupted at any point and run again selects the same rows and commits each write once. The record goes
when the replay is done.

Examples:
    >>> where = "array_contains(failed_expectations, 'small')"
    >>> result = replay_quarantine(resolver, "silver_events", where)  # doctest: +SKIP
    >>> result.replayed, result.passed
    (30, 30)

"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from deltaflow.define.expectations import passing
from deltaflow.errors import ConfigError
from deltaflow.faults import crash_point
from deltaflow.sinks.idempotent import idempotent_writes
from deltaflow.sinks.quarantine import split_writer

if TYPE_CHECKING:
    from deltaflow.define.graph import Flow
    from deltaflow.resolve.resolver import Resolver
    from deltaflow.storage import StorageLayout

POSITION = ("topic", "partition", "offset")


@dataclass(frozen=True)
class ReplayIntent:
    """What a replay re-feeds, recorded before it writes anything."""

    id: str
    table: str
    quarantine_version: int
    where: str | None


@dataclass(frozen=True)
class ReplayResult:
    """How many quarantined rows were re-fed, and how many of them passed this time."""

    replayed: int
    passed: int
    resumed: bool


def pending_replay(layout: StorageLayout, table: str) -> ReplayIntent | None:
    """The unfinished replay of ``table``, if a replay was interrupted."""
    text = layout.fs.read_text(layout.replay_record(table))
    return None if text is None else ReplayIntent(**json.loads(text))


def start_replay(resolver: Resolver, table: str, where: str | None) -> ReplayIntent:
    """Record a replay of the rows of ``table``'s quarantine matching ``where``, as the quarantine is now."""
    layout = resolver.context.layout
    version = layout.open_table(layout.quarantine(table)).version()
    intent = ReplayIntent(uuid.uuid4().hex, table, version, where)
    layout.fs.write_text(layout.replay_record(table), json.dumps(asdict(intent)))
    return intent


def apply_replay(resolver: Resolver, intent: ReplayIntent) -> ReplayResult:
    """Re-feed the rows ``intent`` selects; each write commits once however often this runs."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    spark, layout = resolver.context.spark, resolver.context.layout
    flow, source = _replayable(resolver, intent.table)
    quarantine_path = layout.quarantine(intent.table)
    selected = (spark.read.format("delta").option("versionAsOf", intent.quarantine_version)
                .load(quarantine_path))
    if intent.where:
        selected = selected.where(intent.where)
    selected = selected.where(F.col("flow") == flow.name).select(*POSITION, "quarantined_at").persist()
    try:
        replayed = selected.count()
        if replayed == 0:
            return ReplayResult(0, 0, resumed=False)
        rows = (spark.read.format("delta").load(layout.table(source))
                .join(selected.select(*POSITION).distinct(), list(POSITION), "left_semi"))
        df = resolver.build_over(flow, {source: rows}).persist()
        target = resolver.graph.datasets[intent.table]
        app_id = layout.replay_app_id(intent.table, intent.id)
        with idempotent_writes(spark, app_id, 0):
            split_writer(flow.name, layout.table(intent.table), quarantine_path,
                         target.partition_cols, target.merge_schema)(df, -1)
        passed = passing(df).count()
        df.unpersist()
        match = " AND ".join(f"t.`{c}` = s.`{c}`" for c in (*POSITION, "quarantined_at"))
        with idempotent_writes(spark, app_id, 1):
            (DeltaTable.forPath(spark, quarantine_path).alias("t")
             .merge(selected.alias("s"), f"{match} AND t.flow = '{flow.name}'").whenMatchedDelete().execute())
        return ReplayResult(replayed, passed, resumed=False)
    finally:
        selected.unpersist()


def replay_quarantine(resolver: Resolver, table: str, where: str | None = None) -> ReplayResult:
    """Re-feed ``table``'s quarantined rows matching ``where`` (all when None).

    An interrupted replay is finished instead: it re-feeds what that replay selected, ``where`` unused.

    Raises:
        ConfigError: ``table`` has no quarantine, or its rows carry no Kafka positions to find them by.

    """
    layout = resolver.context.layout
    _replayable(resolver, table)
    intent = pending_replay(layout, table)
    resumed = intent is not None
    intent = intent or start_replay(resolver, table, where)
    result = apply_replay(resolver, intent)
    crash_point(f"replay_applied:{table}")
    layout.fs.delete(layout.replay_record(table))
    return ReplayResult(result.replayed, result.passed, resumed)


def _replayable(resolver: Resolver, table: str) -> tuple[Flow, str]:
    """The flow writing ``table`` through quarantine, and the one table it streams."""
    flows = resolver.graph.flows_into(table) if table in resolver.graph.datasets else []
    quarantining = [f for f in flows if resolver.flows[f.name].quarantines]
    if len(quarantining) != 1:
        raise ConfigError(f"'{table}' has no flow writing a quarantine",
                          hint="replay works for tables with expect_or_quarantine rules or dp.parse_json")
    flow = quarantining[0]
    streamed = [name for name, mode in resolver.stored_inputs(table).items() if mode == "stream"]
    if len(streamed) != 1 or not set(POSITION) <= set(resolver.schemas[streamed[0]].names):
        raise ConfigError(f"'{table}' cannot be replayed: its flow must stream one table whose rows carry "
                          "their Kafka position (topic, partition, offset)",
                          hint="read a bronze table of dp.read_kafka, which keeps them")
    return flow, streamed[0]
