"""The tombstone log of an auto CDC flow: the driver's copy, its clean-ups, and what it tells a batch.

Each test drives :class:`~deltaflow.sinks.tombstones.Tombstones` directly on the session; the log is read
back with ``deltalake``.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable


def test_tombstones_read_from_the_drivers_copy_equal_the_table_and_expire_every_hundred_batches(
        spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.types import IntegerType, StructField

    from deltaflow.sinks import tombstones as module

    tombstones = module.Tombstones(str(tmp_path / "tombstones"), retention_seconds=0)
    tombstones.create(spark, [StructField("id", IntegerType())], IntegerType())

    def stored() -> list[tuple[int, int]]:
        found = DeltaTable(tombstones.path).to_pyarrow_table(columns=["id", "_df_seq"]).to_pylist()
        return sorted((r["id"], r["_df_seq"]) for r in found)

    def seen() -> list[tuple[int, int]]:
        return sorted((r["id"], r["_df_seq"]) for r in tombstones.rows(spark).collect())

    def record(rows: list[tuple[int, int]], batch_id: int) -> None:
        tombstones.record(tombstones.collect(spark.createDataFrame(rows, "id INT, _df_seq INT")), batch_id)

    assert seen() == [] and tombstones._copy is not None  # the copy, taken from the empty table
    record([(1, 5), (2, 6)], batch_id=1)
    record([(3, 7)], batch_id=2)
    assert tombstones._copy is not None and tombstones._copy.num_rows == 3  # extended, not read again
    assert seen() == stored() == [(1, 5), (2, 6), (3, 7)]  # appended, expired or not, between clean-ups
    record([(4, 8)], batch_id=module.CLEANUP_EVERY)
    assert tombstones._copy is not None and tombstones._copy.num_rows == 1  # filtered by the table's cutoff
    assert seen() == stored() == [(4, 8)]  # older than the retention (0 s): gone; the batch's own kept
    monkeypatch.setattr(module, "COPY_LIMIT", 2)  # above it, the table is read every batch
    record([(5, 9), (6, 10)], batch_id=module.CLEANUP_EVERY + 1)
    assert tombstones._copy is None
    assert seen() == stored() == [(4, 8), (5, 9), (6, 10)] and tombstones._copy is None


def test_a_batchs_deletes_reach_the_driver_with_the_job_that_computes_the_source_and_no_job_of_their_own(
        spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField

    from deltaflow.sinks import tombstones as module

    tombstones = module.Tombstones(str(tmp_path / "tombstones"), retention_seconds=3600)
    tombstones.create(spark, [StructField("id", IntegerType())], IntegerType())
    tombstones.rows(spark)  # the driver's copy, taken from the empty table
    events = spark.createDataFrame([(1, 5, "delete"), (2, 6, "upsert"), (3, 7, "delete")],
                                   "id INT, _df_seq INT, _df_op STRING")
    watched = tombstones.watch(events, F.col("_df_op") == "delete", ["id"])
    done = watched.source.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)  # the observed job
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup())
    pending = watched.pending(done)
    assert len(tracker.getJobIdsForGroup()) == jobs  # gathered by the checkpoint's job
    tombstones.record(pending, batch_id=1)
    stored = DeltaTable(tombstones.path).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["_df_seq"]) for r in stored) == [(1, 5), (3, 7)]
    assert all(r["_df_deleted_at"] is not None for r in stored)
    assert sorted((r["id"], r["_df_seq"]) for r in tombstones.rows(spark).collect()) == [(1, 5), (3, 7)]


@pytest.mark.parametrize(("kind", "highest", "above"), [
    ("BIGINT", "20000000000007", "20000000000008"),
    ("DECIMAL(20,3)", "12.345", "12.346"),
    ("STRING", "'2026-11-28 10:00'", "'2026-11-28 10:01'"),
    ("DATE", "DATE'2026-11-28'", "DATE'2026-11-29'"),
    ("TIMESTAMP", "TIMESTAMP'2026-11-28 10:00:00.123456'", "TIMESTAMP'2026-11-28 10:00:00.123457'"),
])
def test_the_drivers_copy_tells_which_sequences_a_tombstone_may_bury(  # type: ignore[no-untyped-def]
        spark, tmp_path, kind: str, highest: str, above: str) -> None:
    from pyspark.sql.types import IntegerType, StructField

    from deltaflow.sinks.tombstones import Tombstones

    tombstones = Tombstones(str(tmp_path / "tombstones"), retention_seconds=3600)
    deletes = spark.sql(f"SELECT 1 AS id, CAST({highest} AS {kind}) AS _df_seq")
    tombstones.create(spark, [StructField("id", IntegerType())], deletes.schema["_df_seq"].dataType)
    nothing = tombstones.may_bury("seq")
    assert nothing is not None and spark.range(1).select(nothing).first()[0] is False  # no tombstone yet
    tombstones.record(tombstones.collect(deletes), batch_id=1)
    late = tombstones.may_bury("seq")
    assert late is not None
    events = spark.sql(f"SELECT 0 AS n, CAST({highest} AS {kind}) AS seq UNION ALL "
                       f"SELECT 1, CAST({above} AS {kind})")
    assert sorted(tuple(r) for r in events.select("n", late).collect()) == [(0, True), (1, False)]
