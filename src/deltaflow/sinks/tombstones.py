"""Auto CDC's tombstones: the deletes a flow has applied, so that a late insert cannot bring a row back.

They live in a small Delta table in the flow's checkpoint folder (a full refresh starts without them): one
row per delete, its key, its sequence and when it was recorded. A key is *buried* up to the highest
sequence of its rows. Every ``CLEANUP_EVERY`` batches the rows older than the retention are dropped.

Every batch reads them, and reading a Delta table that changed since the last read costs Spark jobs over
its log before the rows. The flow's writer is the table's only writer while it runs (one writing run per
table), so it keeps a copy of the rows in the driver (an Arrow table, read once by ``deltalake``, then
extended by what it appends) and reads that instead. In a trace of one batch on two cores (200,000
changes into a 1M-row table), building the MERGE's source took 1.10 s reading the table and 0.58 s from
the copy (a hand-written MERGE without tombstones: 0.33 s). Above :data:`COPY_LIMIT` rows, or for a key
of a type Arrow does not carry, there is no copy and the table is read every batch. The copy is in the
driver, not in an executor's memory, so a lost executor does not lose it.

Appends go without the batch's transaction id: a replay may append a batch's tombstones twice, which no
reader can tell apart (a key is buried up to its highest sequence). A batch's deletes reach the driver
before its MERGE, gathered by the job that materializes the MERGE's source (:meth:`Tombstones.watch`,
an observed ``collect_list``: no job of their own), and are appended from there by ``deltalake``, without
a Spark job (0.18 s of Spark write per batch before, in the trace above).

Examples:
    >>> tombstones = Tombstones(checkpoint.tombstones, retention_seconds=172800)  # doctest: +SKIP
    >>> tombstones.create(spark, key_fields, sequence_type)  # doctest: +SKIP
    >>> buried = tombstones.rows(session)  # doctest: +SKIP
    >>> watched = tombstones.watch(latest, F.col("_df_op") == "delete", ["id"])  # doctest: +SKIP
    >>> pending = watched.pending(latest_checkpointed)  # before the MERGE  # doctest: +SKIP
    >>> tombstones.record(pending, batch_id=7)  # after it  # doctest: +SKIP

"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from deltaflow.sinks.idempotent import unstamped

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

SEQUENCE, DELETED_AT = "_df_seq", "_df_deleted_at"
CLEANUP_EVERY = 100  # batches between two removals of expired tombstones
COPY_LIMIT = 100_000  # rows the driver keeps a copy of; above, the table is read every batch
_GATHERED = "_df_deletes"  # the observed metric that gathers a batch's deletes


@dataclass
class Tombstones:
    """One auto CDC flow's tombstone table, and the driver's copy of its rows.

    Args:
        path: The table (in the flow's checkpoint).
        retention_seconds: How long a tombstone is kept.

    """

    path: str
    retention_seconds: int
    storage_options: Mapping[str, str] | None = None
    _log: DeltaTable | None = field(default=None, init=False, repr=False)  # deltalake's handle, for appends
    _copy: pa.Table | None = field(default=None, init=False, repr=False)
    _schema: StructType | None = field(default=None, init=False, repr=False)
    _oversize: bool = field(default=False, init=False, repr=False)  # too many rows to copy until a clean-up

    def create(self, spark: SparkSession, key_fields: list[StructField], sequence: DataType) -> None:
        """Create the table if it does not exist, so that every batch can read it."""
        from delta.tables import DeltaTable
        from pyspark.sql.types import StructField, StructType, TimestampType

        fields = [*key_fields, StructField(SEQUENCE, sequence), StructField(DELETED_AT, TimestampType())]
        # deltalake appends to it, and cannot write to a table with deletion vectors: a session that turns
        # them on for new tables (spark.databricks.delta.properties.defaults.*) must not reach this one.
        (DeltaTable.createIfNotExists(spark).location(self.path).addColumns(fields)
         .property("delta.enableDeletionVectors", "false").execute())
        self._schema = StructType(fields)

    def rows(self, session: SparkSession) -> DataFrame:
        """Every tombstone (keys, ``_df_seq``, ``_df_deleted_at``), from the copy when there is one."""
        self._load()
        if self._copy is None or self._schema is None:
            return session.read.format("delta").load(self.path)
        from pyspark.sql import functions as F

        # A DataFrame made from Arrow has no size for the planner: say it is small (at most COPY_LIMIT rows).
        # One chunk: pyspark drops the rows after an empty chunk (one a clean-up's filter leaves, say).
        return F.broadcast(session.createDataFrame(self._copy.combine_chunks(), schema=self._schema))

    def may_bury(self, sequence: str) -> Column | None:
        """Whether a tombstone may bury an event: its ``sequence`` is not above the highest tombstone's.

        Told by the driver's copy: ``lit(False)`` when there are no tombstones, ``None`` when the copy
        cannot tell (there is none, or the sequence is a struct or a float, which Arrow orders otherwise
        than Spark). For a feed whose sequences only grow, no event of a new batch passes.

        Examples:
            >>> late = tombstones.may_bury("seq")  # doctest: +SKIP
            >>> str(late)  # doctest: +SKIP
            "Column<'(seq <= CAST(20000000000007 AS BIGINT))'>"

        """
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        self._load()
        if self._copy is None or self._schema is None:
            return None
        column = self._copy.column(SEQUENCE)
        if pa.types.is_struct(column.type) or pa.types.is_floating(column.type):
            return None
        highest = pc.max(column).as_py() if self._copy.num_rows else None
        if highest is None:
            return F.lit(False)
        return F.col(sequence) <= F.lit(highest).cast(self._schema[SEQUENCE].dataType)

    def _load(self) -> None:
        """Read the table into the driver's copy, unless there is one or it has too many rows.

        Read by ``deltalake``, with the schema :meth:`create` set: a Spark read of a table that changed
        costs jobs over its log (0.2-0.3 s on two cores).
        """
        if self._copy is not None or self._oversize:
            return
        if self._schema is None:
            raise RuntimeError("Tombstones.create first: it sets the table's schema")
        found = self._read() if _copyable(self._schema) else None
        self._oversize = found is None or found.num_rows > COPY_LIMIT
        self._copy = None if self._oversize else found

    def _read(self) -> pa.Table | None:
        """The table's rows read by ``deltalake``, typed as :meth:`watch` gathers them (None: too many)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        assert self._schema is not None
        log = self._handle()
        actions = log.get_add_actions(flatten=True)
        counted = "num_records" in actions.column_names
        if counted and sum(n or 0 for n in actions.column("num_records").to_pylist()) > COPY_LIMIT:
            return None
        schema = to_arrow_schema(self._schema, timezone="UTC")
        found = log.to_pyarrow_table(columns=schema.names)
        return found.cast(schema) if found.num_rows else schema.empty_table()  # no chunk to cast

    def collect(self, deletes: DataFrame) -> Pending:
        """Read a batch's deletes (keys and ``_df_seq``) into the driver: one Spark job over the batch.

        For keys Arrow does not carry they stay a DataFrame and are read again by :meth:`record`. (A
        ``limit`` here would cost a shuffle: 0.14 s against 0.07 s for 2,000 deletes of 200,000 rows.)
        """
        from pyspark.sql import functions as F

        new = deletes.withColumn(DELETED_AT, F.current_timestamp())
        return Pending(lambda: new, new.toArrow() if _copyable(new.schema) else None)

    def watch(self, source: DataFrame, deleted: Column | None, keys: Sequence[str], *,
              sequence: str = SEQUENCE, also: Mapping[str, Column] | None = None) -> Watched:
        """Have the first Spark job over ``source`` bring its deletes to the driver: no job of their own.

        ``deleted`` picks the delete rows; their keys and ``sequence`` (recorded as ``_df_seq``) are
        gathered by an observed ``collect_list`` in the job that computes ``source`` (for auto CDC, the one
        that materializes the MERGE's source). Keys Arrow does not carry are read by :meth:`collect`
        instead. ``also`` names more aggregates to observe in the same job (:attr:`Watched.metrics`);
        with ``deleted`` None, only those are (a flow without deletes).

        Examples:
            >>> watched = tombstones.watch(latest, F.col("_df_op") == "delete", ["id"], sequence="seq",
            ...                            also={"nulls": F.count_if(F.col("id").isNull())})  # doctest: +SKIP
            >>> done = watched.source.localCheckpoint()  # the observed job  # doctest: +SKIP
            >>> nulls, pending = watched.metrics()["nulls"], watched.pending(done)  # no job  # doctest: +SKIP

        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType, TimestampType

        columns = [*[F.col(k) for k in keys], F.col(sequence).alias(SEQUENCE)]
        fields = [*[source.schema[k] for k in keys], StructField(SEQUENCE, source.schema[sequence].dataType)]
        schema = StructType([*fields, StructField(DELETED_AT, TimestampType())])
        seen = Observation()
        metrics = [column.alias(name) for name, column in (also or {}).items()]
        copyable = _copyable(schema)
        if copyable and deleted is not None:
            metrics.append(F.collect_list(F.when(deleted, F.struct(*columns))).alias(_GATHERED))
        observed = source.observe(seen, *metrics) if metrics else source
        got = functools.cache(lambda: seen.get)  # each get carries the whole row from the JVM again

        def pending(done: DataFrame) -> Pending:
            assert deleted is not None, "no deletes were watched"
            if not copyable:
                return self.collect(done.where(deleted).select(*columns))
            import pyarrow as pa
            from pyspark.sql.pandas.types import to_arrow_schema

            now = datetime.now(UTC)
            rows = [{**row.asDict(recursive=True), DELETED_AT: now} for row in got()[_GATHERED]]
            copy = pa.Table.from_pylist(rows, schema=to_arrow_schema(schema, timezone="UTC"))
            return Pending(lambda: done.sparkSession.createDataFrame(copy, schema=schema), copy)

        return Watched(observed, pending, lambda: {k: v for k, v in got().items() if k != _GATHERED}
                       if metrics else {})

    def record(self, pending: Pending, batch_id: int) -> None:
        """Append what :meth:`collect` or :meth:`watch` read, without the pair (nothing when it is empty).

        Rows read into the driver are appended by ``deltalake`` (no Spark job); every ``CLEANUP_EVERY``
        batches the expired ones are dropped by Spark in the same commit.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        cleanup = batch_id > 0 and batch_id % CLEANUP_EVERY == 0
        cutoff = datetime.now(UTC) - timedelta(seconds=self.retention_seconds)
        new, added = pending
        if added is not None and not cleanup:
            if added.num_rows:
                self._append(added)
        else:
            self._rewrite(new(), cutoff if cleanup else None)
        copy = self._copy
        if cleanup and copy is not None:  # what the table kept, by the same cutoff
            copy = copy.filter(pc.field(DELETED_AT) >= cutoff)
        if cleanup and (copy is None or added is None):  # read the table again at the next batch
            self._copy, self._oversize = None, False
        elif copy is not None and added is not None and copy.num_rows + added.num_rows <= COPY_LIMIT:
            self._copy = pa.concat_tables([copy, added.cast(copy.schema)])  # extended
        elif copy is not None:  # dropped: it would outgrow the limit
            self._copy, self._oversize = None, True

    def _append(self, rows: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self._handle(), rows, mode="append")

    def _handle(self) -> DeltaTable:
        """``deltalake``'s handle on the table, at its latest version.

        Opened once: a path would be opened anew, its log read, at every use.
        """
        from deltalake import DeltaTable

        if self._log is None:
            self._log = DeltaTable(self.path, storage_options=dict(self.storage_options or {}) or None)
        else:
            self._log.update_incremental()
        return self._log

    def _rewrite(self, new: DataFrame, cutoff: datetime | None) -> None:
        """Append ``new`` with Spark; at a clean-up, overwrite the table with it and rows since ``cutoff``."""
        from pyspark.sql import functions as F

        session = new.sparkSession
        if cutoff is None and new.isEmpty():  # rows not read into the driver: nothing to append, no commit
            return
        writer = new.write.format("delta").mode("append")
        if cutoff is not None:
            kept = session.read.format("delta").load(self.path).where(F.col(DELETED_AT) >= F.lit(cutoff))
            writer = kept.localCheckpoint().unionByName(new).write.format("delta").mode("overwrite")
        with unstamped(session):
            writer.save(self.path)

class Pending(NamedTuple):
    """A batch's deletes on their way to the table: as a DataFrame, and as read into the driver."""

    rows: Callable[[], DataFrame]  # planned only when Spark writes them (clean-ups, keys Arrow lacks)
    copy: pa.Table | None


class Watched(NamedTuple):
    """A DataFrame whose first job gathers its deletes, and how to get them once it has run."""

    source: DataFrame
    pending: Callable[[DataFrame], Pending]  # given the computed source (its local checkpoint)
    metrics: Callable[[], dict[str, Any]]  # the other observed aggregates, once the job has run


def _copyable(schema: StructType) -> bool:
    """Whether Arrow carries every column of ``schema`` to the driver and back unchanged."""
    from pyspark.sql.types import (
        AtomicType,
        CalendarIntervalType,
        StructType,
        VariantType,
        YearMonthIntervalType,
    )

    def plain(kind: object) -> bool:
        if isinstance(kind, StructType):
            return all(plain(f.dataType) for f in kind.fields)
        return isinstance(kind, AtomicType) and not isinstance(
            kind, CalendarIntervalType | VariantType | YearMonthIntervalType)

    return plain(schema)
