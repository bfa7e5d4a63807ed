"""Decorators and functions that register datasets and flows. Nothing here touches Spark.

The names mirror Apache Spark Declarative Pipelines (``pyspark.pipelines``)::

    import deltaflow as dp

    @dp.table(comment="Raw clickstream, as received")
    def bronze_clicks():
        return dp.read_kafka("clicks")

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
from deltaflow.graph import Dataset, Flow, PipelineGraph, SourceLocation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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


def _location(func: Callable[..., Any]) -> SourceLocation:
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        code = getattr(func, "__code__", None)
        file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
    with suppress(ValueError):
        file = str(Path(file).resolve().relative_to(Path.cwd()))
    return SourceLocation(file, line)


@overload
def table(func: F) -> F: ...


@overload
def table(
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    table_properties: Mapping[str, str] | None = None,
) -> Callable[[F], F]: ...


def table(
    func: F | None = None,
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    table_properties: Mapping[str, str] | None = None,
) -> F | Callable[[F], F]:
    """Declare a streaming table fed by the streaming DataFrame that ``func`` returns.

    The table is a Delta table at ``<storage>/tables/<name>``; its flow (named like the table) appends each
    micro-batch exactly once, with a checkpoint deltaflow manages.

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

    def register(f: F) -> F:
        graph = _registry("@dp.table")
        where = _location(f)
        dataset_name = name or f.__name__
        graph.add_dataset(Dataset(
            name=dataset_name, kind="table", location=where, comment=comment,
            partition_cols=tuple(partition_cols or ()), table_properties=dict(table_properties or {}),
        ))
        graph.add_flow(Flow(name=dataset_name, target=dataset_name, func=f, location=where))
        return f

    if func is not None:
        if not callable(func):
            raise GraphError("@dp.table expects a function", hint="use @dp.table or @dp.table(name=...)")
        return register(func)
    return register
