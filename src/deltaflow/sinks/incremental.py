"""Incremental materialized views: their aggregates in Spark's state store, each batch's totals written.

For a view with an :class:`~deltaflow.sinks.incremental_plan.IncrementalPlan`, the view's driver query is
one streaming aggregation: the view's query run over its input as a stream, up to the ``groupBy``, then
grouped by the view's keys with each measure in a form Spark folds into its state batch after batch
(counts and sums add, minimums and maximums take the smaller and the larger). A batch therefore costs what
the batch holds: Spark reads the new input rows, updates the touched groups' state and hands deltaflow the
groups' totals; nothing of the view is read back from Delta. This is the streaming aggregation a
hand-written job would run, made exact and written idempotently:

* An exact distinct count cannot be added up from partial counts. For each one, the query also streams
  the (group, value) pairs through a state that lets through only pairs never seen before; the
  aggregation counts them. Without a lateness that is Spark's ``dropDuplicates``. With one, it is
  deltaflow's ``FirstSeen`` (``runtime/jvm/java``, a ``transformWithState`` processor): ``dropDuplicates``
  finds the pairs of closed windows by reading its whole state at every batch (a batch over 10M stored
  pairs spent 2-3 s there), where ``FirstSeen`` keeps a timer per group at its window's end and drops the
  group's values when it fires, so a batch costs what it brings and what it drops.
* A view up to :data:`REWRITE_BELOW_BYTES` when its query starts is rewritten whole by each batch, in one
  Spark job and one commit (:func:`~deltaflow.sinks.txn_append.replace_once`: the check that the batch is
  new read from the table's checksum, not from a replay of its log). Without a lateness the query runs in
  Spark's *complete* mode and hands over every group; with one, in *update* mode, and the groups it
  changed replace theirs among the view's current rows. A larger view (or one recording a change feed,
  which then holds the changed groups only) gets the changed groups MERGEd in by their keys. Where the
  checksum cannot list the table's files, the batch goes through Delta's writer or MERGE instead.

Exactly once: the state is versioned with the checkpoint, so a batch that runs again after a crash starts
from the state before it and yields the same totals; the view's write carries the view's ``txnAppId`` and
``txnVersion = batch id``, so if the first attempt had committed it, Delta skips it. Batch 0 of a
checkpoint generation (its state empty, the input's whole snapshot read) overwrites the view.

Examples:
    >>> refresh = IncrementalRefresh(view, plan)  # doctest: +SKIP
    >>> query = (refresh.rows(stream).writeStream.outputMode(refresh.output_mode)  # doctest: +SKIP
    ...          .foreachBatch(refresh.apply).start())

"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError
from deltaflow.runtime.jvm_names import java_class
from deltaflow.sinks.conflicts import retry_conflicts
from deltaflow.sinks.foreach_batch import read_if_replayed
from deltaflow.sinks.late_rows import late_windows
from deltaflow.sinks.read_rows import ROWS_METRIC
from deltaflow.sinks.txn_append import replace_once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from deltaflow.define.graph import WindowRefresh
    from deltaflow.sinks.incremental_plan import IncrementalPlan, Measure
    from deltaflow.sinks.materialize import MaterializedView

#: A view this small when its query starts is rewritten whole by each batch (every group from the state, or
#: the changed groups among the view's rows); a larger one gets the changed groups MERGEd in.
REWRITE_BELOW_BYTES = 16 * 2**20
_PAIR = "_df_pair"  # on a deduplicated pair: which distinct measure it counts (null on input rows)
_NEWER, _LATEST = "_df_newer", "_df_latest"  # folding a batch's groups into the view's rows


@dataclass
class IncrementalRefresh:
    """Keeps a view's aggregates in the state store and writes each batch's totals into the view.

    Args:
        view: The view (its flow, table and transaction id).
        plan: Its keys and measures.
        whole: The query hands over every group (complete mode) rather than the groups a batch changed
            (update mode); set by :meth:`choose_mode` when the query starts.
        rewrite: Every batch rewrites the view in one commit of its own (rather than through Delta's writer
            or MERGE); set by :meth:`choose_mode`.

    """

    view: MaterializedView
    plan: IncrementalPlan
    whole: bool = True
    rewrite: bool = True

    @property
    def output_mode(self) -> str:
        """The driver query's output mode: ``complete`` (whole view) or ``update`` (changed groups)."""
        return "complete" if self.whole else "update"

    def choose_mode(self, view_bytes: int) -> None:
        """Rewrite the view whole while it is small (``view_bytes``: its table's size as the query starts).

        A view whose state keeps recent windows only is not handed over whole (complete mode keeps every
        group in the state), but its changed groups are folded into its rows.
        """
        small = view_bytes <= REWRITE_BELOW_BYTES
        self.whole = small and self.plan.lateness is None
        self.rewrite = small and not self.view.resolver.records_changes(self.view.name)

    def rows(self, stream: DataFrame) -> DataFrame:
        """The driver query: the view's aggregation over ``stream`` (its input), kept in Spark's state."""
        from pyspark.sql import functions as F

        if self.plan.lateness is not None:  # the state keeps a window till the watermark passes its end
            stream = stream.withWatermark(self._refresh.column, self.plan.lateness)
        if self.plan.distinct:  # each distinct count's branch reads the batch once more: count it once
            stream = stream.observe(ROWS_METRIC, F.count(F.lit(1)).alias("rows"))
        view = self.view.resolver.rebuild(self.view.flow, stand_ins={self.plan.input: stream})
        grouped = _grouped_rows(view)
        keys = [_q(k) for k in self.plan.keys]
        columns = sorted({m.column for m in self.plan.measures if m.column and m.kind != "count_distinct"})
        parts = [grouped.select(*keys, *[_q(c) for c in columns], F.lit(None).cast("string").alias(_PAIR))]
        for i, measure in enumerate(self.plan.distinct):
            value = F.col(_q(measure.column or ""))
            pairs = grouped.where(value.isNotNull()).select(*keys, value.alias(_value(i)))
            first = (pairs.dropDuplicates([*self.plan.keys, _value(i)]) if self.plan.lateness is None
                     else self._first_seen(pairs))
            parts.append(first.withColumn(_PAIR, F.lit(measure.output)))
        rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
        return rows.groupBy(*keys).agg(*[_total(m) for m in self.plan.measures])

    def apply(self, batch: DataFrame, batch_id: int, schema: StructType, replayed: bool = False) -> None:
        """Write one batch's group totals into the view (``schema``), once, whatever crashes between.

        ``replayed``: the batch was planned before a restart and may have been written already; it is
        read first (:func:`~deltaflow.sinks.foreach_batch.read_if_replayed`).
        """
        from pyspark.sql import functions as F

        with read_if_replayed(batch, replayed) as read:
            totals = read.select(*[F.col(_q(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])
            if batch_id == 0:  # a new checkpoint: its state started empty, and so does the view
                self.view.layout.fs.write_text(self.view.checkpoint.view_plan, self.plan.signature)
            if not (self.rewrite and self._replace(totals, batch_id)):
                if self.whole or batch_id == 0:
                    self.view.write(totals, batch_id, mode="incremental")
                else:
                    self.view.merge(totals, self.plan.keys, batch_id)
        if self.plan.lateness is not None:
            refresh = self._refresh
            late = late_windows(batch.sparkSession, self.view.layout, self.view.checkpoint, batch_id,
                                self.plan.input, refresh.column, refresh.duration)
            if late:
                self.view.recompute_windows(late, batch_id, batch.sparkSession, late=True)

    def _replace(self, totals: DataFrame, batch_id: int) -> bool:
        """Rewrite the view with ``totals`` (every group, or the changed ones among the view's rows), once.

        False when the table's checksum cannot say what the view holds, or the view's columns changed
        (a new checkpoint's batch 0): nothing written.
        """
        session = totals.sparkSession

        def rows(files: list[str]) -> DataFrame:
            whole = self.whole or batch_id == 0 or not files  # batch 0: the state, and so the view, anew
            return totals if whole else _folded(totals, files, self.plan.keys)

        def replace() -> bool | None:
            return replace_once(session, self.view.path, rows, app_id=self.view.app_id(), batch_id=batch_id)

        if retry_conflicts(replace, f"materialized view '{self.view.name}'") is None:
            return False
        self.view.note_refresh(session, batch_id, "incremental")
        return True

    def _first_seen(self, pairs: DataFrame) -> DataFrame:
        """The rows of ``pairs`` (the view's keys, then a value) whose pair no earlier row had: ``FirstSeen``.

        Raises:
            ConfigError: The session keeps state in another store than RocksDB, which ``transformWithState``
                needs.

        """
        from pyspark.sql import DataFrame

        from deltaflow.sinks.state_store import PROVIDER, ROCKSDB

        session = pairs.sparkSession
        provider = session.conf.get(PROVIDER, None)
        if provider not in (None, ROCKSDB):
            raise ConfigError(f"view '{self.view.name}' has a lateness, so its state is in RocksDB; the "
                              f"session's {PROVIDER} names {provider}",
                              location=str(self.view.flow.location),
                              hint="drop that setting from the spec's configuration, or the view's lateness")
        window = self._refresh.output.split(".")[0]
        first_seen = java_class(session, "io.deltaflow.state.FirstSeen")
        return DataFrame(first_seen.apply(pairs._jdf, window), session)

    @property
    def _refresh(self) -> WindowRefresh:
        refresh = self.view.dataset.refresh
        assert refresh is not None  # a plan is made for views by window only
        return refresh


def _grouped_rows(view: DataFrame) -> DataFrame:
    """The rows ``view``'s final aggregation groups (its window column computed), as a DataFrame."""
    from pyspark.sql import DataFrame

    session = view.sparkSession
    child = view._jdf.queryExecution().analyzed().child()
    dataset = java_class(session, "org.apache.spark.sql.classic.Dataset")
    return DataFrame(dataset.ofRows(session._jsparkSession, child), session)


def _folded(totals: DataFrame, files: list[str], keys: tuple[str, ...]) -> DataFrame:
    """The view's rows in ``files`` with the groups of ``totals`` (whole rows) in place of theirs, one file.

    One pass, so the batch behind ``totals`` is computed once: both sides grouped by the keys (a null key
    is a group too), each group keeping its newer row.
    """
    from pyspark.sql import functions as F

    names = [field.name for field in totals.schema.fields]
    measures = [name for name in names if name not in keys]
    stored = totals.sparkSession.read.schema(totals.schema).parquet(*files)
    both = totals.withColumn(_NEWER, F.lit(1)).unionByName(stored.withColumn(_NEWER, F.lit(0)))
    latest = F.max(F.struct(F.col(_NEWER), *[F.col(_q(m)) for m in measures])).alias(_LATEST)
    folded = both.groupBy(*[_q(k) for k in keys]).agg(latest)
    return folded.select(*[F.col(_q(n)) if n in keys else F.col(_LATEST).getField(n).alias(n)
                           for n in names]).coalesce(1)


def _value(index: int) -> str:
    return f"_df_value_{index}"


def _total(measure: Measure) -> Column:
    """``measure`` over a group's rows: the input rows for most, the never-seen pairs for distinct counts."""
    from pyspark.sql import functions as F

    row = F.col(_PAIR).isNull()
    if measure.kind == "count_distinct":
        return F.count(F.when(F.col(_PAIR) == measure.output, F.lit(1))).alias(measure.output)
    if measure.column is None:
        return F.count(F.when(row, F.lit(1))).alias(measure.output)
    column = F.when(row, F.col(_q(measure.column)))
    function = {"count": F.count, "sum": F.sum, "min": F.min, "max": F.max}[measure.kind]
    return function(column).alias(measure.output)


def _q(column: str) -> str:
    return f"`{column.replace('`', '``')}`"
