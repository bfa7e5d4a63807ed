"""The pipeline a definition runs in: its SparkSession, spec and storage layout.

Definitions only register at import time; their functions are called later by the runner, inside
:func:`activate`, so that ``dp.read_kafka`` and friends know where they are.

Example:
    >>> from deltaflow.context import current
    >>> current()  # doctest: +SKIP
    PipelineContext(spark=<SparkSession>, spec=Spec(name='clickstream', ...))

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import Spec


@dataclass(frozen=True)
class PipelineContext:
    """What a running definition may use."""

    spark: SparkSession
    spec: Spec

    def table_path(self, dataset: str) -> str:
        """Where the Delta table of ``dataset`` lives."""
        return self.spec.table_path(dataset)


_CURRENT: ContextVar[PipelineContext | None] = ContextVar("deltaflow_pipeline", default=None)


def current() -> PipelineContext:
    """The active pipeline.

    Raises:
        GraphError: Called outside a running pipeline (e.g. at import time of a definition file).

    """
    ctx = _CURRENT.get()
    if ctx is None:
        raise GraphError(
            "no active pipeline: sources can only be read inside a dataset function run by deltaflow",
            hint="call dp.read_kafka/read_files inside a @dp.table function, not at module level",
        )
    return ctx


@contextmanager
def activate(ctx: PipelineContext) -> Iterator[PipelineContext]:
    """Make ``ctx`` the active pipeline for the duration of the block."""
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)


class SparkProxy:
    """``spark`` as definition files see it: the active pipeline's SparkSession, looked up on use.

    ``spark.read`` and ``spark.readStream`` resolve ``.table(name)`` to the pipeline's datasets.
    """

    def __getattr__(self, name: str) -> Any:
        spark = current().spark
        if name in ("read", "readStream"):
            from deltaflow.sources.delta import PipelineReader

            return PipelineReader(getattr(spark, name), streaming=name == "readStream")
        return getattr(spark, name)

    def __repr__(self) -> str:
        return "<deltaflow spark: the active pipeline's SparkSession>"


def parameter(name: str, default: str | None = None) -> str:
    """A pipeline parameter: a non-``spark.*`` key of ``configuration`` in ``deltaflow.yml``.

    Call it inside a dataset function (parameters belong to the running pipeline).

    Raises:
        ConfigError: The key is not set and there is no default.

    Example:
        >>> @dp.table  # doctest: +SKIP
        ... def bronze_orders():
        ...     return dp.read_files(dp.parameter("orders_landing", "landing/orders"), schema=ORDER_SCHEMA)

    """
    spec = current().spec
    value = spec.parameters.get(name, default)
    if value is None:
        from deltaflow.errors import ConfigError

        raise ConfigError(f"configuration: parameter '{name}' is not set", location=str(spec.path),
                          hint=f"add '{name}: ...' under configuration")
    return value
