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
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from deltaflow.errors import GraphError
from deltaflow.graph import Dataset, DatasetKind, Flow, PipelineGraph, SourceLocation, WindowRefresh

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

QueryFunction = Callable[[], "DataFrame"]
F = TypeVar("F", bound=QueryFunction)

_REGISTRY: ContextVar[PipelineGraph | None] = ContextVar("deltaflow_registry", default=None)


@contextmanager
def registering(graph: PipelineGraph) -> Iterator[PipelineGraph]:
    """Collect the definitions made inside the block into ``graph``."""
    token = _REGISTRY.set(graph)
    try:
        yield graph
    finally:
        _REGISTRY.reset(token)


def _registry(what: str) -> PipelineGraph:
    graph = _REGISTRY.get()
    if graph is None:
        raise GraphError(
            f"{what} can only be used in a definition file loaded by deltaflow",
            hint="list the file under 'libraries' in deltaflow.yml and run 'deltaflow run'",
        )
    return graph


def _relative(file: str, line: int) -> SourceLocation:
    with suppress(ValueError):
        file = str(Path(file).resolve().relative_to(Path.cwd()))
    return SourceLocation(file, line)


def _location(func: Callable[..., Any]) -> SourceLocation:
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        code = getattr(func, "__code__", None)
        file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
    return _relative(file, line)


def _caller_location() -> SourceLocation:
    frame = inspect.stack()[2]
    return _relative(frame.filename, frame.lineno)


def _decorator(what: str, func: F | None, register: Callable[[F], None]) -> F | Callable[[F], F]:
    """Make ``register`` usable bare (``@dp.x``) and with arguments (``@dp.x(...)``)."""

    def decorate(f: F) -> F:
        if not callable(f):
            raise GraphError(f"{what} expects a function", hint=f"use {what} or {what}(name=...)")
        register(f)
        return f

    return decorate(func) if func is not None else decorate


def _register_dataset(
    what: str, kind: DatasetKind, f: Callable[[], DataFrame], name: str | None, comment: str | None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
    refresh: WindowRefresh | None = None,
) -> None:
    graph = _registry(what)
    where = _location(f)
    dataset_name = name or f.__name__
    graph.add_dataset(Dataset(
        name=dataset_name, kind=kind, location=where, comment=comment,
        partition_cols=tuple(partition_cols or ()), table_properties=dict(table_properties or {}),
        refresh=refresh,
    ))
    graph.add_flow(Flow(name=dataset_name, target=dataset_name, func=f, location=where))


@overload
def table(func: F) -> F: ...


@overload
def table(
    *, name: str | None = None, comment: str | None = None, partition_cols: list[str] | None = None,
    table_properties: Mapping[str, str] | None = None,
) -> Callable[[F], F]: ...


def table(
    func: F | None = None, *, name: str | None = None, comment: str | None = None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
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

    Example:
        >>> import deltaflow as dp
        >>> @dp.table(comment="Raw clicks")  # doctest: +SKIP
        ... def bronze_clicks():
        ...     return dp.read_kafka("clicks")

    """
    return _decorator("@dp.table", func, lambda f: _register_dataset(
        "@dp.table", "table", f, name, comment, partition_cols, table_properties))


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

    Example:
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

    Example:
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

    Example:
        >>> dp.create_streaming_table("all_clicks")  # doctest: +SKIP
        >>> @dp.append_flow(target="all_clicks")  # doctest: +SKIP
        ... def web_clicks():
        ...     return dp.read_kafka("web_clicks")

    """

    def register(f: F) -> None:
        graph = _registry("@dp.append_flow")
        if not target:
            raise GraphError("@dp.append_flow needs target='<streaming table>'", location=str(_location(f)))
        graph.add_flow(Flow(name=name or f.__name__, target=target, func=f, location=_location(f)))

    return _decorator("@dp.append_flow", func, register)


def create_streaming_table(
    name: str, *, comment: str | None = None, schema: StructType | str | None = None,
    partition_cols: list[str] | None = None, table_properties: Mapping[str, str] | None = None,
) -> None:
    """Declare a streaming table that ``@dp.append_flow`` flows write into.

    Args:
        name: Table name.
        comment: A description, kept with the table.
        schema: The table's schema (a ``StructType`` or DDL string); default: the first flow's.
        partition_cols: Columns to partition the Delta table by.
        table_properties: Delta table properties.

    Example:
        >>> dp.create_streaming_table("all_clicks", partition_cols=["event_date"])  # doctest: +SKIP

    """
    graph = _registry("dp.create_streaming_table")
    graph.add_dataset(Dataset(
        name=name, kind="table", location=_caller_location(), comment=comment, schema=schema,
        partition_cols=tuple(partition_cols or ()), table_properties=dict(table_properties or {}),
    ))


def by_window(column: str, duration: str, *, output: str = "window.start") -> WindowRefresh:
    """Refresh a materialized view grouped by ``F.window(column, duration)`` one window at a time.

    Args:
        column: The event-time column of the view's input tables.
        duration: The tumbling window's length, as given to ``F.window`` (``"1 hour"``).
        output: The view's column holding each row's window start.

    Example:
        >>> by_window("event_timestamp", "1 hour")
        WindowRefresh(column='event_timestamp', duration='1 hour', output='window.start')

    """
    return WindowRefresh(column, duration, output)
