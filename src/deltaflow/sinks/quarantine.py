"""Quarantine: a streaming table's rows that failed an ``expect_or_quarantine`` rule, kept whole.

A flow with quarantine rules writes each micro-batch twice, both in one idempotent batch (see
:mod:`deltaflow.sinks.foreach_batch`): the rows that passed to the table, and the others to
``<table>_quarantine``, each an append stamped with the flow's pair and checked against the table's
checksum (:func:`deltaflow.sinks.txn_append.append_once`; Delta's writer when the flow evolves its
schema), with

- ``record``: for rows from ``dp.parse_json``, the raw record as it came (``record_bytes`` too when it was
  not UTF-8; null when the record was null, as a Kafka tombstone is), else the whole row as JSON, so
  nothing about it is lost;
- ``failed_expectations``: the names of the rules it failed;
- ``topic`` / ``partition`` / ``offset`` or ``source_file``: where it came from, when the row carries them;
- ``flow``, ``batch_id`` and ``quarantined_at``.

The quarantine table is ``StorageLayout.quarantine(table)``, created by
:func:`deltaflow.sinks.tables.ensure_quarantine`.

Examples:
    >>> quarantine = layout.quarantine("silver")  # doctest: +SKIP
    >>> handler = split_writer("silver", layout.table("silver"), quarantine)  # doctest: +SKIP

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltaflow.define.expectations import FAILED, INTERNAL_COLUMNS, RAW, RAW_BYTES
from deltaflow.sinks.idempotent import session_stamp
from deltaflow.sinks.txn_append import append_once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from deltaflow.define.graph import BatchHandler

QUARANTINE_SCHEMA = (
    "flow STRING, batch_id BIGINT, quarantined_at TIMESTAMP, failed_expectations ARRAY<STRING>, "
    "record STRING, record_bytes BINARY, topic STRING, partition INT, offset BIGINT, source_file STRING"
)
_POSITION = {"topic": "string", "partition": "int", "offset": "bigint", "source_file": "string"}


def split_writer(flow: str, path: str, quarantine: str, partition_cols: tuple[str, ...] = (),
                 merge_schema: bool = False) -> BatchHandler:
    """A batch handler appending passing rows to ``path`` and failing ones to ``quarantine``.

    It runs inside :func:`~deltaflow.sinks.idempotent.idempotent_writes`, whose pair stamps both appends.
    """
    from pyspark.sql import functions as F

    def write(batch: DataFrame, batch_id: int) -> None:
        app_id, version = session_stamp(batch.sparkSession)
        batch = batch.persist()
        try:
            passed = batch.where(F.size(FAILED) == 0).drop(*INTERNAL_COLUMNS)
            if merge_schema:  # Delta's writer evolves the table's schema (stamped by the session's pair)
                writer = passed.write.format("delta").mode("append").option("mergeSchema", "true")
                if partition_cols:
                    writer = writer.partitionBy(*partition_cols)
                writer.save(path)
            else:
                append_once(passed, path, app_id=app_id, batch_id=version, partition_cols=partition_cols)
            failed = batch.where(F.size(FAILED) > 0)
            if failed.isEmpty():
                return
            columns = [c for c in batch.columns if c not in INTERNAL_COLUMNS]
            position = [(F.col(c) if c in columns else F.lit(None)).cast(kind).alias(c)
                        for c, kind in _POSITION.items()]
            whole = F.to_json(F.struct(*columns))
            # a record dp.parse_json read is kept as it came, and a null one (a tombstone) stays null
            record = F.col(RAW) if RAW in batch.columns else whole
            raw_bytes = F.col(RAW_BYTES) if RAW_BYTES in batch.columns else F.lit(None).cast("binary")
            kept = failed.select(F.lit(flow).alias("flow"), F.lit(batch_id).cast("bigint").alias("batch_id"),
                                 F.current_timestamp().alias("quarantined_at"),
                                 F.col(FAILED).alias("failed_expectations"), record.alias("record"),
                                 raw_bytes.alias("record_bytes"), *position)
            append_once(kept, quarantine, app_id=app_id, batch_id=version)
        finally:
            batch.unpersist()

    return write
