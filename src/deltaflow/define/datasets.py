"""Decorators and functions that register datasets and flows. Nothing here touches Spark.

The names mirror Apache Spark Declarative Pipelines (``pyspark.pipelines``)::

    import deltaflow as dp

    @dp.table(comment="Raw clickstream, as received")
    def bronze_clicks():
        return dp.read_kafka("clicks")

    @dp.materialized_view(refresh=dp.by_window("event_timestamp", "1 hour"))
    def gold_hourly():
        return spark.read.table("silver_clicks").groupBy(F.window("event_timestamp", "1 hour")).count()

Decorators work bare (``@dp.table``) and with arguments (``@dp.table(name=...)``) and only register the
function into the registry that deltaflow activates while it loads a pipeline's definition files.

The registry itself (and :func:`registering`, which activates it) is in :mod:`deltaflow.define.registry`;
``create_auto_cdc_flow`` is in :mod:`deltaflow.define.cdc`. Both are importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from deltaflow.define.cdc import create_auto_cdc_flow
from deltaflow.define.graph import BatchHandler, Dataset, DatasetKind, Flow, WindowRefresh
from deltaflow.define.registry import active_graph, caller_location, registering, source_location
from deltaflow.errors import ConfigError, GraphError
from deltaflow.spec.durations import parse_duration

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "append_flow",
    "by_window",
    "create_auto_cdc_flow",
    "create_streaming_table",
    "foreach_batch_sink",
    "materialized_view",
    "registering",
    "table",
    "temporary_view",
]

QueryFunction = Callable[[], "DataFrame"]
F = TypeVar("F", bound=QueryFunction)
G = TypeVar("G", bound=Callable[..., Any])

def _decorator(what: str, func: G | None, register: Callable[[G], None]) -> G | Callable[[G], G]:
    """Make ``register`` usable bare (``@dp.x``) and with arguments (``@dp.x(...)``)."""

    def decorate(f: G) -> G:
        if not callable(f):
            raise GraphError(f"{what} expects a function", hint=f"use {what} or {what}(name=...)")
        register(f)
        return f

    return decorate(func) if func is not None else decorate


def _register_dataset(
    what: str, kind: DatasetKind, f: Callable[[], DataFrame], name: str | None, comment: str | None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
    refresh: WindowRefresh | None = None, merge_schema: bool = False,
) -> None:
    graph = active_graph(what)
    where = source_location(f)
    dataset_name = name or f.__name__
    graph.add_dataset(Dataset(
        name=dataset_name, kind=kind, location=where, comment=comment,
        partition_cols=tuple(partition_cols or ()), table_properties=dict(table_properties or {}),
        refresh=refresh, merge_schema=merge_schema,
    ))
    graph.add_flow(Flow(name=dataset_name, target=dataset_name, func=f, location=where))


@overload
def table(func: F) -> F: ...


@overload
def table(
    *, name: str | None = None, comment: str | None = None, partition_cols: list[str] | None = None,
    table_properties: Mapping[str, str] | None = None, merge_schema: bool = False,
) -> Callable[[F], F]: ...


def table(
    func: F | None = None, *, name: str | None = None, comment: str | None = None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
    merge_schema: bool = False,
) -> F | Callable[[F], F]:
    """Declare a streaming table fed by the streaming DataFrame that ``func`` returns.

    The table is a Delta table at ``<storage>/tables/<name>``; its flow (named like the table) appends each
    micro-batch exactly once, with a checkpoint deltaflow manages. A function returning a batch DataFrame
    makes the table a materialized view instead.

    Args:
        func: The query function (when used bare as ``@dp.table``).
        name: Table name; defaults to the function's name.
        comment: A description, kept with the table.
        partition_cols: Columns to partition the Delta table by.
        table_properties: Delta table properties (``delta.enableChangeDataFeed`` ...).
        merge_schema: Take new columns of the query into the table (Delta's ``mergeSchema``); without it
            a new column stops the flow with an error naming it.

    Examples:
        >>> import deltaflow as dp
        >>> @dp.table(comment="Raw clicks")  # doctest: +SKIP
        ... def bronze_clicks():
        ...     return dp.read_kafka("clicks")

    """
    return _decorator("@dp.table", func, lambda f: _register_dataset(
        "@dp.table", "table", f, name, comment, partition_cols, table_properties, merge_schema=merge_schema))


@overload
def materialized_view(func: F) -> F: ...


@overload
def materialized_view(
    *, name: str | None = None, comment: str | None = None, partition_cols: list[str] | None = None,
    table_properties: Mapping[str, str] | None = None, refresh: WindowRefresh | None = None,
) -> Callable[[F], F]: ...


def materialized_view(
    func: F | None = None, *, name: str | None = None, comment: str | None = None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
    refresh: WindowRefresh | None = None,
) -> F | Callable[[F], F]:
    """Declare a materialized view: a Delta table holding the result of the batch query ``func`` returns.

    The view is recomputed whenever the pipeline tables it reads receive new data (once per run when it
    reads none) and replaced in one atomic, idempotent commit, so readers never see it empty or half
    written. With ``refresh=dp.by_window(column, duration)`` only the time windows that new rows fall in
    are recomputed and replaced: aggregates stay exact (``countDistinct`` included), late rows update their
    window, and the view is fresh within one trigger.

    Args:
        func: The query function (when used bare).
        name: View name; defaults to the function's name.
        comment: A description, kept with the table.
        partition_cols: Columns to partition the Delta table by.
        table_properties: Delta table properties.
        refresh: Incremental refresh by time window (see :func:`by_window`); default: full recompute.

    Examples:
        >>> @dp.materialized_view(refresh=dp.by_window("event_timestamp", "1 hour"))  # doctest: +SKIP
        ... def gold_hourly_product_metrics():
        ...     return (spark.read.table("silver_clicks")
        ...             .groupBy(F.window("event_timestamp", "1 hour"), "product_id")
        ...             .agg(F.countDistinct("user_id").alias("unique_users")))

    """
    return _decorator("@dp.materialized_view", func, lambda f: _register_dataset(
        "@dp.materialized_view", "materialized_view", f, name, comment, partition_cols, table_properties,
        refresh))


@overload
def temporary_view(func: F) -> F: ...


@overload
def temporary_view(*, name: str | None = None, comment: str | None = None) -> Callable[[F], F]: ...


def temporary_view(
    func: F | None = None, *, name: str | None = None, comment: str | None = None,
) -> F | Callable[[F], F]:
    """Declare a temporary view: a named query other definitions read, never stored.

    Readers get the view's query inlined; a view over a streaming read is read with ``dp.read_stream``.

    Examples:
        >>> @dp.temporary_view  # doctest: +SKIP
        ... def parsed_clicks():
        ...     return spark.readStream.table("bronze_clicks").select(F.from_json("value", SCHEMA).alias("e"))

    """
    return _decorator("@dp.temporary_view", func, lambda f: _register_dataset(
        "@dp.temporary_view", "temporary_view", f, name, comment))


@overload
def append_flow(func: F) -> F: ...


@overload
def append_flow(*, target: str, name: str | None = None) -> Callable[[F], F]: ...


def append_flow(
    func: F | None = None, *, target: str | None = None, name: str | None = None,
) -> F | Callable[[F], F]:
    """Declare a flow appending the streaming DataFrame ``func`` returns to the streaming table ``target``.

    Several flows may feed one table (declared with :func:`create_streaming_table` or ``@dp.table``); each
    has its own checkpoint and restarts on its own.

    Examples:
        >>> dp.create_streaming_table("all_clicks")  # doctest: +SKIP
        >>> @dp.append_flow(target="all_clicks")  # doctest: +SKIP
        ... def web_clicks():
        ...     return dp.read_kafka("web_clicks")

    """

    def register(f: F) -> None:
        graph = active_graph("@dp.append_flow")
        where = source_location(f)
        if not target:
            raise GraphError("@dp.append_flow needs target='<streaming table>'", location=str(where))
        graph.add_flow(Flow(name=name or f.__name__, target=target, func=f, location=where))

    return _decorator("@dp.append_flow", func, register)


def create_streaming_table(
    name: str, *, comment: str | None = None, schema: StructType | str | None = None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
    merge_schema: bool = False,
) -> None:
    """Declare a streaming table that ``@dp.append_flow`` flows write into.

    Args:
        name: Table name.
        comment: A description, kept with the table.
        schema: The table's schema (a ``StructType`` or DDL string); default: the first flow's.
        partition_cols: Columns to partition the Delta table by.
        table_properties: Delta table properties.
        merge_schema: Take new columns of its flows into the table (see :func:`table`).

    Examples:
        >>> dp.create_streaming_table("all_clicks", partition_cols=["event_date"])  # doctest: +SKIP

    """
    graph = active_graph("dp.create_streaming_table")
    graph.add_dataset(Dataset(
        name=name, kind="table", location=caller_location(), comment=comment, schema=schema,
        partition_cols=tuple(partition_cols or ()), table_properties=dict(table_properties or {}),
        merge_schema=merge_schema,
    ))


def foreach_batch_sink(
    func: BatchHandler | None = None, *, name: str | None = None,
) -> BatchHandler | Callable[[BatchHandler], BatchHandler]:
    """Declare a sink: ``func(df, batch_id)`` receives each micro-batch of the flows writing into it.

    Flows write into the sink with ``@dp.append_flow(target=<sink>)``. Every Delta write ``func`` makes
    (``df.write...save``, ``DeltaTable.merge``, SQL ``MERGE``/``UPDATE``/``DELETE``) is idempotent: it
    carries the flow's checkpoint identity and the batch id, so a batch replayed after a crash writes
    nothing twice, and a batch may fan out to several tables exactly once. Write each table at most once
    per batch: Delta keeps one transaction per table and batch, so a second write to the same table in
    the same batch would be skipped (union the rows and write once).

    Args:
        func: The batch function (when used bare).
        name: The sink's name; defaults to the function's name.

    Examples:
        >>> @dp.foreach_batch_sink(name="two_locations")  # doctest: +SKIP
        ... def two_locations(df, batch_id):
        ...     df.write.format("delta").mode("append").save("/data/location1")
        ...     df.write.format("delta").mode("append").save("/data/location2")
        >>> @dp.append_flow(target="two_locations")  # doctest: +SKIP
        ... def to_both():
        ...     return spark.readStream.table("silver_clicks")

    """

    def register(f: BatchHandler) -> None:
        graph = active_graph("@dp.foreach_batch_sink")
        graph.add_dataset(
            Dataset(name=name or f.__name__, kind="sink", location=source_location(f), handler=f))

    return _decorator("@dp.foreach_batch_sink", func, register)


def by_window(column: str, duration: str, *, output: str = "window.start",
              lateness: str | None = None) -> WindowRefresh:
    """Refresh a materialized view grouped by ``F.window(column, duration)`` one window at a time.

    Args:
        column: The event-time column of the view's input tables.
        duration: The tumbling window's length, as given to ``F.window`` (``"1 hour"``).
        output: The view's column holding each row's window start.
        lateness: For a view kept in Spark's state store (``deltaflow graph`` says "incremental"): how long
            after a window ends its totals stay in the state, counted in event time from the newest row
            seen (``"10 minutes"``). It bounds the state to the recent windows; a row for a window older
            than that has its window recomputed from the input, so the view stays exact. Default: every
            window stays in the state, which grows with the windows seen.

    Examples:
        >>> by_window("event_timestamp", "1 hour", lateness="10 minutes").lateness
        '10 minutes'

    """
    if lateness is not None:
        try:
            parse_duration(lateness)
        except ConfigError as exc:  # a typo fails here, at the definition's line
            raise GraphError(f"by_window(lateness=...): {exc.message}", location=str(caller_location()),
                             hint="e.g. lateness='10 minutes'") from None
    return WindowRefresh(column, duration, output, lateness)
