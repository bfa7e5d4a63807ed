"""Incremental materialized views: each batch of new input rows is aggregated alone and merged in.

For a view with an :class:`~deltaflow.sinks.incremental_plan.IncrementalPlan`, a batch costs what the
batch holds, not what its windows hold. The view's query runs over the batch (its input read is replaced
by the batch's rows); the rows it groups are aggregated per group into partial values, which a Delta
MERGE adds to the stored ones: counts and sums add, minimums and maximums take the smaller and larger.

An exact distinct count cannot be added up from partial counts. Each distinct measure keeps a table of
the (group, value) pairs counted so far, with the batch that first saw each pair: a batch inserts the
pairs not seen before (an insert-only MERGE), and the pairs it inserted are what it adds to the count.

Every write of batch ``n`` carries the view's ``txnAppId`` and ``txnVersion = n``, so a batch replayed
after a crash skips what it already committed; the pairs it inserted are found by their batch number, so
a crash between the two MERGEs still adds each pair exactly once. Batch 0 of a checkpoint generation
starts the state over: the view and the value tables are overwritten with the batch's own aggregate.
Both MERGEs are restricted to the windows the batch touches, which lets Delta skip the other files.

Example:
    >>> refresh = IncrementalRefresh(view, plan)  # doctest: +SKIP
    >>> refresh.apply(batch_df, batch_id=7)  # the view's driver query calls this for every batch

"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from deltaflow.sinks.conflicts import retry_conflicts
from deltaflow.sinks.idempotent import idempotent_writes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from deltaflow.sinks.incremental_plan import IncrementalPlan, Measure
    from deltaflow.sinks.materialize import MaterializedView

_VALUE, _BATCH = "_df_value", "_df_batch"


@dataclass
class IncrementalRefresh:
    """Merges each batch of a view's input into the view.

    Args:
        view: The view (its flow, table, checkpoint and transaction id).
        plan: Its keys and measures.

    """

    view: MaterializedView
    plan: IncrementalPlan

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        """Fold ``batch`` (new rows of the plan's input) into the view, once, whatever crashes between."""
        session = batch.sparkSession
        view = self.view.resolver.rebuild(self.view.flow, spark=session, stand_ins={self.plan.input: batch})
        with idempotent_writes(session, self.view.app_id(), batch_id):
            if batch_id == 0:
                self._start(session, view, batch_id)
            else:
                self._merge(session, view, batch_id)
        self.view.refreshes += 1

    def _start(self, session: SparkSession, view: DataFrame, batch_id: int) -> None:
        """Batch 0: the view and the value tables become the batch's own aggregate."""
        layout, checkpoint = self.view.layout, self.view.checkpoint
        layout.fs.write_text(checkpoint.view_plan, self.plan.signature)
        grouped = _grouped_rows(view)
        for measure in self.plan.distinct:
            values = _values(grouped, self.plan.keys, measure).withColumn(_BATCH, _lit(batch_id))
            path = checkpoint.distinct_values(measure.output)
            _overwrite(values, path, f"distinct values of '{self.view.name}'")
        _overwrite(view, self.view.path, f"materialized view '{self.view.name}'")

    def _merge(self, session: SparkSession, view: DataFrame, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        plan, keys = self.plan, self.plan.keys
        grouped = _grouped_rows(view)
        sums = [_partial(m) for m in plan.measures if m.kind != "count_distinct"]
        partial = cached = (grouped.groupBy(*keys).agg(*sums) if sums
                            else grouped.select(*keys).distinct()).persist()
        try:
            output = self.view.dataset.refresh.output  # type: ignore[union-attr]  # a plan has a window
            starts = [int(r[0]) for r in partial.select(F.unix_micros(F.col(output))).distinct().collect()]
            if not starts:
                return

            def touched(prefix: str = "") -> Column:
                return F.col(prefix + output).isin([F.timestamp_micros(F.lit(s)) for s in starts])

            for measure in plan.distinct:
                path = self.view.checkpoint.distinct_values(measure.output)
                fresh = _values(grouped, keys, measure).alias("s")
                merge = (DeltaTable.forPath(session, path).alias("t")
                         .merge(fresh, _same((*keys, _VALUE)) & touched("t."))
                         .whenNotMatchedInsert(values={**{_q(k): _c("s", k) for k in (*keys, _VALUE)},
                                                       _BATCH: _lit(batch_id)}))
                retry_conflicts(merge.execute, f"distinct values of '{self.view.name}'")
                added = (session.read.format("delta").load(path)
                         .where((F.col(_BATCH) == batch_id) & touched())
                         .groupBy(*keys).agg(F.count(F.lit(1)).alias(measure.output)))
                partial = _with_counts(partial, added, keys, measure.output)
            merge = (DeltaTable.forPath(session, self.view.path).alias("t")
                     .merge(partial.alias("s"), _same(keys) & touched("t."))
                     .whenMatchedUpdate(set={_q(m.output): _merged(m) for m in plan.measures})
                     .whenNotMatchedInsert(values={_q(c): _c("s", c) for c in partial.columns}))
            retry_conflicts(merge.execute, f"materialized view '{self.view.name}'")
        finally:
            cached.unpersist()


def _overwrite(df: DataFrame, path: str, what: str) -> None:
    writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    retry_conflicts(lambda: writer.save(path), what)


def _grouped_rows(view: DataFrame) -> DataFrame:
    """The rows ``view``'s final aggregation groups (its window column computed), as a DataFrame."""
    from pyspark.sql import DataFrame

    session = view.sparkSession
    child = view._jdf.queryExecution().analyzed().child()
    jvm = session._jvm
    assert jvm is not None
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(session._jsparkSession, child), session)


def _values(grouped: DataFrame, keys: tuple[str, ...], measure: Measure) -> DataFrame:
    """The distinct (group, value) pairs of ``measure`` in ``grouped`` (nulls are not counted)."""
    from pyspark.sql import functions as F

    column = F.col(_q(measure.column or ""))
    return grouped.where(column.isNotNull()).select(*[_q(k) for k in keys], column.alias(_VALUE)).distinct()


def _partial(measure: Measure) -> Column:
    """``measure`` aggregated over one batch's rows of a group."""
    from pyspark.sql import functions as F

    if measure.column is None:
        return F.count(F.lit(1)).alias(measure.output)
    function = {"count": F.count, "sum": F.sum, "min": F.min, "max": F.max}[measure.kind]
    return function(F.col(_q(measure.column))).alias(measure.output)


def _with_counts(partial: DataFrame, added: DataFrame, keys: tuple[str, ...], output: str) -> DataFrame:
    """``partial`` with column ``output`` from ``added`` per group (0 where it added nothing)."""
    from pyspark.sql import functions as F

    joined = partial.alias("p").join(added.alias("a"), _same(keys, "p", "a"), "left")
    return joined.select("p.*", F.coalesce(_c("a", output), F.lit(0).cast("long")).alias(output))


def _merged(measure: Measure) -> Column:
    """The stored value of ``measure`` after a batch's partial value ``s`` meets the stored ``t``."""
    from pyspark.sql import functions as F

    stored, new = _c("t", measure.output), _c("s", measure.output)
    if measure.kind in ("count", "count_distinct"):
        return stored + new
    if measure.kind == "sum":
        return F.coalesce(stored + new, stored, new)  # a sum of nulls only is null
    return F.least(stored, new) if measure.kind == "min" else F.greatest(stored, new)  # both skip nulls


def _same(columns: tuple[str, ...], left: str = "t", right: str = "s") -> Column:
    return reduce(lambda a, b: a & b, [_c(left, c).eqNullSafe(_c(right, c)) for c in columns])


def _c(alias: str, column: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{alias}.{_q(column)}")


def _q(column: str) -> str:
    return f"`{column.replace('`', '``')}`"


def _lit(value: int) -> Column:
    from pyspark.sql import functions as F

    return F.lit(value).cast("long")
