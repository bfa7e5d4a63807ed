"""Incremental materialized views: each batch of new input rows is aggregated alone and folded in.

For a view with an :class:`~deltaflow.sinks.incremental_plan.IncrementalPlan`, a batch costs what the
batch holds, not what its windows hold. The view's driver query streams the rows the view's aggregation
groups (its query run over the input as a stream, up to the ``groupBy``). Each batch is aggregated per
group into partial values, which are folded into the view's stored rows of the windows the batch touches
(counts and sums add, minimums and maximums take the smaller and the larger); those windows are replaced
in one commit (``replaceWhere``). The view holds one row per group, so what is read and rewritten is the
touched windows' groups, never their input rows.

An exact distinct count cannot be added up from partial counts. For each one, the driver query also
streams the (group, value) pairs through Spark's ``dropDuplicates``, whose state (in the checkpoint) lets
through only pairs never seen before; the batch adds their number per group to the count.

Exactly once: the deduplication state is versioned with the checkpoint, so a batch that runs again after
a crash starts from the state before it and lets through the same new pairs; the view's write carries the
view's ``txnAppId`` and ``txnVersion = batch id``, so if the first attempt had committed it, Delta skips
it. Batch 0 of a checkpoint generation (which reads the input's whole snapshot) overwrites the view.

Example:
    >>> refresh = IncrementalRefresh(view, plan)  # doctest: +SKIP
    >>> query = refresh.rows(stream).writeStream.foreachBatch(refresh.apply).start()

"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from deltaflow.sinks.incremental_plan import IncrementalPlan, Measure
    from deltaflow.sinks.materialize import MaterializedView

#: A view this small is rewritten whole by each batch (its stored rows with the batch's partial values
#: folded in): one write, where replaceWhere reads the view's files for the rows it keeps.
REWRITE_BELOW_BYTES = 16 * 2**20
_PAIR = "_df_pair"  # on a deduplicated pair: which distinct measure it counts (null on input rows)


@dataclass
class IncrementalRefresh:
    """Folds each batch of a view's input into the view.

    Args:
        view: The view (its flow, table and transaction id).
        plan: Its keys and measures.

    """

    view: MaterializedView
    plan: IncrementalPlan

    def rows(self, stream: DataFrame) -> DataFrame:
        """The driver query's rows: the grouped input rows, then each distinct measure's new pairs."""
        from pyspark.sql import functions as F

        view = self.view.resolver.rebuild(self.view.flow, stand_ins={self.plan.input: stream})
        grouped = _grouped_rows(view)
        keys = [_q(k) for k in self.plan.keys]
        columns = sorted({m.column for m in self.plan.measures if m.column and m.kind != "count_distinct"})
        parts = [grouped.select(*keys, *[_q(c) for c in columns], F.lit(None).cast("string").alias(_PAIR))]
        for i, measure in enumerate(self.plan.distinct):
            value = F.col(_q(measure.column or ""))
            pairs = grouped.where(value.isNotNull()).select(*keys, value.alias(_value(i)))
            parts.append(pairs.dropDuplicates([*self.plan.keys, _value(i)])
                         .withColumn(_PAIR, F.lit(measure.output)))
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        """Fold one batch of :meth:`rows` into the view, once, whatever crashes between."""
        from pyspark.sql import functions as F

        output = self.view.dataset.refresh.output  # type: ignore[union-attr]  # a plan has a window
        batch = batch.persist()  # read once: the deduplication state moves on once per batch
        partial = batch.groupBy(*[_q(k) for k in self.plan.keys]).agg(
            *[_partial(m) for m in self.plan.measures]).persist()
        try:
            starts = sorted(int(row[0]) for row in
                            partial.select(F.unix_micros(F.col(output))).distinct().collect())
            stored = batch.sparkSession.read.format("delta").load(self.view.path)
            if batch_id == 0:  # a new checkpoint: its state starts empty, and so does the view
                self.view.layout.fs.write_text(self.view.checkpoint.view_plan, self.plan.signature)
                self.view.write(_folded(stored.where(F.lit(False)), partial, self.plan), batch_id)
            elif starts and self.view.whole_is_cheaper(stored, REWRITE_BELOW_BYTES):
                self.view.write(_folded(stored, partial, self.plan), batch_id)
            elif starts:
                touched = F.col(output).isin([F.timestamp_micros(F.lit(s)) for s in starts])
                self.view.write(_folded(stored.where(touched), partial, self.plan), batch_id,
                                replace_where=window_predicate(output, starts))
        finally:
            partial.unpersist()
            batch.unpersist()


def window_predicate(output: str, starts: list[int]) -> str:
    """``replaceWhere`` for the view rows whose ``output`` is one of ``starts`` (microseconds)."""
    return f"{output} IN ({', '.join(f'timestamp_micros({start})' for start in starts)})"


def _grouped_rows(view: DataFrame) -> DataFrame:
    """The rows ``view``'s final aggregation groups (its window column computed), as a DataFrame."""
    from pyspark.sql import DataFrame

    session = view.sparkSession
    child = view._jdf.queryExecution().analyzed().child()
    jvm = session._jvm
    assert jvm is not None
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(session._jsparkSession, child), session)


def _value(index: int) -> str:
    return f"_df_value_{index}"


def _partial(measure: Measure) -> Column:
    """``measure`` over one batch's rows of a group: input rows for most, new pairs for distinct counts."""
    from pyspark.sql import functions as F

    row = F.col(_PAIR).isNull()
    if measure.kind == "count_distinct":
        return F.count(F.when(F.col(_PAIR) == measure.output, F.lit(1))).alias(measure.output)
    if measure.column is None:
        return F.count(F.when(row, F.lit(1))).alias(measure.output)
    column = F.when(row, F.col(_q(measure.column)))
    function = {"count": F.count, "sum": F.sum, "min": F.min, "max": F.max}[measure.kind]
    return function(column).alias(measure.output)


def _folded(stored: DataFrame, partial: DataFrame, plan: IncrementalPlan) -> DataFrame:
    """The stored rows of the touched windows with the batch's partial values folded in."""
    from pyspark.sql import functions as F

    same = reduce(lambda a, b: a & b, [_c("t", k).eqNullSafe(_c("s", k)) for k in plan.keys])
    joined = stored.alias("t").join(partial.alias("s"), same, "full")
    measures = {m.output: m for m in plan.measures}
    columns = []
    for name in stored.columns:  # the table's own order
        was, new = _c("t", name), _c("s", name)
        measure = measures.get(name)
        if measure is None:  # a grouping column: from whichever side has the group
            value = F.coalesce(was, new)
        elif measure.kind in ("count", "count_distinct"):
            value = F.coalesce(was, F.lit(0)) + F.coalesce(new, F.lit(0))
        elif measure.kind == "sum":
            value = F.coalesce(was + new, was, new)  # a sum of nulls only is null
        else:
            value = F.least(was, new) if measure.kind == "min" else F.greatest(was, new)  # both skip nulls
        columns.append(value.cast(stored.schema[name].dataType).alias(name))
    return joined.select(*columns)


def _c(alias: str, column: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{alias}.{_q(column)}")


def _q(column: str) -> str:
    return f"`{column.replace('`', '``')}`"
