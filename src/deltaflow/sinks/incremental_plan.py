"""Which materialized views can be maintained batch by batch, and how: read off Spark's analysed plan.

A view refreshed by window (:func:`deltaflow.by_window`) whose query is one ``groupBy(...).agg(...)`` over
one append-only table, grouping by columns and aggregating with ``count``, ``sum``, ``min``, ``max`` or
``count_distinct`` of columns, is *incremental*: its aggregates are kept in Spark's state store, each batch
of new input rows folded in, and the changed totals written (:mod:`deltaflow.sinks.incremental`). Anything
else (``avg``, an expression as a grouping key, a join, a filter after the aggregation, an input updated
in place) keeps the window recompute, and :func:`plan_view` says why. ``deltaflow graph`` shows which
mode each view runs in.

Examples:
    >>> plan = plan_view(resolver, "gold_hourly_product_metrics")  # doctest: +SKIP
    >>> plan.describe()  # doctest: +SKIP
    "incremental in Spark's state: count, count_distinct(user_id), sum(revenue) by window, product_id"

"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from deltaflow.resolve.resolved import ResolvedGraph

MeasureKind = Literal["count", "sum", "min", "max", "count_distinct"]
#: What the driver query keeps in its checkpoint's state: the aggregation's groups, with the distinct pairs'
#: deduplication (Spark's) or, for a view with a lateness, each group's values until its window closes
#: (``FirstSeen``). A checkpoint built for another layout (the distinct pairs alone, before; Spark's
#: deduplication for a view with a lateness, before 2026-11-28) is rebuilt by a full refresh of the view.
STATE_LAYOUT = "aggregate-v2"
FIRST_SEEN_LAYOUT = "aggregate-first-seen-v1"
_FUNCTIONS: dict[str, MeasureKind] = {"Count": "count", "Sum": "sum", "Min": "min", "Max": "max"}


@dataclass(frozen=True)
class Measure:
    """One aggregate column of the view.

    Attributes:
        output: Its name in the view.
        kind: How a batch's partial value merges into the stored one.
        column: The column it aggregates (None: ``count(*)``).

    """

    output: str
    kind: MeasureKind
    column: str | None

    def __str__(self) -> str:
        return self.kind if self.column is None else f"{self.kind}({self.column})"


@dataclass(frozen=True)
class IncrementalPlan:
    """How a view is kept up to date batch by batch.

    Attributes:
        input: The one table it aggregates.
        keys: Its grouping columns (the window among them).
        measures: Its aggregate columns.
        lateness: How long after its end a window's totals stay in the state (None: for good); see
            :func:`deltaflow.by_window`.

    """

    input: str
    keys: tuple[str, ...]
    measures: tuple[Measure, ...]
    lateness: str | None = None

    @property
    def distinct(self) -> tuple[Measure, ...]:
        """The exact distinct counts: each keeps a table of the values seen per group."""
        return tuple(m for m in self.measures if m.kind == "count_distinct")

    @property
    def signature(self) -> str:
        """The plan and the layout of its state as JSON: the state kept for one is useless to another."""
        plan = {key: value for key, value in asdict(self).items() if key != "lateness" or value is not None}
        state = STATE_LAYOUT if self.lateness is None else FIRST_SEEN_LAYOUT
        return json.dumps({**plan, "state": state}, sort_keys=True)

    def describe(self) -> str:
        """One line for ``deltaflow graph``."""
        kept = "" if self.lateness is None else f", windows kept {self.lateness} after they end"
        if self.lateness is not None and self.distinct:
            kept += " (a timer per window drops its distinct values)"
        return (f"incremental in Spark's state: {', '.join(map(str, self.measures))} by "
                f"{', '.join(self.keys)}{kept}")


def plan_view(resolver: ResolvedGraph, name: str) -> IncrementalPlan | str:
    """The incremental plan of materialized view ``name``, or why its windows are recomputed instead."""
    refresh = resolver.graph.datasets[name].refresh
    if refresh is None:
        return "not refreshed by window"
    inputs = resolver.stored_inputs(name)
    if len(inputs) != 1:
        return f"it reads {len(inputs)} tables"
    (table, mode), = inputs.items()
    if mode != "batch" or resolver.flows[name].changes:
        return f"it reads the change feed of '{table}'"
    if resolver.flows[name].pinned:
        return f"it reads '{table}' as of a version"
    if resolver.rewrites(table):
        return f"'{table}' is updated in place (auto CDC)"
    if refresh.column not in resolver.schemas[table].names:
        return f"'{table}' has no column '{refresh.column}'"
    shape = aggregate_shape(resolver.flows[name].df)
    if isinstance(shape, str):
        return shape
    keys, measures = shape
    if refresh.output.split(".")[0] not in keys:
        return f"it is not grouped by the column holding '{refresh.output}'"
    return IncrementalPlan(table, keys, measures, refresh.lateness)


def aggregate_shape(df: DataFrame) -> tuple[tuple[str, ...], tuple[Measure, ...]] | str:
    """The grouping columns and measures of ``df``'s final aggregation, or why it has no such shape."""
    plan = df._jdf.queryExecution().analyzed()
    if _kind(plan) != "Aggregate":
        return "its query does not end in groupBy(...).agg(...)"
    if plan.collectLeaves().size() != 1:
        return "it reads more than one relation"
    names = [a.name().lower() for a in _seq(plan.child().output())]
    if len(names) != len(set(names)):
        return "the rows it groups have two columns of one name"
    groups: dict[int, str] = {}
    for expression in _seq(plan.groupingExpressions()):
        if _kind(expression) != "AttributeReference":
            return f"it groups by an expression ({expression.sql()}), not a column"
        groups[expression.exprId().id()] = expression.name()
    keys: list[str] = []
    measures: list[Measure] = []
    for expression in _seq(plan.aggregateExpressions()):
        if _kind(expression) == "AttributeReference" and expression.exprId().id() in groups:
            keys.append(expression.name())
            continue
        measure = _measure(expression)
        if isinstance(measure, str):
            return measure
        measures.append(measure)
    if sorted(keys) != sorted(groups.values()):
        return "not every grouping column is in its output"
    return tuple(keys), tuple(measures)


def _measure(expression: Any) -> Measure | str:
    """``expression`` (one output of an Aggregate) as a mergeable measure, or why it is not one."""
    if _kind(expression) != "Alias" or _kind(expression.child()) != "AggregateExpression":
        return f"its output {expression.sql()} is not an aggregate of a column"
    aggregate = expression.child()
    function = aggregate.aggregateFunction()
    children = list(_seq(function.children()))
    kind = _FUNCTIONS.get(_kind(function))
    tried = str(function.prettyName()).startswith("try_")  # try_sum: null on overflow, not a merged error
    if kind is None or tried or aggregate.filter().isDefined() or len(children) != 1:
        return f"{function.sql()} cannot be merged batch by batch"
    child, distinct = children[0], bool(aggregate.isDistinct())
    if kind == "count" and _kind(child) == "Literal" and child.value() is not None and not distinct:
        return Measure(expression.name(), "count", None)
    if _kind(child) != "AttributeReference" or (distinct and kind == "sum"):
        return f"{function.sql()} cannot be merged batch by batch"
    if kind == "count" and distinct:
        kind = "count_distinct"
    return Measure(expression.name(), kind, child.name())


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]
