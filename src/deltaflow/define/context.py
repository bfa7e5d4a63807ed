"""The pipeline a definition runs in: its SparkSession, spec and storage layout.

Definitions only register at import time; their functions are called later by the runner, inside
:func:`activate`, so that ``dp.read_kafka`` and friends know where they are.

Examples:
    >>> from deltaflow.define.context import current
    >>> current()  # doctest: +SKIP
    PipelineContext(spark=<SparkSession>, spec=Spec(name='clickstream', ...))

"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deltaflow.define.scoped import Scoped
from deltaflow.errors import ConfigError, GraphError
from deltaflow.storage.layout import StorageLayout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import Spec


@dataclass(frozen=True)
class PipelineContext:
    """What a running definition may use."""

    spark: SparkSession
    spec: Spec
    layout: StorageLayout = field(default=None)  # type: ignore[assignment]  # default: the spec's storage

    def __post_init__(self) -> None:
        if self.layout is None:
            object.__setattr__(self, "layout", StorageLayout.of(self.spec))


_CURRENT = Scoped[PipelineContext]("pipeline", lambda: GraphError(
    "no active pipeline: sources can only be read inside a dataset function run by deltaflow",
    hint="call dp.read_kafka/read_files inside a @dp.table function, not at module level"))


def current() -> PipelineContext:
    """The active pipeline.

    Raises:
        GraphError: Called outside a running pipeline (e.g. at import time of a definition file).

    """
    return _CURRENT.get()


def has_current() -> bool:
    """Whether a pipeline is active (a dataset function runs, or a run resolves its flows)."""
    return _CURRENT.peek() is not None


#: Make a pipeline the active one for the duration of a block: ``with activate(ctx): ...``.
activate = _CURRENT.bind


def parameter(name: str, default: str | None = None) -> str:
    """A pipeline parameter: a non-``spark.*`` key of ``configuration`` in ``deltaflow.yml``.

    Call it inside a dataset function (parameters belong to the running pipeline).

    Raises:
        ConfigError: The key is not set and there is no default.

    Examples:
        >>> @dp.table  # doctest: +SKIP
        ... def bronze_orders():
        ...     return dp.read_files(dp.parameter("orders_landing", "landing/orders"), schema=ORDER_SCHEMA)

    """
    spec = current().spec
    value = spec.parameters.get(name, default)
    if value is None:
        from deltaflow.define.graph import suggest

        close = suggest(name, spec.parameters)
        raise ConfigError(f"configuration: parameter '{name}' is not set{close}", location=str(spec.path),
                          hint=None if close else f"add '{name}: ...' under configuration")
    return value
