"""Auto CDC: apply a stream of change events to a Delta table, one idempotent MERGE per micro-batch.

SCD type 1 keeps the latest row per key:

- within a batch, the latest event per key by ``sequence_by`` wins (so MERGE never sees two source rows
  for one target row);
- across batches, an event whose sequence is not above the target row's is ignored, so an older event
  never overwrites newer state;
- a delete leaves a *tombstone* (key and sequence, :mod:`deltaflow.sinks.tombstones`), so an insert of
  the same or an older sequence arriving later does not bring the row back. Tombstones are dropped after
  the target's ``pipelines.cdc.tombstoneGCThresholdInSeconds`` (default two days).

SCD type 2 keeps every version, bounded by ``__START_AT`` / ``__END_AT``
(:mod:`deltaflow.sinks.cdc_history`): an out-of-order event lands at its place in history, a delete
closes the current version.

The target's MERGE carries the flow's ``txnAppId`` / ``txnVersion``, so a batch replayed after a crash
changes nothing there (see :mod:`deltaflow.sinks.idempotent`). Its tombstones are written after the MERGE
and without the pair: a replay may append them twice, which no reader can tell apart. A replay may read
the tombstones its first attempt appended; what it computes from them is not written, since its MERGE,
committed before them, is skipped.

Examples:
    >>> writer = AutoCdcWriter(flow, target_path, checkpoint.tombstones, 172800)  # doctest: +SKIP
    >>> query = start_foreach_batch(df, name=flow.name, handler=writer.apply, ...)  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from deltaflow.errors import SinkError
from deltaflow.sinks.cdc_history import merge_history
from deltaflow.sinks.cdc_target import (
    DEFAULT_TOMBSTONE_SECONDS,
    DELETE,
    OP,
    RANK,
    SEQ,
    TRUNCATE,
    UPSERT,
    cdc_of,
    sequence_of,
    sequence_type,
    target_columns,
)
from deltaflow.sinks.merge_keys import merge_condition
from deltaflow.sinks.merge_source import on_materialized
from deltaflow.sinks.snapshot_prefetch import prefetch
from deltaflow.sinks.tombstones import SEQUENCE, Tombstones

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from deltaflow.define.graph import Flow

_FRESH = "_df_fresh"
_GUARD = "deltaflow auto CDC: an event without a"  # raise_error's message in a guarded batch


@dataclass
class AutoCdcWriter:
    """Applies each micro-batch of an auto CDC flow to its target.

    Args:
        flow: The auto CDC flow.
        path: The target Delta table.
        tombstones: The flow's tombstone table (in its checkpoint, so a full refresh starts without them).
        retention_seconds: How long a tombstone is kept.
        storage_options: ``deltalake``'s options for the storage (S3 keys), for the tombstones' appends.

    """

    flow: Flow
    path: str
    tombstones: str
    retention_seconds: int = DEFAULT_TOMBSTONE_SECONDS
    storage_options: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self.cdc = cdc_of(self.flow)
        self.kept: list[str] = []
        self.buried = Tombstones(self.tombstones, self.retention_seconds, self.storage_options)

    def prepare(self, spark: SparkSession, source: StructType) -> None:
        """Check the source's columns and create the tombstone table (so every batch can read it)."""
        self.kept = target_columns(self.flow, source)
        self.buried.create(spark, [source[k] for k in self.cdc.keys], sequence_type(self.flow, source))

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        """Apply one micro-batch (called inside :func:`~deltaflow.sinks.idempotent.idempotent_writes`).

        The batch is read once. An event without a key or sequence fails the batch before anything
        commits: SCD type 1 counts them in its first job over the batch (an observed count, or the
        truncates' count), SCD type 2 has ``raise_error`` in the source's columns. Only then are the bad
        events counted, for the error.
        """
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        events = self._events(batch, guarded=self.cdc.scd_type == 2)
        cached = self.cdc.scd_type == 2 or self.cdc.apply_as_truncates is not None
        if cached:
            events = events.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            truncates = 0
            if self.cdc.apply_as_truncates is not None:
                bad, wipe = self._unordered() | self._keyless(F.col(OP)), F.col(OP) == TRUNCATE
                truncates, suspects = events.agg(F.count_if(wipe), F.count_if(bad)).head(1)[0]
                if suspects:
                    raise _BadEvents
            if self.cdc.scd_type == 1:
                self._scd1(events, truncates, batch_id)
            else:
                merge_history(events, path=self.path, cdc=self.cdc, kept=self.kept, tombstones=self.buried)
                if self.cdc.apply_as_deletes is not None:
                    deletes = events.where(F.col(OP) == DELETE).select(*self.cdc.keys, SEQ)
                    self.buried.record(self.buried.collect(deletes), batch_id)
            prefetch(batch.sparkSession, self.path)  # the next batch's MERGE starts from the state
        except Exception as error:
            if not isinstance(error, _BadEvents) and _GUARD not in str(error):
                raise
            raise self._bad_events(self._events(batch, guarded=False)) from None
        finally:
            if cached:
                events.unpersist()

    # -- events -------------------------------------------------------------------------------------------

    def _events(self, batch: DataFrame, *, guarded: bool) -> DataFrame:
        """The kept columns, ``_df_op`` and ``_df_rank`` of each event, and ``_df_seq`` unless :attr:`_seq`.

        ``guarded``: a null key or sequence raises an error naming :data:`_GUARD` when its row is read.
        Unguarded, ``_df_seq`` is null when a part of the sequence is (a null sequence then wins its key).
        """
        return batch.select(*(self._guarded if guarded else self._unguarded))

    # Columns are built once per flow, not per batch (these, _rank, _buried): each takes a few py4j calls,
    # and building them took 70 ms of a 3.2 s batch (200,000 changes into 1M rows). A Column is not bound
    # to a session.
    @cached_property
    def _guarded(self) -> list[Column]:
        return self._event_columns(guarded=True)

    @cached_property
    def _unguarded(self) -> list[Column]:
        return self._event_columns(guarded=False)

    def _event_columns(self, *, guarded: bool) -> list[Column]:
        from pyspark.sql import functions as F

        cdc = self.cdc
        sequence = (F.col(cdc.sequence_by[0]) if len(cdc.sequence_by) == 1
                    else F.when(~self._unordered(), F.struct(*[F.col(c) for c in cdc.sequence_by])))
        op = F.lit(UPSERT)
        if cdc.apply_as_truncates is not None:
            op = F.when(_condition(cdc.apply_as_truncates), F.lit(TRUNCATE)).otherwise(op)
        if cdc.apply_as_deletes is not None:
            op = F.when(_condition(cdc.apply_as_deletes), F.lit(DELETE)).otherwise(op)
        columns = {c: F.col(c) for c in self.kept}
        if guarded:
            unordered, keyless = self._unordered(), self._keyless(op)
            sequence = F.when(unordered, F.raise_error(F.lit(f"{_GUARD}: sequence"))).otherwise(sequence)
            for key in cdc.keys:
                columns[key] = F.when(keyless, F.raise_error(F.lit(f"{_GUARD}: key"))).otherwise(columns[key])
        kept = [column.alias(name) for name, column in columns.items()]
        if self._seq == SEQ:
            kept.append(sequence.alias(SEQ))
        return [*kept, op.alias(OP), F.when(op == DELETE, 1).otherwise(0).alias(RANK)]

    @cached_property
    def _seq(self) -> str:
        """The column that orders a key's events: SCD type 1's one sequence column, or a copy, ``_df_seq``.

        Copying the column costs as much as the null checks (0.1 s of 0.8 s for 200,000 events).
        """
        single = len(self.cdc.sequence_by) == 1 and self.cdc.scd_type == 1
        return self.cdc.sequence_by[0] if single else SEQ

    def _unordered(self) -> Column:
        from pyspark.sql import functions as F

        unordered = F.lit(False)
        for column in self.cdc.sequence_by:
            unordered = unordered | F.col(column).isNull()
        return unordered

    def _keyless(self, op: Column) -> Column:
        from pyspark.sql import functions as F

        keyless = F.lit(False)
        for column in self.cdc.keys:
            keyless = keyless | F.col(column).isNull()
        return keyless & (op != TRUNCATE)  # a truncate names no row

    def _bad_events(self, events: DataFrame) -> SinkError:
        """The error for a batch whose MERGE met an event without a key or sequence: how many of each."""
        from pyspark.sql import functions as F

        row = events.agg(F.count_if(self._unordered()), F.count_if(self._keyless(F.col(OP)))).first()
        assert row is not None
        sequence, keys = ", ".join(self.cdc.sequence_by), ", ".join(self.cdc.keys)
        count, what = ((row[0], f"a null sequence_by ({sequence})") if row[0]
                       else (row[1], f"a null key ({keys})"))
        return SinkError(f"auto CDC flow '{self.flow.name}': {count} event(s) have {what}",
                         location=str(self.flow.location),
                         hint="fill it in upstream, or filter those events out in the source view")

    @property
    def _values(self) -> list[str]:
        return [c for c in self.kept if c not in self.cdc.keys]

    def _keys_match(self, left: str, right: str) -> str:
        return " AND ".join(f"{left}.`{k}` = {right}.`{k}`" for k in self.cdc.keys)

    # -- SCD type 1 ---------------------------------------------------------------------------------------

    def _scd1(self, events: DataFrame, truncates: int, batch_id: int) -> None:
        """The latest event per key, merged in: one pass over the batch for the MERGE and the tombstones.

        The job that materializes the MERGE's source brings its deletes to the driver (recorded after the
        MERGE; :meth:`Tombstones.watch`) and counts two kinds of winners. Without a key or sequence: a null
        sequence ranks first in its key and null keys make a key of their own, so a bad event makes a bad
        winner, and the batch fails before its MERGE. Old enough for a tombstone to bury
        (:meth:`Tombstones.may_bury`): only then are the tombstones joined, to the computed source (a
        buried delete recorded again changes nothing). A winning delete is enough for a tombstone: an
        earlier one of its key is outranked by the row the winner leaves (or by the winner's tombstone).
        """
        from pyspark.sql import functions as F

        latest = self._latest(events, truncates)
        deleting = self.cdc.apply_as_deletes is not None
        checks = {"suspects": F.count_if(F.col(self._seq).isNull() | self._keyless(F.col(OP)))}
        late = self.buried.may_bury(self._seq)
        if late is None:
            latest = self._unburied(latest)
        else:
            checks["late"] = F.count_if(late)
        watched = self.buried.watch(latest, F.col(OP) == DELETE if deleting else None, self.cdc.keys,
                                    sequence=self._seq, also=checks)

        def write(source: DataFrame) -> None:
            metrics = watched.metrics()
            if metrics["suspects"]:
                raise _BadEvents
            deletes = watched.pending(source) if deleting else None
            if metrics.get("late"):  # deterministic: both passes of the MERGE see the same rows
                source = self._unburied(source)
            self._merge_latest(source, truncates)
            if deletes is not None:
                self.buried.record(deletes, batch_id)

        on_materialized(watched.source, write)

    def _latest(self, events: DataFrame, truncates: int) -> DataFrame:
        """The batch's latest event per key (a tombstone may bury some: :meth:`_unburied`).

        ``_df_fresh``: the event has no stored row to fill its nulls from.
        """
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cdc = self.cdc
        fresh = F.lit(truncates > 0)  # the stored row is gone: write the event as it is
        if truncates:  # the events up to the last truncate are void, and every stored row goes
            last = events.where(F.col(OP) == TRUNCATE).agg(F.max(self._seq).alias("_df_truncate"))
            events = (events.crossJoin(F.broadcast(last)).where(F.col(self._seq) > F.col("_df_truncate"))
                      .drop("_df_truncate"))
        if cdc.ignore_null_updates:  # an update's nulls take the values of the batch's earlier updates
            in_order = Window.partitionBy(*cdc.keys).orderBy(self._seq, RANK)
            events = events.withColumn("_df_epoch", F.sum(RANK).over(
                in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
            segment = (Window.partitionBy(*cdc.keys, "_df_epoch").orderBy(self._seq, RANK)
                       .rowsBetween(Window.unboundedPreceding, Window.currentRow))
            for column in self._values:
                if column == self._seq:  # it orders the segment; an upsert's own is its latest anyway
                    continue
                events = events.withColumn(column, F.last(F.when(F.col(OP) == UPSERT, F.col(column)),
                                                          ignorenulls=True).over(segment))
            fresh = fresh | ((F.col("_df_epoch") > 0) & (F.col(OP) == UPSERT))  # deleted earlier in batch
        winners = events.withColumn("_df_n", self._rank).where("_df_n = 1")
        if cdc.ignore_null_updates:  # the MERGE's source carries only the columns its clauses read
            winners = winners.withColumn(_FRESH, fresh)
        return winners.drop("_df_n", "_df_epoch", RANK)

    def _unburied(self, winners: DataFrame) -> DataFrame:
        """The winners no tombstone buries."""
        rows = self.buried.rows(winners.sparkSession).alias("b")
        return winners.alias("w").join(rows, self._buried, "left_anti")

    @cached_property
    def _rank(self) -> Column:
        """An event's rank among its key's events in the batch (1: the latest)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        # A null sequence ranks first, so that the winners' check sees it. At one sequence a delete wins:
        # "delete" sorts before "upsert" (truncates are gone by now), and a string already in the rows costs
        # less than the rank column through the shuffle (30 ms of 0.5 s for 200,000 events).
        latest = Window.partitionBy(*self.cdc.keys).orderBy(F.col(self._seq).desc_nulls_first(), OP)
        return F.row_number().over(latest)

    @cached_property
    def _buried(self) -> Column:
        """Whether a tombstone ``b`` buries a winner ``w``: its key deleted as late or later."""
        from pyspark.sql import functions as F

        return F.expr(f"{self._keys_match('w', 'b')} AND w.`{self._seq}` <= b.{SEQUENCE}")

    def _merge_latest(self, source: DataFrame, truncates: int) -> None:
        from delta.tables import DeltaTable

        newer = f"s.`{self._seq}` > {sequence_of(self.cdc, 't')}" + (" OR true" if truncates else "")
        value: dict[str, str | Column] = {c: f"s.`{c}`" for c in self.kept}
        if self.cdc.ignore_null_updates:
            value.update({c: f"CASE WHEN s.{_FRESH} THEN s.`{c}` ELSE coalesce(s.`{c}`, t.`{c}`) END"
                          for c in self._values})
        match = self._keys_match("t", "s")  # a truncate's MERGE reads every row anyway: no key filter
        on = match if truncates else merge_condition(source, self.path, self.cdc.keys, match)
        merge = (DeltaTable.forPath(source.sparkSession, self.path).alias("t")
                 .merge(source.alias("s"), on)
                 .whenMatchedDelete(condition=f"s.{OP} = '{DELETE}' AND ({newer})")
                 .whenMatchedUpdate(condition=f"s.{OP} = '{UPSERT}' AND ({newer})", set=value)
                 .whenNotMatchedInsert(condition=f"s.{OP} = '{UPSERT}'",
                                       values={c: f"s.`{c}`" for c in self.kept}))
        if truncates:
            merge = merge.whenNotMatchedBySourceDelete()
        merge.execute()


class _BadEvents(Exception):
    """A batch's first job found events without a key or sequence (they are counted for the error)."""


def _condition(condition: str | Column) -> Column:
    from pyspark.sql import functions as F

    return F.expr(condition) if isinstance(condition, str) else condition
