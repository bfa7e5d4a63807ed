"""Auto CDC, SCD type 2: a batch's events merged into the target's history of versions.

For the keys a batch touches, the history is rebuilt from the stored versions, the tombstones and the
new events, in sequence order, and only the differences are merged in: an out-of-order event lands at its
place in history, a delete closes the current version. The stored versions of those keys are read once
(one scan of the target, its keys met by a broadcast of the batch's) and kept for the two places that use
them. Into a large target with deletion vectors, the MERGE's condition also lists the batch's key hashes
(:mod:`deltaflow.sinks.merge_keys`), so its second pass shuffles only about the batch's rows.

Examples:
    >>> merge_history(events, path=target, cdc=cdc, kept=kept, tombstones=buried)  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltaflow.sinks.cdc_target import DELETE, END_AT, OP, RANK, SEQ, START_AT, UPSERT
from deltaflow.sinks.merge_keys import merge_condition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from deltaflow.define.graph import AutoCdc
    from deltaflow.sinks.tombstones import Tombstones

_SRC = "_df_src"


def merge_history(events: DataFrame, *, path: str, cdc: AutoCdc, kept: Sequence[str],
                  tombstones: Tombstones) -> None:
    """Merge one batch's events (kept columns, ``_df_seq``, ``_df_op``, ``_df_rank``) into ``path``.

    Args:
        events: The batch's events, persisted by the caller (they are read several times).
        path: The target Delta table (kept columns, ``__START_AT``, ``__END_AT``).
        cdc: The flow's auto CDC settings.
        kept: The columns the target keeps from the source.
        tombstones: The flow's tombstones (deletes remembered past their rows).

    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    session = events.sparkSession
    keys, values = list(cdc.keys), [c for c in kept if c not in cdc.keys]
    touched = events.select(*keys).distinct().alias("k")
    target = session.read.format("delta").load(path)
    # The touched keys' versions: read by the rebuild and by the stale versions' check, so read once.
    stored = (target.alias("t").join(touched, F.expr(_keys_match(keys, "t", "k")), "left_semi")
              .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        stored_versions = stored.select(*kept, F.col(START_AT).alias(SEQ), F.lit(UPSERT).alias(OP),
                                        F.lit(0).alias(RANK), F.lit(0).alias(_SRC))
        tombs = tombstones.rows(session).alias("t")
        deletes = tombs.join(touched, F.expr(_keys_match(keys, "t", "k")), "left_semi").select(
            *[F.col(k) for k in keys],
            *[F.lit(None).cast(target.schema[c].dataType).alias(c) for c in values],
            F.col(SEQ), F.lit(DELETE).alias(OP), F.lit(1).alias(RANK), F.lit(0).alias(_SRC))
        history = (events.withColumn(_SRC, F.lit(1)).select(*kept, SEQ, OP, RANK, _SRC)
                   .unionByName(stored_versions).unionByName(deletes))
        versions = _versions(history, cdc, kept, values)
        start_matches = _keys_match(keys, "t", "s") + f" AND t.`{START_AT}` = s.`{START_AT}`"
        stale = stored.alias("t").join(versions.alias("s"), F.expr(start_matches), "left_anti")
        changes = (versions.withColumn(OP, F.lit(UPSERT))
                   .unionByName(stale.select(*kept, START_AT, END_AT).withColumn(OP, F.lit(DELETE))))
        _merge(changes, touched, path, keys, [*kept, START_AT, END_AT], values, start_matches)
    finally:
        stored.unpersist()


def _versions(history: DataFrame, cdc: AutoCdc, kept: Sequence[str], values: Sequence[str]) -> DataFrame:
    """The touched keys' versions (kept columns, ``__START_AT``, ``__END_AT``), rebuilt in sequence order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = list(cdc.keys)
    once = Window.partitionBy(*keys, SEQ).orderBy(F.col(_SRC).desc(), F.col(RANK).desc())
    history = history.withColumn("_df_n", F.row_number().over(once)).where("_df_n = 1")
    in_order = Window.partitionBy(*keys).orderBy(SEQ)
    starts = F.col(OP) == UPSERT
    if cdc.track_history_column_list is not None:
        previous_op = F.lag(OP).over(in_order)
        changed = F.lit(False)
        for column in cdc.track_history_column_list:
            changed = changed | ~F.col(column).eqNullSafe(F.lag(column).over(in_order))
        starts = starts & (previous_op.isNull() | (previous_op == DELETE) | changed)
    boundary = (F.col(OP) == DELETE) | starts
    history = history.withColumn("_df_head", boundary).withColumn(
        "_df_group", F.sum(F.col("_df_head").cast("int")).over(
            in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    group = (Window.partitionBy(*keys, "_df_group").orderBy(SEQ)
             .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    for column in values:  # a version holds the last values of its events (in-place updates)
        history = history.withColumn(column, F.last(column, ignorenulls=cdc.ignore_null_updates).over(group))
    heads = history.where("_df_head").withColumn(END_AT, F.lead(SEQ).over(in_order))
    return heads.where(F.col(OP) == UPSERT).select(*kept, F.col(SEQ).alias(START_AT), END_AT)


def _merge(changes: DataFrame, touched: DataFrame, path: str, keys: Sequence[str], columns: Sequence[str],
           values: Sequence[str], start_matches: str) -> None:
    """MERGE the changed versions (``_df_op`` upsert or delete) on key and ``__START_AT``."""
    from delta.tables import DeltaTable

    same = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in [*values, END_AT])
    every: dict[str, str | Column] = {c: f"s.`{c}`" for c in columns}
    (DeltaTable.forPath(changes.sparkSession, path).alias("t")
     .merge(changes.alias("s"), merge_condition(touched, path, keys, start_matches))
     .whenMatchedDelete(condition=f"s.{OP} = '{DELETE}'")
     .whenMatchedUpdate(condition=f"s.{OP} = '{UPSERT}' AND NOT ({same})", set=every)
     .whenNotMatchedInsert(condition=f"s.{OP} = '{UPSERT}'", values=every)
     .execute())


def _keys_match(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.`{k}` = {right}.`{k}`" for k in keys)
