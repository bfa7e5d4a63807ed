"""The pipeline graph: frozen datasets and flows, with where each was defined.

A *dataset* is a streaming table or materialized view deltaflow owns (``<storage>/tables/<name>``), or a
temporary view (a named query, never stored). A *flow* is one query that writes into a dataset:
``@dp.table`` and ``@dp.materialized_view`` declare both at once (the flow is named after the dataset);
``@dp.append_flow`` adds more flows to a streaming table, ``dp.create_auto_cdc_flow`` adds a flow that
upserts change events into one, and ``@dp.foreach_batch_sink`` declares a sink that flows hand each
micro-batch to.

Which datasets a flow reads is only known once its function has run; see :mod:`deltaflow.resolve`.

Examples:
    >>> loc = SourceLocation("transformations/bronze.py", 12)
    >>> str(loc)
    'transformations/bronze.py:12'

"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

DatasetKind = Literal["table", "materialized_view", "temporary_view", "sink"]

KIND_LABELS: dict[str, str] = {
    "table": "streaming table", "materialized_view": "materialized view", "temporary_view": "temporary view",
    "sink": "foreach-batch sink",
}

#: A user function handed each micro-batch of the flows into a sink, with its batch id.
BatchHandler = Callable[["DataFrame", int], None]


#: A dataset or flow name: it names a folder under the storage, so no separator, no dot, no leading "_"
#: (the storage's own folders start with one).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def check_name(what: str, name: str, location: SourceLocation) -> None:
    """Refuse a dataset or flow name that could leave its folder under the storage (``../x``, ``a/b``).

    Raises:
        GraphError: Naming the definition's file:line.

    Examples:
        >>> try:
        ...     check_name("dataset", "../etc", SourceLocation("defs.py", 3))
        ... except GraphError as exc:
        ...     print(str(exc)[:46])
        DF-GRAPH defs.py:3: dataset name '../etc' is n

    """
    if not NAME.fullmatch(name):
        raise GraphError(f"{what} name '{name}' is not allowed: letters, digits, '_' and '-' only, starting "
                         "with a letter or digit (it names a folder under the storage)",
                         location=str(location))


@dataclass(frozen=True)
class SourceLocation:
    """A definition's file and line, shown in every error about it."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class WindowRefresh:
    """How a materialized view grouped by a tumbling time window is refreshed incrementally.

    Created with :func:`deltaflow.by_window`. For each batch of new rows in its inputs, deltaflow finds the
    windows of ``column`` those rows fall in, recomputes the view's query over the inputs' rows in those
    windows only, and replaces the view's rows whose ``output`` is one of those window starts.

    ``lateness`` bounds what an incremental view keeps in Spark's state: the windows that ended less than
    ``lateness`` before the newest event seen. A row later than that is not folded into the state; its
    window is recomputed from the input instead, so the view stays exact (None: every window is kept).
    """

    column: str
    duration: str
    output: str = "window.start"
    lateness: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A table or view of the pipeline."""

    name: str
    kind: DatasetKind
    location: SourceLocation
    comment: str | None = None
    partition_cols: tuple[str, ...] = ()
    table_properties: Mapping[str, str] = field(default_factory=dict)
    schema: StructType | str | None = None
    refresh: WindowRefresh | None = None
    handler: BatchHandler | None = None
    merge_schema: bool = False

    @property
    def stored(self) -> bool:
        """True for datasets kept as Delta tables of the pipeline (tables and materialized views)."""
        return self.kind in ("table", "materialized_view")

    @property
    def runs(self) -> bool:
        """True for datasets whose flows run (everything but temporary views)."""
        return self.kind != "temporary_view"


@dataclass(frozen=True, eq=False)
class AutoCdc:
    """How an auto CDC flow applies change events to its target (see :func:`deltaflow.create_auto_cdc_flow`).

    Examples:
        >>> AutoCdc(keys=("id",), sequence_by=("ts",)).scd_type
        1

    """

    keys: tuple[str, ...]
    sequence_by: tuple[str, ...]
    apply_as_deletes: str | Column | None = None
    apply_as_truncates: str | Column | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    scd_type: Literal[1, 2] = 1
    track_history_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False


@dataclass(frozen=True)
class Flow:
    """One query: ``func()`` returns the DataFrame whose rows go to ``target``."""

    name: str
    target: str
    func: Callable[[], DataFrame]
    location: SourceLocation
    options: Mapping[str, Any] = field(default_factory=dict)
    cdc: AutoCdc | None = None


@dataclass
class PipelineGraph:
    """Datasets and flows registered by a pipeline's definition files."""

    datasets: dict[str, Dataset] = field(default_factory=dict)
    flows: dict[str, Flow] = field(default_factory=dict)
    #: What runs differently from how the definitions ask (``file:line: ...``): an SDP argument with no
    #: meaning here, say. Shown by ``run`` and ``graph``.
    notes: list[str] = field(default_factory=list)
    #: Each dataset's definition fingerprint (:mod:`deltaflow.define.fingerprints`), set by the loader.
    fingerprints: dict[str, str] = field(default_factory=dict)

    def add_dataset(self, dataset: Dataset) -> None:
        """Register ``dataset``; a second definition of the same name is an error naming both places."""
        check_name("dataset", dataset.name, dataset.location)
        if dataset.name in self.datasets:
            first = self.datasets[dataset.name].location
            raise GraphError(f"dataset '{dataset.name}' is defined twice (first at {first})",
                             location=str(dataset.location))
        self.datasets[dataset.name] = dataset

    def add_flow(self, flow: Flow) -> None:
        """Register ``flow``; flow names are unique within a pipeline."""
        check_name("flow", flow.name, flow.location)
        if flow.name in self.flows:
            first = self.flows[flow.name].location
            raise GraphError(f"flow '{flow.name}' is defined twice (first at {first})",
                             location=str(flow.location))
        self.flows[flow.name] = flow

    def flows_into(self, dataset: str) -> list[Flow]:
        """The flows writing into ``dataset``, in definition order."""
        return [f for f in self.flows.values() if f.target == dataset]

    def validate(self) -> None:
        """Check that every flow writes into a declared dataset of the right kind, and each table is fed."""
        for flow in self.flows.values():
            target = self.datasets.get(flow.target)
            if target is None:
                raise GraphError(f"flow '{flow.name}' writes to unknown dataset '{flow.target}'"
                                 f"{suggest(flow.target, self.datasets)}", location=str(flow.location),
                                 hint="declare it with dp.create_streaming_table or @dp.table")
            if flow.name != flow.target and target.kind not in ("table", "sink"):
                raise GraphError(f"flow '{flow.name}' targets {KIND_LABELS[target.kind]} "
                                 f"'{flow.target}'; flows only write to streaming tables and sinks",
                                 location=str(flow.location))
            if flow.cdc is not None and target.kind != "table":
                raise GraphError(f"auto CDC flow '{flow.name}' targets {KIND_LABELS[target.kind]} "
                                 f"'{flow.target}'", location=str(flow.location),
                                 hint=f"declare the target with dp.create_streaming_table('{flow.target}')")
        for dataset in self.datasets.values():
            cdc = [f for f in self.flows_into(dataset.name) if f.cdc is not None]
            if cdc and len(cdc) != len(self.flows_into(dataset.name)):
                raise GraphError(f"streaming table '{dataset.name}' mixes auto CDC and append flows",
                                 location=str(dataset.location),
                                 hint="write the appended rows to another table")
            if len(cdc) > 1:
                raise GraphError(f"streaming table '{dataset.name}' has {len(cdc)} auto CDC flows "
                                 f"({', '.join(f.name for f in cdc)}); one writes it",
                                 location=str(cdc[1].location),
                                 hint="union the change streams in a temporary view and use that as source")
            if not self.flows_into(dataset.name):
                raise GraphError(f"{KIND_LABELS[dataset.kind]} '{dataset.name}' has no flow writing into it",
                                 location=str(dataset.location),
                                 hint=f"add @dp.append_flow(target='{dataset.name}')")
        if not self.flows:
            raise GraphError("the pipeline defines no tables or flows",
                             hint="check 'libraries' in deltaflow.yml")


def suggest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
