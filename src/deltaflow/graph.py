"""The pipeline graph: frozen datasets and flows, with where each was defined.

A *dataset* is a table deltaflow owns (``<storage>/tables/<name>``); a *flow* is one streaming query that
writes into a dataset. ``@dp.table`` declares both at once (the flow is named after the table).

Example:
    >>> loc = SourceLocation("transformations/bronze.py", 12)
    >>> str(loc)
    'transformations/bronze.py:12'

"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DatasetKind = Literal["table"]


@dataclass(frozen=True)
class SourceLocation:
    """A definition's file and line, shown in every error about it."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Dataset:
    """A Delta table the pipeline maintains."""

    name: str
    kind: DatasetKind
    location: SourceLocation
    comment: str | None = None
    partition_cols: tuple[str, ...] = ()
    table_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Flow:
    """One streaming query: ``func()`` returns the DataFrame whose rows are written to ``target``."""

    name: str
    target: str
    func: Callable[[], DataFrame]
    location: SourceLocation
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class PipelineGraph:
    """Datasets and flows registered by a pipeline's definition files."""

    datasets: dict[str, Dataset] = field(default_factory=dict)
    flows: dict[str, Flow] = field(default_factory=dict)

    def add_dataset(self, dataset: Dataset) -> None:
        """Register ``dataset``; a second definition of the same name is an error naming both places."""
        if dataset.name in self.datasets:
            first = self.datasets[dataset.name].location
            raise GraphError(f"dataset '{dataset.name}' is defined twice (first at {first})",
                             location=str(dataset.location))
        self.datasets[dataset.name] = dataset

    def add_flow(self, flow: Flow) -> None:
        """Register ``flow``; flow names are unique within a pipeline."""
        if flow.name in self.flows:
            first = self.flows[flow.name].location
            raise GraphError(f"flow '{flow.name}' is defined twice (first at {first})",
                             location=str(flow.location))
        self.flows[flow.name] = flow

    def validate(self) -> None:
        """Check that every flow writes into a declared dataset and that there is something to run."""
        for flow in self.flows.values():
            if flow.target not in self.datasets:
                raise GraphError(f"flow '{flow.name}' writes to unknown dataset '{flow.target}'",
                                 location=str(flow.location))
        if not self.flows:
            raise GraphError("the pipeline defines no tables or flows",
                             hint="check 'libraries' in deltaflow.yml")
